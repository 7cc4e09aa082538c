"""The endpoint a command sends to, resolved once from its options and the environment
(`Environment`: OPENAI_API_KEY, OPENAI_BASE_URL, RELGRADE_MODEL, RELGRADE_PRICES): base URLs, key,
default model, prices, and one rate limiter per model and server that every judge of the run
shares. Which key goes to which server is `grader.judges.llm.endpoint`'s rule."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from grader import defaults
from grader.cost import PriceTable
from grader.errors import InputError, JudgeError, RelgradeWarning
from grader.judges.llm.endpoint import KEY_ENV, PLACEHOLDER_KEY, api_key_for, env_key_for
from grader.prompts import PromptSpec
from grader.spelling import option

if TYPE_CHECKING:  # the LLM client and the openai SDK load only when a command asks for them
    from grader.batch.api.client import BatchClient
    from grader.judges.llm.judge import LLMJudge
    from grader.judges.llm.retry import RateLimiter
    from grader.judges.llm.server_settings import ModeSwitch
    from grader.models import CallRecord


class Environment(BaseSettings):
    """The environment variables relgrade reads (empty ones count as unset)."""

    model_config = SettingsConfigDict(case_sensitive=True, env_ignore_empty=True, extra="ignore")

    openai_api_key: SecretStr | None = Field(default=None, alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    relgrade_model: str | None = Field(default=None, alias="RELGRADE_MODEL")
    relgrade_prices: Path | None = Field(default=None, alias="RELGRADE_PRICES")

    @field_validator("openai_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            check_base_url(value, "OPENAI_BASE_URL")
        return value


def check_base_url(url: str, where: str) -> None:
    """Raise ValueError unless `url` is an http(s) URL with a host."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"{where} must be an http(s) URL such as http://localhost:8000/v1")


def flag_urls(given: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """The --base-url values (one, or a list when it may be repeated), each checked; a URL
    given twice is an InputError (a server is not two)."""
    urls = [given] if isinstance(given, str) else list(given or [])
    flag = option("--base-url", "base_url")
    for url in urls:
        try:
            check_base_url(url, flag)
        except ValueError as exc:
            raise InputError(str(exc)) from None
    twice = sorted({u for u in urls if urls.count(u) > 1})
    if twice:
        raise InputError(f"{flag}: {twice[0]} is given twice", hint="give each server once")
    return urls


@dataclass
class Settings:
    """One command's resolved endpoint, key, model, prices and limits (see module docstring)."""

    base_url: str | None
    env: Environment
    more_urls: tuple[str, ...] = ()  # the servers after `base_url` (--base-url repeated)
    model_default: str = defaults.MODEL
    prices_path: str | None = None
    rpm: float | None = None
    tpm: float | None = None
    timeout: float = defaults.TIMEOUT_S
    max_attempts: int = defaults.MAX_ATTEMPTS
    concurrency: int = defaults.CONCURRENCY  # also how many failures in a row stop a run
    sending: bool = True  # False for a dry run: nothing is sent, so no key is needed
    api_key_env: str | None = None  # the variable holding the key to send, to any server
    output_mode: str = defaults.OUTPUT_MODE  # the mode a run starts in
    max_context: int | None = None  # the server's context in tokens (None: ask /v1/models)
    notice: Callable[[str], None] | None = field(default=None, repr=False)  # else a warning
    _keys: dict[str | None, str] = field(default_factory=dict, repr=False)
    _prices: PriceTable | None = field(default=None, repr=False)
    _limiters: dict[tuple[str, str | None], RateLimiter] = field(default_factory=dict, repr=False)

    @classmethod
    def from_args(cls, args: Any, env: Environment | None = None) -> Settings:
        """The settings of a command from its options (a Namespace, `GradeOptions`: those it
        lacks keep their defaults)."""
        try:  # a bad value is an InputError naming the variable
            env = env if env is not None else Environment()
        except ValidationError as exc:
            first = exc.errors()[0]
            name = ".".join(str(p) for p in first["loc"]) or "environment"
            raise InputError(f"{name}: {first['msg']}", hint=f"fix or unset {name}") from None
        urls = flag_urls(getattr(args, "base_url", None))
        flag_url = urls[0] if urls else None
        rpm, tpm = getattr(args, "rpm", None), getattr(args, "tpm", None)
        for flag, value in (("--rpm", rpm), ("--tpm", tpm)):
            if value is not None and value < 0:
                raise InputError(f"{flag} must not be negative")
        same = ("timeout", "max_attempts", "concurrency", "api_key_env", "max_context")
        given = {name: getattr(args, name) for name in same if hasattr(args, name)}
        return cls(
            base_url=flag_url or env.openai_base_url or None,
            env=env,
            more_urls=tuple(urls[1:]),
            model_default=env.relgrade_model or defaults.MODEL,
            prices_path=getattr(args, "prices", None),
            rpm=rpm or None,  # 0 means no limit, as before
            tpm=tpm or None,
            sending=not getattr(args, "dry_run", False),
            output_mode=getattr(args, "output_mode", None) or defaults.OUTPUT_MODE,
            **given,
        )

    def model(self, flag: str | None = None) -> str:
        """`flag`, else $RELGRADE_MODEL, else gpt-4o-mini."""
        return flag or self.model_default

    @property
    def urls(self) -> list[str | None]:
        """Every server of this command (one, unless --base-url was repeated)."""
        return [self.base_url, *self.more_urls]

    @property
    def key(self) -> str:
        """The key to send to `base_url` (`key_for`)."""
        return self.key_for(self.base_url)

    def key_for(self, url: str | None) -> str:
        """The key to send to `url` (resolved on first use, so the offline lexical judge
        needs none); an InputError naming OPENAI_API_KEY when OpenAI's API gets no key."""
        if url not in self._keys:
            try:
                self._keys[url] = api_key_for(url, self._given_key(url), sending=self.sending)
            except JudgeError as exc:
                raise InputError(
                    str(exc),
                    hint=f"set {KEY_ENV}, point {option('--base-url', 'base_url=')} at an "
                    "OpenAI-compatible server, or use "
                    f"{option('--judge lexical', 'judge=' + repr('lexical'))} (offline)",
                ) from None
        return self._keys[url]

    def defer_missing_key(self) -> InputError | None:
        """The error of a missing key, kept for later (None when there is a key): a run whose
        every answer is stored sends nothing and needs no key and no URL. The judges then hold
        the placeholder key; the caller raises the error before the first request is sent."""
        for url in self.urls:
            try:
                _ = self.key_for(url)
            except InputError as exc:
                self._keys[url] = PLACEHOLDER_KEY
                return exc
        return None

    def _given_key(self, url: str | None) -> str | None:
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if not value and self.sending:
                raise InputError(
                    f"--api-key-env {self.api_key_env}: that environment variable is not set",
                    hint=f"export {self.api_key_env}=... or drop --api-key-env",
                )
            return value or None
        given = self.env.openai_api_key
        return env_key_for(url, given.get_secret_value() if given else None)

    @property
    def secrets(self) -> list[str]:
        """What must be masked in everything written: the keys, but the placeholder."""
        keys = dict.fromkeys(self.key_for(url) for url in self.urls)
        return [key for key in keys if key != PLACEHOLDER_KEY]

    @property
    def prices(self) -> PriceTable:
        """The shipped price table, then $RELGRADE_PRICES, then --prices."""
        if self._prices is None:
            self._prices = PriceTable.from_files(self.env.relgrade_prices, self.prices_path)
        return self._prices

    def limiter(self, model: str) -> RateLimiter:
        """The one limiter of `model` on this base URL (its --rpm/--tpm and 429 pauses)."""
        from grader.judges.llm.retry import RateLimiter

        slot = (model, self.base_url)
        if slot not in self._limiters:
            self._limiters[slot] = RateLimiter(self.rpm, self.tpm)
        return self._limiters[slot]

    def llm_judge(
        self,
        model: str,
        prompt: PromptSpec | str,
        on_call: Callable[[CallRecord], None] | None = None,
    ) -> LLMJudge:
        """An LLM judge of `model` and `prompt` with these settings."""
        from grader.judges.llm.judge import LLMJudge
        from grader.judges.llm.transport import dead_after_for, unreachable_after_for

        return LLMJudge(
            model=model,
            prompt=prompt,
            base_url=self.urls if self.more_urls else self.base_url,  # type: ignore[arg-type]
            api_key=[self.key_for(u) for u in self.urls] if self.more_urls else self.key,
            timeout=self.timeout,
            max_attempts=self.max_attempts,
            limiter=self.limiter(model),
            prices=self.prices,
            on_call=on_call,
            dead_after=dead_after_for(self.concurrency),
            unreachable_after=unreachable_after_for(self.concurrency),
            output_mode=self.output_mode,  # type: ignore[arg-type]  # checked with the options
            on_switch=lambda switch: self.tell(switch_text(switch)),
            max_context=self.max_context,
            probe_server=self.sending,
            on_notice=lambda text: self.tell(f"warning: {text}"),
        )

    def tell(self, text: str) -> None:
        """Pass a notice about the server to `notice`, else warn."""
        if self.notice is None:
            warnings.warn(text.removeprefix("warning: "), RelgradeWarning, stacklevel=2)
        else:
            self.notice(text)

    def batch_client(self, timeout: float | None = None) -> BatchClient:
        """A Batch API client for this endpoint and key (`timeout`: else --timeout's)."""
        from grader.batch.api.client import BatchClient

        return BatchClient(
            base_url=self.base_url, api_key=self.key, timeout=timeout or self.timeout
        )


def switch_text(switch: ModeSwitch) -> str:
    """What to say, once, when the run moved to another output mode or parameter, and why."""
    said = " ".join(switch.reason.split())
    if len(said) > 240:
        said = said[:237] + "..."
    return (
        f"output mode {switch.from_mode} -> {switch.to_mode}: this run now uses "
        f"{switch.to_mode} (each call's mode is in the store's call log), because: {said}"
    )
