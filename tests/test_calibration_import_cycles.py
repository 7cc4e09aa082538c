"""No module of calibration imports itself back through others (a cycle), even lazily."""

from pathlib import Path

import grimp
import pytest


def test_calibration_has_no_import_cycle() -> None:
    graph = grimp.build_graph("calibration")
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported.startswith("calibration") and graph.chain_exists(imported, module):
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
