"""`relgrade annotate SAMPLE.csv`: grade a blind sample in a local web page, or export the grades.

Serve: a page on 127.0.0.1; keys 0-3 grade, <- / k back, -> / j skip. Each grade is appended to
`SAMPLE.<annotator>.grades.jsonl`; a second person uses another `--annotator`. For a uniform or
active sample the page shows the live confidence sequence and when one may stop (`--target`).

Export: `--export human.csv [--annotator NAME]` writes that person's latest grades (qrels for
.qrels/.txt) with the manifest beside, for `calibrate --human` (or `--second-human`).
"""

from __future__ import annotations

import argparse
import getpass
import re
import time
import webbrowser
from pathlib import Path
from typing import Any

from calibration.spotcheck.annotate.gradelog import GradeLog, grade_log_path
from calibration.spotcheck.annotate.server import AnnotateServer
from calibration.spotcheck.blind import (
    HumanGrade,
    neutral_scale,
    prompt_scale,
    read_blind_csv,
    write_human_grades,
)
from calibration.spotcheck.manifest import (
    Manifest,
    copy_manifest_beside,
    find_manifest,
    read_manifest,
)
from calibration.spotcheck.stopping import DrawOrder, LiveStopping
from grader.cli.flags import add_command
from grader.cli.stderr import say
from grader.errors import InputError, RelgradeError
from grader.job.options import refuse_clashes


def register(sub: Any) -> None:
    parser = add_command(sub, "annotate", __doc__)
    parser.add_argument("sample", metavar="SAMPLE.csv", help="blind sample from `relgrade sample`")
    parser.add_argument(
        "--annotator", help="who is grading (names the grades file; default: your login name)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: a free one)")
    parser.add_argument("--no-browser", action="store_true", help="only print the URL")
    parser.add_argument("--prompt", help="prompt whose scale meanings to show")
    parser.add_argument(
        "--target",
        type=float,
        default=0.05,
        help="half-width of the relevant share's confidence sequence at which the page says "
        "you may stop (default 0.05)",
    )
    parser.add_argument(
        "--llm",
        metavar="J",
        help="LLM grades the sample was drawn from, for the live figures (default: the "
        "judgments file named in the manifest)",
    )
    parser.add_argument(
        "--threshold",
        type=int,
        choices=(1, 2, 3),
        help="relevant = grade >= this (default: the sample's, else 2)",
    )
    parser.add_argument(
        "--export",
        metavar="HUMAN.csv",
        help="write this annotator's grades (CSV, or qrels for .qrels/.txt)",
    )
    parser.set_defaults(func=run)


def default_annotator() -> str:
    """The login name made safe for a file name, or `annotator`."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        name = ""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip("._-")[:64]
    return name or "annotator"


def _scale(args: argparse.Namespace, manifest: Manifest | None) -> list[tuple[int, str]]:
    name = args.prompt or (manifest.prompt if manifest else None)
    if not name:
        say("scale: no prompt named; showing plain 0..3 (pass --prompt NAME)")
        return neutral_scale()
    try:
        return prompt_scale(name)
    except RelgradeError as exc:
        if args.prompt:
            raise
        say(f"scale: {exc}; showing plain 0..3 (pass --prompt NAME)")
        return neutral_scale()


def run(args: argparse.Namespace) -> int:
    refuse_clashes([("SAMPLE.csv", args.sample)], [("--export", args.export)])
    if not 0 < args.target < 1:
        raise InputError(f"--target must be in (0, 1), got {args.target}", hint="e.g. 0.05")
    annotator = args.annotator or default_annotator()
    log = GradeLog(grade_log_path(args.sample, annotator), annotator)
    items = read_blind_csv(args.sample)
    found = find_manifest(args.sample)
    manifest = read_manifest(found) if found else None
    if args.export:
        return _export(args, items, log, manifest)
    server = AnnotateServer(
        items,
        log,
        _scale(args, manifest),
        host=args.host,
        port=args.port,
        title=f"relgrade annotate: {Path(args.sample).name}",
        live=_live(args, manifest),
    )
    url = server.start()
    # Everything after the server starts is inside the try: a Ctrl-C that comes as soon as the
    # "open" line is out (before the loop below is reached) still stops the server cleanly.
    try:
        if server.address[0] not in ("127.0.0.1", "::1"):
            say(
                f"warning: listening on {server.address[0]}: anyone who can reach this machine "
                "can read the sample and grade it"
            )
        done = len({(i.query_id, i.doc_id) for i in items}.intersection(log.read()))
        print(f"grading {args.sample} as {annotator}: {done} of {len(items)} graded so far")
        print(f"grades are saved to {log.path}")
        print(f"open {url}  (Ctrl-C to stop)", flush=True)
        if not args.no_browser:
            webbrowser.open(url)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print(f"stopped; grades are in {log.path}")
    finally:
        server.stop()
    return 0


def _live(args: argparse.Namespace, manifest: Manifest | None) -> LiveStopping | None:
    """The live stopping figures, or None (with a line saying why) when they cannot be shown."""
    order = DrawOrder.from_manifest(manifest) if manifest is not None else None
    if order is None:
        say("live figures: only for uniform and active samples (with a manifest)")
        return None
    path = args.llm or (manifest.source.path if manifest and manifest.source else None)
    if not path or not Path(path).is_file():
        say(
            f"live figures: the LLM grades are not at hand ({path or 'no path in the manifest'}); "
            "pass --llm J"
        )
        return None
    from grader.io.grades import read_llm_grades

    threshold = args.threshold or (manifest.threshold if manifest else None) or 2
    frame = read_llm_grades(path)
    return LiveStopping.from_frame(order, frame, threshold=threshold, target=args.target)


def _export(
    args: argparse.Namespace, items: list[Any], log: GradeLog, manifest: Manifest | None
) -> int:
    if not log.path.exists():
        raise InputError(
            f"no grades by {log.annotator} yet ({log.path.name} is missing)",
            path=args.sample,
            hint="grade with `relgrade annotate SAMPLE.csv` first, or pick --annotator",
        )
    latest = log.read()
    grades = [
        HumanGrade(i.query_id, i.doc_id, latest[(i.query_id, i.doc_id)], log.annotator)
        for i in items
        if (i.query_id, i.doc_id) in latest
    ]
    if not grades:
        raise InputError(f"{log.annotator} has graded none of the sample", path=log.path)
    write_human_grades(args.export, grades)
    print(f"wrote {len(grades)} of {len(items)} grades by {log.annotator} to {args.export}")
    if len(grades) < len(items):
        say(f"note: {len(items) - len(grades)} item(s) are not graded yet")
    if manifest is not None:
        beside = copy_manifest_beside(manifest, args.export)
        print(f"copied the sample manifest to {beside} (calibrate weights by it)")
    else:
        say("note: no manifest beside the sample; calibrate will not weight")
    return 0
