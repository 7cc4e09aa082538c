"""The environment of a test that grades with the LLM judge against the fake server."""

from __future__ import annotations

import pytest


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test key in $OPENAI_API_KEY; no base URL, model or price table from the machine."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-env")
    for name in ("OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
