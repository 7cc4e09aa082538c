"""Several servers behind one judge: each attempt goes to the live server with the fewest requests
in flight, and a server that dies is dropped while the others carry on.

Each `Member` has its own client, health and in-flight bound. An attempt that could not reach its
server goes to another without using up the pair's attempts; the run stops (`ServerNotAnswering`)
only when every server is dead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import openai

from grader.errors import ServerNotAnswering
from grader.judges.llm.attempts import AttemptSender
from grader.judges.llm.endpoint import is_loopback
from grader.judges.llm.replies import GradeReply, InvalidReply
from grader.judges.llm.results import CallState
from grader.redact import redact_url


@dataclass(eq=False)
class Member:
    """One server of a pool: its sender (client, health, in-flight bound) and its counts."""

    sender: AttemptSender
    busy: int = 0
    """Attempts on this server now (sent, or waiting for a turn among its requests in flight)."""
    sent: int = 0
    answers: int = 0
    """Replies with a 200 (valid or not): what the server produced for this run."""
    dropped: bool = False

    @property
    def name(self) -> str:
        """The server's URL as it may be shown (no credentials)."""
        return redact_url(self.sender.base_url).rstrip("/")

    @property
    def dead(self) -> bool:
        return self.dropped or self.sender.health.dead


class EndpointPool:
    """The servers of one judge (module docstring); one event loop, so no lock."""

    def __init__(
        self, members: list[AttemptSender], on_notice: Callable[[str], None] | None = None
    ) -> None:
        if not members:
            raise ValueError("a pool needs at least one server")
        self.members = [Member(sender) for sender in members]
        self._on_notice = on_notice

    @property
    def dead(self) -> bool:
        """Whether every server is dead: the run stops."""
        return all(m.dead for m in self.members)

    def local(self) -> bool:
        """Whether every server is on this machine (a loopback address)."""
        return all(is_loopback(m.sender.base_url) for m in self.members)

    def cached_reported(self) -> bool:
        """Whether any server's reply said its cached prompt tokens."""
        return any(m.sender.cached_reported for m in self.members)

    def answers(self) -> dict[str, int]:
        """Replies per server, in the order the servers were given."""
        return {m.name: m.answers for m in self.members}

    def _pick(self, tried: set[int], avoid: str | None = None) -> Member | None:
        live = [m for m in self.members if not m.dead and id(m) not in tried]
        return min(live, key=lambda m: (m.name == avoid, m.busy, m.sent)) if live else None

    async def send(self, state: CallState) -> GradeReply:
        """One attempt of `state`'s judgment on the server the pool picks (module docstring)."""
        tried: set[int] = set()
        member = self._pick(tried, state.failed_on) or self.members[0]
        while True:
            current = member
            current.busy += 1
            current.sent += 1
            try:
                reply = await current.sender.send(state)
            except ServerNotAnswering as exc:
                self._drop(current, exc)
                tried.add(id(current))
                member = self._next(tried, exc)
                continue
            except InvalidReply:
                current.answers += 1
                raise
            except (openai.APITimeoutError, openai.APIStatusError):
                state.failed_on = current.name  # the retry goes to another server if it can
                raise  # a timeout may still be answered: the retry policy's, as for one server
            except openai.APIConnectionError:
                tried.add(id(current))
                other = self._pick(tried)
                if other is None:
                    raise
                member = other
                continue
            finally:
                current.busy -= 1
            current.answers += 1
            state.failed_on = None
            return reply

    def _next(self, tried: set[int], exc: Exception) -> Member:
        """The server to try next after one died; raises when none is left."""
        chosen = self._pick(tried) or self._pick(set())
        if chosen is not None:
            return chosen
        if len(self.members) == 1 and isinstance(exc, ServerNotAnswering):
            raise exc
        raise self.not_answering(exc) from exc

    def not_answering(self, last: Exception | None = None) -> ServerNotAnswering:
        """The error that stops the run: every server is dead (with one, its own error)."""
        if len(self.members) == 1:
            return self.members[0].sender.not_answering()
        names = ", ".join(m.name for m in self.members)
        said = f"; the last: {last}" if last is not None else ""
        return ServerNotAnswering(
            f"none of the {len(self.members)} servers of this run is answering ({names}){said}"
        )

    def _drop(self, member: Member, exc: ServerNotAnswering) -> None:
        """Drop a dead server, said once (with one server, nothing to say: the run stops)."""
        if member.dropped or len(self.members) == 1:
            member.dropped = member.dropped or len(self.members) > 1
            return
        member.dropped = True
        left = sum(not m.dead for m in self.members)
        if left and self._on_notice is not None:
            self._on_notice(
                f"{member.name} is dropped from this run, its pairs go to the "
                f"{'other server' if left == 1 else f'other {left} servers'}: {exc}"
            )
