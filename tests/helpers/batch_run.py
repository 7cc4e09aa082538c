"""What the `relgrade batch run` tests share: export a few request files, check the store's
grades against the fake server's, and a stand-in `vllm` on PATH."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from grader.batch.files.exports import split_custom_id
from grader.store.store import Store
from tests.fakeserver_replies import default_grade
from tests.helpers.judgments import stored_judgments

ROOT = Path(__file__).resolve().parents[2]

STAND_IN = """#!{python}
# A stand-in for `vllm run-batch -i IN -o OUT --model M` (tests): answers through the fake
# server at $FAKE_VLLM_URL in run-batch's output shape; after writing the file named in
# $FAKE_VLLM_KILL_AFTER it kills the process that started it (a node that died between files).
import os, signal, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests import fake_engine

args = sys.argv[1:]
assert args[0] == "run-batch", args
src, out, model = (Path(args[args.index(f)+1]) for f in ("-i", "-o", "--model"))
with open(os.environ["FAKE_VLLM_LOG"], "a") as log:
    log.write(f"{{src.name}} {{model}}\\n")
fake_engine.run_batch(src, out, fake_engine.http_answer(os.environ["FAKE_VLLM_URL"]))
if os.environ.get("FAKE_VLLM_KILL_AFTER") == src.name:
    os.kill(os.getppid(), signal.SIGKILL)
"""


def stand_in_vllm(folder: Path) -> Path:
    """A folder holding an executable `vllm` (the stand-in); put it first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "vllm"
    script.write_text(STAND_IN.format(python=sys.executable, root=str(ROOT)))
    script.chmod(0o755)
    return folder


def expected_grades(requests: list[Path]) -> dict[str, int]:
    """The fake server's grade of each exported request, by content key."""
    found = {}
    for path in requests:
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = json.loads(raw)
            ids = split_custom_id(line["custom_id"])
            assert ids is not None
            found[ids[1]] = default_grade(line["body"])
    return found


def stored_grades(db: Path) -> dict[str, int | None]:
    """The grade of each ok judgment of the store, by key."""
    with Store(db) as store:
        return {j.key: j.grade for j in stored_judgments(store, status="ok")}


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of a `relgrade` child: this checkout importable, plus `extra`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env
