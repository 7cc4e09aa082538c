"""The key goes only where it should (issue 36, section 7).

`OPENAI_API_KEY` is never sent to a server on this machine, however its address is spelled: the
fake server on 127.0.0.1, reached through `127.1`, `2130706433`, `0x7f000001` and
`[::ffff:127.0.0.1]` (the HTTP client connects to 127.0.0.1 for each), receives the placeholder,
never the key. Credentials written into a base URL never reach stderr: neither in the
not-answering error nor in the model-list notice.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.judges.llm.endpoint import PLACEHOLDER_KEY, is_loopback
from grader.redact import MASK, redact_url, url_secrets
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files

SECRET = "sk-never-to-loopback-1234"
SPELLINGS = ["127.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]", "localhost."]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.mark.parametrize("host", SPELLINGS[:4])
def test_the_key_is_not_sent_to_loopback_however_spelled(
    server: FakeServer,
    tmp_path: Path,
    host: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    files = write_grade_files(tmp_path, n_queries=1, depth=2)
    url = f"http://{host}:{server.port}/v1"
    args = files.args("--base-url", url, "--store", tmp_path / "s.db", "--quiet")
    assert main([*args, "--model", "fake-model"]) == 0, capsys.readouterr().err
    assert server.counts["ok"] == files.n_pairs  # the requests did reach the server
    sent = {h.get("authorization") for h in server.headers}
    assert sent == {f"Bearer {PLACEHOLDER_KEY}"}


@pytest.mark.parametrize("host", SPELLINGS)
def test_loopback_spellings_are_loopback(host: str) -> None:
    assert is_loopback(f"http://{host}:8000/v1")


def test_a_name_of_this_machine_is_loopback_when_the_resolver_says_so() -> None:
    name = socket.gethostname()
    addresses = {str(info[4][0]) for info in socket.getaddrinfo(name, None)}
    local = all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)
    assert is_loopback(f"http://{name}:8000/v1") == local


@pytest.mark.parametrize("host", ["10.0.0.1", "2130706434x", "gpu-box", "[2001:db8::1]", "8.8.8.8"])
def test_other_hosts_are_not(host: str) -> None:
    assert not is_loopback(f"http://{host}:8000/v1")


def test_a_url_is_shown_without_its_password() -> None:
    url = "http://user:SECRET@example.org:8000/v1"
    assert redact_url(url) == f"http://user:{MASK}@example.org:8000/v1"
    assert "SECRET" in url_secrets(url)
    assert redact_url("http://example.org/v1") == "http://example.org/v1"


def test_credentials_in_the_url_never_reach_stderr(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model-list notice names the URL (the server lists another model) ...
    files = write_grade_files(tmp_path, n_queries=1, depth=1)
    url = f"http://user:SECRET-IN-URL@127.0.0.1:{server.port}/v1"
    args = files.args("--base-url", url, "--store", tmp_path / "s.db")
    assert main([*args, "--model", "not-listed"]) == 0
    err = capsys.readouterr().err
    assert "lists the models" in err and "SECRET-IN-URL" not in err
    # ... and so does the not-answering error (nothing listens on the port).
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = f"http://user:SECRET-IN-URL@127.0.0.1:{port}/v1"
    files = write_grade_files(tmp_path, n_queries=2, depth=8)
    args = files.args("--base-url", dead, "--store", tmp_path / "t.db", "--model", "m")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "is not answering" in err and "SECRET-IN-URL" not in err
