"""A prompt's `name@version` means one text: an edited prompt under an unchanged version is refused
(unless `--allow-changed-prompt`); a version bump with identical requests is legal, with a note."""

from __future__ import annotations

import dataclasses
from typing import Any

from grader.errors import PromptError
from grader.prompts import PromptSpec, load_prompt
from grader.spelling import option
from grader.store.store import Store

_NOT_REQUEST = ("name", "version", "sha256", "source", "description")
"""PromptSpec fields that do not change what is sent (the rest makes the request)."""


def stored_prompt_versions(store: Store, name: str) -> dict[str, set[str]]:
    """The versions of prompt `name` the store's judgments record, each with its sha256s."""
    rows = store._conn.execute(  # read-only query on the store's own connection
        "SELECT DISTINCT prompt_version, prompt_sha FROM judgment_sources s WHERE prompt_name = ?"
        " AND EXISTS (SELECT 1 FROM judgments j WHERE j.source_id = s.id)",
        (name,),
    )
    found: dict[str, set[str]] = {}
    for version, sha in rows:
        if version is not None and sha:
            found.setdefault(str(version), set()).add(str(sha))
    return found


def _request_fields(spec: PromptSpec) -> dict[str, Any]:
    data = dataclasses.asdict(spec)
    return {k: v for k, v in data.items() if k not in _NOT_REQUEST}


def _same_request_as(spec: PromptSpec, version: str, shas: set[str]) -> bool:
    """Whether a loadable prompt `spec.name@version` with one of `shas` asks what `spec` asks."""
    try:
        other = load_prompt(f"{spec.name}@{version}")
    except PromptError:
        return False  # not a shipped prompt: its text is not at hand to compare
    return other.sha256 in shas and _request_fields(other) == _request_fields(spec)


def check_prompt_version(
    store: Store, spec: PromptSpec, *, allow_changed: bool = False
) -> str | None:
    """Refuse `spec` (PromptError) when the store holds its name@version with another sha256,
    unless `allow_changed`; else a note for stderr when it is allowed or only bumps a version."""
    versions = stored_prompt_versions(store, spec.name)
    stored = versions.get(spec.version, set())
    if stored and spec.sha256 not in stored:
        olds = ", ".join(sorted(s[:12] for s in stored))
        detail = (
            f"{spec.source} has sha256 {spec.sha256[:12]}, the judgments of {spec.id} in "
            f"{store.path} have {olds}"
        )
        if not allow_changed:
            raise PromptError(
                f"prompt {spec.id} changed since it was used: bump its version ({detail}; set "
                "version in the file to a new value, or pass "
                f"{option('--allow-changed-prompt', 'allow_changed_prompt=True')} to store "
                "both texts under one name@version)"
            )
        return f"prompt {spec.id} changed since it was used ({detail}); kept by " + option(
            "--allow-changed-prompt", "allow_changed_prompt=True"
        )
    if stored:
        return None
    for version, shas in sorted(versions.items()):
        if _same_request_as(spec, version, shas):
            return (
                f"prompt {spec.id} asks exactly what {spec.name}@{version} (in the store) asked: "
                "only its version changed, so nothing changed in what is sent; its grades will be "
                "requested (and paid) again under the new version"
            )
    return None
