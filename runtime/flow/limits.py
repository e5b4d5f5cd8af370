"""Rate limits, concurrency caps, size caps and fair share of a policy
(docs/architecture.md, "Flow control").

The org policy file declares them beside the budgets (runtime/flow/budgets.py):

    {"limits": {
        "rate": [{"name": "fetches", "per": "host", "tools": ["http_get"], "limit": "5/second"},
                 {"name": "keys", "per": "key", "limit": "100/minute", "on_limit": "refuse"}],
        "concurrency": [{"name": "shells", "per": "tool", "tools": ["shell"], "max": 2}],
        "size": {"calls_per_batch": 500, "open_batches_per_key": 20},
        "fair_share": {"in_flight_per_key": 8}}}

A rate counts calls started in a moving window (`limit` in the `limits`
library's notation: "5/second", "100 per minute"), per `tool`, per `key`
(the gateway's key or the `submitter` given to `submit`; `principal` names
the same), per `key_tool`, or per `host` (of a URL a tool is given:
`http_get`'s `url`). A concurrency cap counts calls running at once, per
`tool` or per `key`. `tools` and `keys` narrow an entry to some tools or
submitters. `on_limit` says what a call over it gets: `delay` (the default:
it waits, holding nothing, until the limit allows or its batch's deadline) or
`refuse` (it ends at once, `rate_limited` or `concurrency_limited`, saying
when to try again).

The user and project files may add rates and caps (each applies, so adding
only tightens) and may lower a size; fair share is the org's.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, Literal
from urllib.parse import urlsplit

import limits as ratelimits
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
)

from runtime.flow.hosts import canonical_host

CALLS_PER_BATCH = 1000  # the default size cap: more is refused at submit
OnLimit = Literal["delay", "refuse"]
_NAME = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = _NAME
    tools: tuple[str, ...] | None = None  # the tools it applies to; None: every tool
    keys: tuple[str, ...] | None = None  # the submitters it applies to; None: each of them
    on_limit: OnLimit = "delay"
    source: str = ""  # the file it came from (set when read)

    def applies(self, tool: str, principal: str | None) -> bool:
        return (self.tools is None or tool in self.tools) and (
            self.keys is None or principal in self.keys
        )

    @property
    def tag(self) -> str:
        """What names the entry in Redis keys: its file and its name."""
        return f"{_file_hash(self.source)}:{self.name}"


class Rate(_Entry):
    per: Literal["tool", "key", "principal", "key_tool", "host"]
    limit: str

    @field_validator("limit")
    @classmethod
    def _parses(cls, value: str) -> str:
        try:
            ratelimits.parse(value)
        except ValueError:
            example = '"5/second" or "100 per minute"'
            raise ValueError(f"{value!r} is not a rate such as {example}") from None
        return value

    @property
    def item(self) -> ratelimits.RateLimitItem:
        return _item(self.limit)

    def scope(
        self, tool: str, principal: str | None, arguments: Any, host: str | None = None
    ) -> str | None:
        """Who this call counts for under the rate; None: it does not count.
        `host`: the one every call of the tool reaches (an MCP server's URL)."""
        who = principal or "anonymous"
        if self.per == "host":  # the address reached, whatever its spelling
            reached = host or host_of(arguments)
            return canonical_host(reached) if reached else None
        return {"tool": tool, "key": who, "principal": who, "key_tool": f"{who}|{tool}"}[self.per]

    def describe(self) -> str:
        return f"rate {self.name!r} ({self.limit} per {self.per}, from {self.source})"


class Concurrency(_Entry):
    per: Literal["tool", "key", "principal"]
    max: int = Field(ge=1)

    def scope(self, tool: str, principal: str | None) -> str:
        return tool if self.per == "tool" else principal or "anonymous"

    def describe(self) -> str:
        at_once = f"{self.max} at once per {self.per}"
        return f"concurrency cap {self.name!r} ({at_once}, from {self.source})"


class Size(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    calls_per_batch: int = Field(default=CALLS_PER_BATCH, ge=1)
    open_batches_per_key: int | None = Field(default=None, ge=1)
    waits_per_key: int | None = Field(default=None, ge=1)  # the gateway's streams and polls


class FairShare(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    in_flight_per_key: int = Field(default=8, ge=1)


class Limits(BaseModel):
    """Every file's limits, merged; carried (signed) in the batch's policy
    snapshot with the submitter they count for, so the worker checks what
    the batch was admitted under."""

    model_config = ConfigDict(frozen=True)

    rates: tuple[Rate, ...] = ()
    caps: tuple[Concurrency, ...] = ()
    size: Size | None = None  # None: the defaults (`Size()`)
    fair_share: FairShare | None = None
    principal: str | None = None
    _memo: dict[tuple, list] = PrivateAttr(default_factory=dict)  # windows and slots by tool

    def __bool__(self) -> bool:
        return bool(self.rates or self.caps or self.fair_share)

    def snapshot(self) -> dict[str, Any]:
        """The limits as the signed policy snapshot carries them, with a
        digest of their text: what a process keys its parse by."""
        data = self.model_dump(mode="json", exclude={"size"})
        text = json.dumps(data, sort_keys=True).encode()
        return data | {"digest": hashlib.sha256(text).hexdigest()[:16]}

    @classmethod
    def from_snapshot(cls, data: dict[str, Any] | None) -> Limits:
        """The limits a snapshot carries, parsed once per process for each
        snapshot (every message of a batch, each check of a call, carries
        the same): keyed by its digest and submitter (both signed with it),
        or its text if it has no digest."""
        if not data:
            return NONE
        digest = data.get("digest")
        key = (digest, data.get("principal")) if digest else repr(data)
        found = _PARSED.get(key)
        if found is None:
            if len(_PARSED) >= PARSED_KEPT:
                _PARSED.clear()
            found = _PARSED[key] = cls.model_validate(data)
        return found

    @property
    def calls_per_batch(self) -> int:
        return (self.size or Size()).calls_per_batch

    def rates_for(self, tool: str) -> list[Rate]:
        return [r for r in self.rates if r.applies(tool, self.principal)]

    def caps_for(self, tool: str) -> list[Concurrency]:
        return [c for c in self.caps if c.applies(tool, self.principal)]

    def windows(self, tool: str, arguments: Any, host: str | None = None) -> list[tuple[Rate, str]]:
        """The rates a call of `tool` counts in, each with its window's scope
        (`host`: the tool's own, `CapabilitySpec.host`); kept per tool and host."""
        if not self.rates:
            return []
        if host is None and any(r.per == "host" for r in self.rates):
            host = host_of(arguments)
        memo, key = self.__pydantic_private__["_memo"], ("windows", tool, host)
        found = memo.get(key)
        if found is None:
            found = memo[key] = self._windows(tool, arguments, host)
        return found

    def _windows(self, tool: str, arguments: Any, host: str | None) -> list[tuple[Rate, str]]:
        out = []
        for rate in self.rates_for(tool):
            scope = rate.scope(tool, self.principal, arguments, host)
            if scope is not None:
                out.append((rate, f"{rate.tag}:{rate.per}:{scope}"))
        return out

    def slots(self, tool: str) -> list[tuple[Concurrency, str]]:
        """The caps a call of `tool` takes a slot of, each with its scope."""
        if not self.caps:
            return []
        memo = self.__pydantic_private__["_memo"]  # not `self._memo`: pydantic's lookup is slow
        found = memo.get(("slots", tool))
        if found is None:
            caps = self.caps_for(tool)
            found = [(c, f"{c.tag}:{c.per}:{c.scope(tool, self.principal)}") for c in caps]
            memo["slots", tool] = found
        return found

    def held_in_redis(self) -> list[str]:
        """The entries only Redis can hold (rates, caps, fair share), named
        with their files: what the in-process transport refuses."""
        found = [
            f"limits.{name} ({', '.join(e.name for e in entries)} from {entries[0].source})"
            for name, entries in (("rate", self.rates), ("concurrency", self.caps))
            if entries
        ]
        return found + (["limits.fair_share"] if self.fair_share is not None else [])

    @property
    def sender(self) -> str:
        return self.principal or "anonymous"


NONE = Limits()
PARSED_KEPT = 256  # snapshots whose limits a process keeps parsed
_PARSED: dict[str, Limits] = {}


@functools.lru_cache(maxsize=256)
def _file_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:8]


def host_of(arguments: Any) -> str | None:
    """The host a call reaches: of its `url` argument (http_get and the like);
    an MCP server reached by URL gives its tools' host instead (`CapabilitySpec.host`)."""
    url = arguments.get("url") if isinstance(arguments, dict) else None
    if not isinstance(url, str):
        return None
    try:
        return (urlsplit(url).hostname or "").lower() or None
    except ValueError:
        return None


_ITEMS: dict[str, ratelimits.RateLimitItem] = {}


def _item(text: str) -> ratelimits.RateLimitItem:
    found = _ITEMS.get(text)
    if found is None:
        found = _ITEMS[text] = ratelimits.parse(text)
    return found
