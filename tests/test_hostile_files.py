"""Never a traceback, on any input: a `.gz` or `.xz` with bytes flipped mid-file, a
decompression bomb of blank or comment lines, stdin spooled into a full `$TMPDIR`, `batch
export` to a full disk, and `batch import` given a request file are each exit 2 with the file
and the cause named. The full disks are real: a 64 KiB tmpfs mounted for the test (skipped,
saying why, where mounting is not allowed)."""

from __future__ import annotations

import gzip
import lzma
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.batch.files.exports import ExportState
from grader.cli.main import main
from grader.io.streams import BLANK_LIMIT_ENV
from grader.store.store import Store
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import MODEL, cli_export

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=4, depth=5)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 64 KiB tmpfs of its own, unmounted after the test."""
    point = tmp_path / "small"
    point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _flipped(data: bytes, compress: str) -> bytes:
    """`data` compressed, then 64 bytes in its middle flipped."""
    packed = bytearray(gzip.compress(data) if compress == "gz" else lzma.compress(data))
    middle = len(packed) // 2
    for i in range(middle, middle + 64):
        packed[i] ^= 0x5A
    return bytes(packed)


def _exit_2(args: list[str], capsys: pytest.CaptureFixture[str], *said: str) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert all(s in err for s in said), err
    return err


@pytest.mark.parametrize("compress", ["gz", "xz"])
@pytest.mark.parametrize("role", ["run", "qrels", "grade --run", "grade --docs"])
def test_a_corrupt_compressed_file_is_exit_2_naming_it(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str], compress: str, role: str
) -> None:
    qrels = tmp_path / "q.qrels"
    qrels.write_text("".join(f"q{q} 0 d{q * 5} 1\n" for q in range(4)))
    more = {  # 20,000 more distinct lines: the flipped bytes are in the middle of them
        "run": "q{q} Q0 x{i} {r} {s:.6f} r\n",
        "qrels": "q{q} 0 x{i} {g}\n",
        "grade --run": "q{q} Q0 x{i} {r} {s:.6f} r\n",
        "grade --docs": '{{"doc_id": "x{i}", "text": "padding {s:.6f}"}}\n',
    }[role]
    source = {"run": files.run, "qrels": qrels, "grade --run": files.run}.get(role, files.docs)
    data = source.read_text() + "".join(
        more.format(q=i % 4, i=i, r=i // 4 + 6, s=1 / (i + 7), g=i % 4) for i in range(20_000)
    )
    bad = tmp_path / f"bad.{compress}"
    bad.write_bytes(_flipped(data.encode(), compress))
    args = {
        "run": ["evaluate", str(qrels), str(bad)],
        "qrels": ["evaluate", str(bad), str(files.run)],
        "grade --run": files.args(
            "--judge", "lexical", "--store", tmp_path / "s.db", "--skip-missing"
        ),
        "grade --docs": files.args("--judge", "lexical", "--store", tmp_path / "s.db"),
    }[role]
    if role.startswith("grade"):
        flag = role.split()[1]
        args[args.index(flag) + 1] = str(bad)
    kind = "gzip" if compress == "gz" else "xz"
    _exit_2(args, capsys, f"{bad}", f"cannot read {kind} data")


def test_a_corrupt_gz_on_stdin_is_exit_2(files: GradeFiles, tmp_path: Path) -> None:
    qrels = tmp_path / "q.qrels"
    qrels.write_text("q0 0 d0 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli.main", "evaluate", str(qrels), "-"],
        input=_flipped(
            b"".join(b"q%d Q0 x%d 1 %f r\n" % (i % 4, i, 1 / (i + 7)) for i in range(20_000)),
            "gz",
        ),
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 2
    assert b"stdin" in done.stderr and b"cannot read gzip data" in done.stderr
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("line", [b"\n", b"# comment\n", b"  \t\n"])
@pytest.mark.parametrize("role", ["run", "qrels", "queries"])
def test_a_bomb_of_blank_or_comment_lines_stops_at_the_bound(
    files: GradeFiles,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    line: bytes,
    role: str,
) -> None:
    """A 64 KiB bound (set for the test) stops a file of 2 MiB of blank or comment lines,
    before or after a data line; a file with data lines between them reads."""
    monkeypatch.setenv(BLANK_LIMIT_ENV, str(64 << 10))
    head = {"run": b"q0 Q0 d0 1 1.0 r\n", "qrels": b"q0 0 d0 1\n", "queries": b"q0\tcache\n"}
    bomb = tmp_path / f"bomb.{role}.gz"
    bomb.write_bytes(gzip.compress(head[role] + line * ((2 << 20) // len(line)), 9))
    qrels = tmp_path / "q.qrels"
    qrels.write_text("q0 0 d0 1\n")
    args = {
        "run": ["evaluate", str(qrels), str(bomb)],
        "qrels": ["evaluate", str(bomb), str(files.run)],
        "queries": files.args("--judge", "lexical", "--store", tmp_path / "s.db"),
    }[role]
    if role == "queries":
        args[args.index("--queries") + 1] = str(bomb)
    _exit_2(args, capsys, str(bomb), "in a row without a data line", BLANK_LIMIT_ENV)
    spread = tmp_path / "spread.qrels.gz"  # the same blank lines, a data line every 32 KiB
    block = line * ((32 << 10) // len(line))
    spread.write_bytes(gzip.compress(b"".join(b"q0 0 d%d 1\n" % i + block for i in range(64))))
    assert main(["evaluate", str(spread), str(files.run)]) == 0


def test_a_bomb_stops_at_the_default_bound(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a bound set: a million blank lines in a row stop the reader (2 MiB here)."""
    bomb = tmp_path / "bomb.qrels.gz"
    bomb.write_bytes(gzip.compress(b"\n" * (2 << 20), 9))
    _exit_2(["evaluate", str(bomb), str(files.run)], capsys, "in a row without a data line")


def test_stdin_into_a_full_tmpdir_is_exit_2(
    files: GradeFiles, tmp_path: Path, full_disk: Path
) -> None:
    qrels = tmp_path / "q.qrels"
    qrels.write_text("q0 0 d0 1\n")
    run = b"".join(b"q%d Q0 x%d %d 1.0 r\n" % (i % 4, i, i // 4 + 1) for i in range(10_000))
    assert len(run) > 3 * (64 << 10)  # more than the tmpfs holds
    for args in (
        ["evaluate", str(qrels), "-"],
        files.args("--judge", "lexical", "--store", tmp_path / "s.db"),
    ):
        if args[0] == "grade":
            args[args.index("--run") + 1] = "-"
        done = subprocess.run(
            [sys.executable, "-m", "grader.cli.main", *map(str, args)],
            input=run,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(full_disk)},
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert b"No space left on device" in done.stderr and b"TMPDIR" in done.stderr
        assert b"Traceback" not in done.stderr
    assert not [p for p in full_disk.rglob("*") if p.is_file()]


@pytest.mark.slow
def test_batch_export_to_a_full_disk_leaves_nothing(
    files: GradeFiles, tmp_path: Path, full_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The request files do not fit: exit 2, no file (nor `.tmp`) left, the export not listed;
    an export to a roomy folder then exports every pair (none waits in the failed one)."""
    (tmp_path / "big").mkdir()
    big = write_grade_files(tmp_path / "big", n_queries=4, depth=30)
    store = tmp_path / "s.db"
    args = [
        "batch",
        "export",
        "--store",
        str(store),
        "--queries",
        str(big.queries),
        "--docs",
        str(big.docs),
        "--run",
        str(big.run),
        *MODEL,
        "--quiet",
        "--batch-max-requests",
        "10",
    ]
    _exit_2([*args, "--out-dir", str(full_disk / "ex")], capsys, "no room left", str(full_disk))
    assert not [p for p in full_disk.rglob("*") if p.is_file()]
    with Store(store) as opened, ExportState(opened) as state:
        assert state.exports() == []
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT COUNT(*) FROM export_lines").fetchone() == (0,)
    requests = cli_export(big, store, tmp_path / "roomy", "--depth", "30")
    assert sum(len(p.read_text().splitlines()) for p in requests) == big.n_pairs
    assert "wait in export" not in capsys.readouterr().err


def test_batch_import_of_a_request_file_is_refused(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    requests = cli_export(files, store, tmp_path / "ex")
    for given in ([str(requests[0])], [str(tmp_path / "ex")]):
        _exit_2(
            ["batch", "import", "--store", str(store), *given, "--quiet"],
            capsys,
            f"{requests[0]}:1: this is a request file",
            "nothing was imported",
        )
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judgments").fetchone() == (0,)
