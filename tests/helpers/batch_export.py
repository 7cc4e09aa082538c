"""The batch judge and the pairs (with repeated texts, metadata and escapes) the export tests
share, and the plain rendering the fast one is checked against."""

from __future__ import annotations

import string

from grader.batch.adapter import LLMBatchJudge
from grader.errors import PromptError
from grader.judges.llm.judge import LLMJudge
from grader.models import Doc, Query
from grader.prompts.files import OPTIONAL_FIELDS


def batch_judge(prompt: str = "passage") -> LLMBatchJudge:
    return LLMBatchJudge(
        LLMJudge(model="fake-model", prompt=prompt, base_url="http://127.0.0.1:9/v1")
    )


def export_pairs(n: int) -> list[tuple[Query, Doc]]:
    """`n` pairs, 4 per query; every 5th repeats an earlier pair's texts under a new doc id
    (one line, two id pairs), some with metadata, tags and characters JSON escapes."""
    out: list[tuple[Query, Doc]] = []
    for i in range(n):
        query = Query(query_id=f"q{i // 4}", text=f'query {i // 4} "quoted" é')
        if i % 5 == 4:
            first = out[i - 3][1]
            out.append((out[i - 3][0], Doc(doc_id=f"copy{i}", text=first.text, title=first.title)))
            continue
        meta = {"path": f"src/m{i}.py", "n": i} if i % 3 == 0 else {}
        text = f"doc {i} </passage> tab\there \u2028 " + "word " * (i % 9)
        out.append((query, Doc(doc_id=f"d{i}", text=text, title=f"T{i}", metadata=meta)))
    return out


def reference_render(template: str, values: dict[str, str]) -> str:
    """string.Template line by line, leaving out a line whose placeholders are all optional
    and all empty (and a stray `$` anywhere a PromptError first): the rendering rule of
    grader.prompts, written the plain way."""
    lines = []
    for line in template.splitlines():
        names = set()
        for match in string.Template.pattern.finditer(line):
            if match.group("invalid") is not None:
                raise PromptError("stray $")
            if match.group("named") or match.group("braced"):
                names.add(match.group("named") or match.group("braced"))
        lines.append((line, names))
    kept = []
    for line, names in lines:
        optional = {n for n in names if n in OPTIONAL_FIELDS}
        if optional and optional == names and not any(values.get(n) for n in optional):
            continue
        kept.append(string.Template(line).substitute(values))
    return "\n".join(kept).strip()
