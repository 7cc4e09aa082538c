"""The entry point: every command is listed, loads, and `--help` works without the others."""

import subprocess
import sys

import pytest

from grader.cli.flags import COMMANDS
from grader.cli.main import build_parser, main


def test_cli_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "grader.cli.main", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    for command in ("evaluate", "grade", "calibrate", "sample", "annotate", "regrade", "batch"):
        assert command in out.stdout


def test_help_does_not_load_the_openai_sdk() -> None:
    code = (
        "import contextlib, sys\n"
        "from grader.cli.main import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print('openai loaded:', 'openai' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip().endswith("openai loaded: False")


def test_every_command_module_registers() -> None:
    parser = build_parser(None)
    for name in COMMANDS:
        with pytest.raises(SystemExit) as done:
            parser.parse_args([name, "--help"])
        assert done.value.code == 0


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["frobnicate"])
    assert done.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
