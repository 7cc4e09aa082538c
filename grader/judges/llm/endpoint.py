"""Which API key goes to which server: the one rule, for the library and the command line.

A key given explicitly goes anywhere. `OPENAI_API_KEY` goes to any server except one on this machine
(however its address is spelled). No key: an error for OpenAI's own endpoint, `PLACEHOLDER_KEY` for
any other server.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from urllib.parse import urlparse

from grader.errors import JudgeError

KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
PLACEHOLDER_KEY = "no-key-needed"
"""The one key sent to a server that needs none (the SDK insists on some key)."""
OPENAI_HOST = "api.openai.com"


def host_of(base_url: str | None) -> str:
    """The host name of `base_url`, lower case ("" when there is none)."""
    return (urlparse(base_url).hostname or "").lower() if base_url else ""


def is_openai(base_url: str | None) -> bool:
    """Whether requests to `base_url` go to OpenAI's own API (None: the SDK's default, OpenAI)."""
    return base_url is None or host_of(base_url) == OPENAI_HOST


def host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address the client connects to for a numeric `host`, however spelled (`127.1`,
    `0x7f000001`: `inet_aton`'s forms; IPv4-mapped IPv6 as IPv4); None for a name."""
    host = host.strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


RESOLVE_S = 2.0


def resolved(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses the system resolver gives for `host` within RESOLVE_S seconds (or none)."""
    found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []

    def look_up() -> None:
        with contextlib.suppress(OSError, UnicodeError, ValueError):
            for *_, sockaddr in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP):
                address = host_address(str(sockaddr[0]).split("%")[0])
                if address is not None:
                    found.append(address)

    worker = threading.Thread(target=look_up, name="relgrade-resolve", daemon=True)
    worker.start()
    worker.join(RESOLVE_S)
    return [] if worker.is_alive() else found


def is_loopback(base_url: str | None) -> bool:
    """Whether `base_url` is a server on this machine (localhost, 127.0.0.0/8, ::1, 0.0.0.0)."""
    host = host_of(base_url).rstrip(".")
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    address = host_address(host)
    addresses = [address] if address is not None else resolved(host)
    return any(a.is_loopback or a.is_unspecified for a in addresses)


def env_key_for(base_url: str | None, environ_key: str | None) -> str | None:
    """`environ_key` (the value of OPENAI_API_KEY) if it may go to `base_url`: not to loopback."""
    return None if is_loopback(base_url) else (environ_key or None)


def api_key_for(base_url: str | None, key: str | None, *, sending: bool = True) -> str:
    """The key to send to `base_url` (module docstring); a dry run (`sending=False`) needs none."""
    if key:
        return key
    if sending and is_openai(base_url):
        where = base_url or "https://api.openai.com/v1"
        raise JudgeError(f"no API key for {where}: set the {KEY_ENV} environment variable")
    return PLACEHOLDER_KEY
