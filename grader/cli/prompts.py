"""`relgrade prompts list|show NAME|render NAME`: the prompt files, and the exact request they make.

`render` prints the chat.completions request body (JSON) one pair would send, so a prompt can be
read as the model will see it, in any output mode, before a cent is spent.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from grader.cli.flags import add_command
from grader.cli.stderr import say
from grader.models import Doc, Query
from grader.prompts import OUTPUT_MODES, list_prompts, load_prompt, render_messages


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "prompts",
        description="List the shipped prompts, show one file, or render the exact request.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    listing = add_command(
        actions,
        "list",
        help="the shipped prompts: name@version, sha256, path",
        description="List the shipped prompt files, one per line: file stem, name@version, "
        "the first 12 hex digits of the file's sha256, and its description.",
    )
    listing.set_defaults(func=run_list)

    show = add_command(
        actions,
        "show",
        help="print a prompt file as it is on disk",
        description="Print a prompt file exactly as it is on disk, after a comment line with "
        "its name@version, sha256 and path.",
    )
    show.add_argument("name", help="passage-v1, passage@1, passage (latest) or a .toml path")
    show.set_defaults(func=run_show)

    render = add_command(
        actions,
        "render",
        help="print the request body one pair would send",
        description="Print the chat.completions request body (JSON) that grading one pair "
        "with this prompt would send, in any output mode; --messages-only prints the "
        "messages as plain text. Sends nothing.",
    )
    render.add_argument("name", help="passage-v1, passage@1, passage (latest) or a .toml path")
    render.add_argument("--query", required=True, help="the query text")
    render.add_argument("--document", required=True, help="the document text")
    render.add_argument("--title", default=None)
    for field in ("path", "symbol", "language"):
        render.add_argument(f"--{field}", default=None, help=f"document metadata `{field}`")
    render.add_argument("--model", default="MODEL", help="model name put in the body")
    render.add_argument(
        "--mode", choices=OUTPUT_MODES, default="json_schema", help="output mode to render"
    )
    render.add_argument(
        "--messages-only", action="store_true", help="print the messages as plain text"
    )
    render.set_defaults(func=run_render)


def run_list(args: argparse.Namespace) -> int:
    for spec in list_prompts():  # judge prompts only: the unknown-prompt error names the same
        print(f"{spec.file_stem}\t{spec.id}\t{spec.sha256[:12]}\t{spec.description}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    spec = load_prompt(args.name)
    print(f"# {spec.id}  sha256 {spec.sha256}  ({spec.source})")
    print(Path(spec.source).read_text(encoding="utf-8"), end="")
    return 0


def run_render(args: argparse.Namespace) -> int:
    from grader.judges.llm.server_settings import ServerSettings

    spec = load_prompt(args.name)
    metadata = {k: getattr(args, k) for k in ("path", "symbol", "language") if getattr(args, k)}
    query = Query(query_id="q", text=args.query)
    doc = Doc(doc_id="d", text=args.document, title=args.title, metadata=metadata)
    messages, truncated = render_messages(spec, query, doc, mode=args.mode)
    if truncated:  # on stderr, so stdout stays exactly the request
        say(f"note: document truncated to {spec.doc_budget_chars} characters")
    if args.messages_only:
        for message in messages:
            print(f"--- {message['role']} ---\n{message['content']}")
        return 0
    body = ServerSettings(args.mode, logprobs=spec.logprobs).body(
        spec, args.model, messages, args.mode
    )
    print(json.dumps(body, indent=2, ensure_ascii=False))
    return 0
