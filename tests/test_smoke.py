import subprocess
import sys


def test_cli_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "grader.cli.main", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    for command in ("evaluate", "grade", "calibrate", "sample", "annotate", "regrade", "batch"):
        assert command in out.stdout
