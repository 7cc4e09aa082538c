"""No module of the library (grader, calibration, relgrade) imports itself back through others
(a cycle), even lazily: the import graph is a DAG of modules."""

from pathlib import Path

import grimp
import pytest

PACKAGES = ("grader", "calibration", "relgrade")


def test_the_library_has_no_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES)
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported.startswith(PACKAGES) and graph.chain_exists(imported, module):
                cycles.append((module, imported, graph.find_shortest_chain(imported, module)))
    assert cycles == []


def test_the_check_sees_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic import b\n")
    (package / "b.py").write_text("def f():\n    from cyclic import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclic", cache_dir=None)
    assert graph.chain_exists("cyclic.b", "cyclic.a") and graph.chain_exists("cyclic.a", "cyclic.b")
