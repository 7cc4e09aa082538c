"""`python -m tests.fakeserver`: the fake server as a process of its own (benchmarks, by hand),
so that it does not share the client's GIL; prints `FAKESERVER <base_url>`."""

from __future__ import annotations

import argparse

from tests.fakeserver import FakeServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible server (tests/bench).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument(
        "--reject",
        action="append",
        default=[],
        choices=["json_schema", "json_object"],
        help="answer 400 to this response_format type (repeatable)",
    )
    parser.add_argument("--no-logprobs", action="store_true")
    args = parser.parse_args(argv)
    server = FakeServer(latency_ms=args.latency_ms, host=args.host, port=args.port)
    server.reject_formats = set(args.reject)
    server.logprobs = not args.no_logprobs
    server.serve_forever()
