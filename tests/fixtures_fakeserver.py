"""Pytest fixtures for the fake OpenAI-compatible server (imported by tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakeserver import MODELS, FakeServer, default_grade


@pytest.fixture(scope="session")
def _fake_server_session() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def fake_server(_fake_server_session: FakeServer) -> Iterator[FakeServer]:
    """A running fake server (one per session), reset to its defaults for each test."""
    server = _fake_server_session
    server.reset()
    server.reject_formats = set()
    server.default_fault = None
    server.flavour = None
    server.models = dict(MODELS)
    server.logprobs = True
    server.cached_tokens = 0
    server.latency_ms = 0.0
    server.models_fault = None
    server.slots, server.service_s = None, 0.0
    server.grade_fn = default_grade
    server.reason = "Scripted by the fake server."
    yield server
    server.reset()
