"""A reads' task message as Celery builds it, taken apart once per process
and filled in for each later message (docs/architecture.md, "Round trips
and memory").

Celery's `send_task` spends about 0.2 ms of CPU on a message (the route, the
message's headers, kombu's producer, the task-sent event's dispatcher), the
largest part of a submit's first send: a stage of 16 reads spent 3 ms
building messages before the first could leave. From one message to the
next only a few values change: the task's id, its arguments (the signed
call), what Flower is shown (the tool, the redacted arguments), the
thread's reply address, the delivery tags, and the event's clock, time and
UTC offset. The stencil is Celery's own message with those values as slots;
every other field is Celery's.

It is taken from the process's first two messages, both built by Celery,
and kept only if, filled with the second one's values, it makes that
message again exactly (decoded): a Celery or kombu whose message holds
anything else that changes per message, or commands other than those known
here, leaves every message to Celery. Celery builds the message too while
anyone listens to its publish signals (an instrumentation that adds
headers), and for a send from inside a running task (its ids are the
parent's).
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from celery import Celery, signals
from celery.utils.time import utcoffset
from kombu.utils.json import dumps

Command = tuple[str, tuple[Any, ...]]  # a Redis command, as kombu's publish batch adds it
SIGNALS = (signals.before_task_publish, signals.after_task_publish, signals.task_sent)
TASK, EVENT = "task", "event"  # the payloads a stencil's commands carry


@dataclass(frozen=True)
class Values:
    """What differs from one message to the next, but its call."""

    task_id: str
    tag: str  # the task message's delivery tag
    reply_to: str  # Celery's per-thread address
    clock: int | None = None  # the task-sent event's
    timestamp: float | None = None
    offset: float | None = None
    event_tag: str | None = None


@dataclass(frozen=True)
class Stencil:
    """Celery's commands for one message, with its varying values as slots."""

    commands: tuple[tuple[str, Any, str | None], ...]  # name, key, payload (TASK, EVENT) or arg
    task: dict[str, Any]  # the task's envelope, its body left out
    embed: Any  # the body's third part (callbacks, errbacks, chain, chord)
    event: dict[str, Any] | None  # the task-sent event's envelope, its body left out
    event_body: dict[str, Any] | None
    event_named: bool  # the event is named after the message's shadow (`ShadowNamedEvents`)

    @classmethod
    def taken(cls, commands: list[Command], wire: dict[str, Any]) -> Stencil | None:
        """From Celery's commands for one message and the call it carries;
        None if they are not what this knows how to fill."""
        task = event = None
        kept: list[tuple[str, Any, str | None]] = []
        for name, args in commands:
            if len(args) != 2:
                return None
            if name == "lpush" and task is None:
                task = _opened(args[1])
                kept.append((name, args[0], TASK))
            elif name == "publish" and event is None and task is not None:
                event = _opened(args[1])
                kept.append((name, args[0], EVENT))
            elif name in ("lpush", "publish"):
                return None
            else:
                kept.append((name, args[0], args[1]))  # a queue's expiry: alike for all
            if task is None or (name == "publish" and event is None):
                return None
        body = task.pop("body") if task else None
        if not isinstance(body, list) or len(body) != 3 or body[:2] != [[wire], {}]:
            return None
        event_body = event.pop("body") if event else None
        if event is not None and not isinstance(event_body, dict):
            return None
        named = event_body is not None and event_body.get("name") == task["headers"].get("shadow")
        return cls(tuple(kept), task, body[2], event, event_body, named)

    def commands_for(
        self, wire: dict[str, Any], shadow: str, argsrepr: str, values: Values
    ) -> list[Command]:
        """The commands of the message carrying `wire`, as Celery makes them."""
        headers = {
            **self.task["headers"],
            "id": values.task_id,
            "root_id": values.task_id,
            "shadow": shadow,
            "argsrepr": argsrepr,
        }
        properties = {
            **self.task["properties"],
            "correlation_id": values.task_id,
            "reply_to": values.reply_to,
            "argsrepr": argsrepr,
            "delivery_tag": values.tag,
        }
        body = _base64(dumps([[wire], {}, self.embed]))
        payloads = {
            TASK: dumps({**self.task, "headers": headers, "properties": properties, "body": body})
        }
        if self.event is not None:
            fields = {
                **self.event_body,
                "uuid": values.task_id,
                "root_id": values.task_id,
                "args": argsrepr,
                "clock": values.clock,
                "timestamp": values.timestamp,
                "utcoffset": values.offset,
            }
            if self.event_named:
                fields["name"] = shadow
            event = {
                **self.event,
                "properties": {**self.event["properties"], "delivery_tag": values.event_tag},
                "body": _base64(dumps(fields)),
            }
            payloads[EVENT] = dumps(event)
        return [(name, (key, payloads.get(arg, arg))) for name, key, arg in self.commands]


class Stencils:
    """The stencil of one app's reads messages in this process: taken from
    its first two messages (`learn`), then used for every message it may
    stand for (`usable`)."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._seen: list[tuple[list[Command], dict[str, Any]]] = []
        self._stencil: Stencil | None = None
        self._given_up = False

    def usable(self) -> Stencil | None:
        """The stencil, if it may build the next message here and now."""
        stencil = self._stencil
        if stencil is None or os.getpid() != self._pid:
            return None
        if any(signal.receivers for signal in SIGNALS) or self.app.current_worker_task:
            return None
        return stencil

    def wanted(self) -> bool:
        """Whether Celery's next message should be shown to `learn`."""
        if os.getpid() != self._pid:  # a forked child: its Celery names another process
            with self._lock:
                self._pid, self._seen, self._stencil, self._given_up = os.getpid(), [], None, False
        return self._stencil is None and not self._given_up

    def learn(self, commands: list[Command], wire: dict[str, Any]) -> None:
        """One message Celery built here: the second makes the stencil, if
        the first, filled with its values, makes it again."""
        if not self.wanted() or any(signal.receivers for signal in SIGNALS):
            return
        with self._lock:
            if self._stencil is not None or self._given_up:
                return
            self._seen.append((commands, wire))
            if len(self._seen) < 2:
                return
            (first, first_wire), (second, second_wire) = self._seen
            self._seen = []
            stencil = Stencil.taken(first, first_wire)
            if stencil is None or not _remakes(stencil, second, second_wire):
                self._given_up = True
                return
            self._stencil = stencil

    def values(self) -> Values:
        """Fresh values for a message sent now, as Celery and kombu make them."""
        return Values(
            task_id=str(uuid.uuid4()),
            tag=str(uuid.uuid4()),
            reply_to=self.app.thread_oid,
            clock=self.app.clock.forward(),
            timestamp=time.time(),
            offset=utcoffset(),
            event_tag=str(uuid.uuid4()),
        )


def _remakes(stencil: Stencil, commands: list[Command], wire: dict[str, Any]) -> bool:
    """Whether `stencil`, filled with the values of Celery's `commands` for
    `wire`, makes them again, every payload equal once decoded."""
    opened = {name: _opened(args[-1]) for name, args in commands if name in ("lpush", "publish")}
    task, event = opened.get("lpush"), opened.get("publish")
    if task is None or (event is None) != (stencil.event is None):
        return False
    try:
        headers, properties = task["headers"], task["properties"]
        values = Values(
            task_id=headers["id"],
            tag=properties["delivery_tag"],
            reply_to=properties["reply_to"],
            clock=event["body"]["clock"] if event else None,
            timestamp=event["body"]["timestamp"] if event else None,
            offset=event["body"]["utcoffset"] if event else None,
            event_tag=event["properties"]["delivery_tag"] if event else None,
        )
        made = stencil.commands_for(wire, headers["shadow"], headers["argsrepr"], values)
    except (KeyError, TypeError, AttributeError):
        return False
    return len(made) == len(commands) and all(
        name == theirs[0] and _decoded(args) == _decoded(theirs[1])
        for (name, args), theirs in zip(made, commands, strict=False)
    )


def _opened(payload: Any) -> dict[str, Any] | None:
    """A kombu envelope with its body decoded, or None if it is not one whose
    body a stencil fills (JSON in base64, text in UTF-8)."""
    try:
        envelope = json.loads(payload)
        if (
            envelope.get("content-type") != "application/json"
            or envelope.get("content-encoding") != "utf-8"
            or envelope["properties"].get("body_encoding") != "base64"
        ):
            return None
        envelope["body"] = json.loads(base64.b64decode(envelope["body"]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return envelope


def _decoded(args: tuple[Any, ...]) -> list[Any]:
    """A command's arguments, each envelope among them decoded, for comparing."""
    return [
        (_opened(arg) or arg) if isinstance(arg, (str, bytes)) and arg[:1] in ("{", b"{") else arg
        for arg in args
    ]


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
