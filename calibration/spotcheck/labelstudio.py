"""Label Studio tasks from a blind sample, and their labeling config (`<stem>.config.xml`).

Each choice's hotkey is its grade (Label Studio's default 1..4 would record 1 for the key "2"),
and documents keep their line breaks. Exports are read back by `labelstudio_import`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import quoteattr

from calibration.spotcheck.blind import BlindItem
from grader.io.files import atomic_write

GRADE_FIELD = "grade"


def labeling_config(scale: Sequence[tuple[int, str]] | None = None) -> str:
    """The labeling config XML; `scale` ((grade, meaning), ...) becomes the choices' hints and a
    legend above them. Each choice's hotkey is its grade."""
    meanings = {g: m for g, m in (scale or []) if m}
    choices = "".join(
        f"    <Choice value={quoteattr(str(g))} hotkey={quoteattr(str(g))}"
        + (f" hint={quoteattr(meanings[g])}" if g in meanings else "")
        + "/>\n"
        for g in range(4)
    )
    legend = "".join(
        f'    <Header size="6" value={quoteattr(f"{g}: {meanings[g]}")}/>\n'
        for g in range(4)
        if g in meanings
    )
    return (
        "<View>\n"
        "  <Style>.htx-text { white-space: pre-wrap; }</Style>\n"
        '  <Header value="$query"/>\n'
        '  <Text name="document" value="$document"/>\n'
        + (f"  <View>\n{legend}  </View>\n" if legend else "")
        + f'  <Choices name="{GRADE_FIELD}" toName="document" choice="single" required="true">\n'
        f"{choices}"
        "  </Choices>\n"
        '  <TextArea name="notes" toName="document" required="false"/>\n'
        "</View>\n"
    )


def write_labelstudio_tasks(
    path: str | Path, items: Sequence[BlindItem], scale: Sequence[tuple[int, str]] | None = None
) -> Path:
    """Write the tasks JSON and its labeling config beside it; returns the config's path."""
    tasks = []
    for item in items:
        data: dict[str, str] = {
            "query_id": item.query_id,
            "doc_id": item.doc_id,
            "query": item.query,
            "document": item.document,
        }
        if item.title:
            data["title"] = item.title
        if item.path:
            data["path"] = item.path
        tasks.append({"data": data})
    with atomic_write(path) as fh:
        json.dump(tasks, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    p = Path(path)
    config = p.with_name(p.name.split(".", 1)[0] + ".config.xml")
    with atomic_write(config) as fh:
        fh.write(labeling_config(scale))
    return config
