"""What `Runtime.submit` is given, turned into a `Batch` or refused as an
`InvalidBatch` before anything is written: the calls checked for an id and a
name, the workspace for a directory, the names for their bounds; and the
names a submit derives (a key's batch id, the submitter, a conversation's
link), and the size caps of its policy."""

from __future__ import annotations

import functools
import getpass
import hashlib
import json
import os
import socket
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runtime.adapters import ModelTurn
from runtime.errors import BatchTooLarge, InvalidBatch, LedgerUnavailable
from runtime.flow.limits import Limits
from runtime.ledger import open_batches
from runtime.ledger.store import Ledger
from runtime.transcript import conversation as conversations
from runtime.types import Batch, Mode, ToolCall

MAX_CALL_ID = 256  # characters; provider ids (toolu_..., call_...) are a few dozen


def keyed_id(key: str) -> str:
    """The batch id a submit key stands for: two submitters of one key race
    for one batch, and the ledger keeps its first record."""
    return "k" + hashlib.sha256(key.encode()).hexdigest()[:31]


def check_name(what: str, value: str | None) -> None:
    if value is not None and not (
        isinstance(value, str) and 0 < len(value) <= MAX_CALL_ID and "\0" not in value
    ):
        raise InvalidBatch(f"{what} must be a non-empty string of at most {MAX_CALL_ID} characters")
    check_text(what, value)


def check_text(what: str, value: object) -> None:
    """A string a submit gives must be Unicode that UTF-8 can carry: a lone
    surrogate (`"\\ud800"`, which JSON can spell) cannot be signed, stored or
    sent back, so the batch is refused saying which value holds one."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidBatch(
                f"{what} holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which "
                "is not valid Unicode; send the text itself, or escape both halves of the pair"
            ) from None


@functools.cache
def principal() -> str:
    """Who submits from this process, when the caller does not say: user@host,
    looked up once (without a login name in the environment, a read of the
    password database)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def link(ledger: Ledger, conversation: str) -> dict[str, Any]:
    """The new turn's link to the one before it; without the ledger, only its
    conversation (the batch fails closed on its own, "A batch the cluster owns")."""
    try:
        return conversations.link(ledger, conversation)
    except LedgerUnavailable:
        return {"conversation": conversation}


def call_from(index: int, call: ToolCall | dict[str, Any]) -> ToolCall:
    """A call of the batch; one without a string id and name cannot get its
    result, so the batch is refused (bad arguments are the model's, and a result)."""
    try:
        call = call if isinstance(call, ToolCall) else ToolCall.model_validate(call)
    except ValidationError as error:
        fields = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'call'}: {e['msg']}"
            for e in error.errors(include_url=False)
        )
        raise InvalidBatch(
            f"call {index} of the batch is not a tool call "
            f'{{"id": str, "name": str, "arguments": ...}}: {fields}'
        ) from None
    if len(call.id) > MAX_CALL_ID or "\0" in call.id:  # the ledger keys rows by it
        raise InvalidBatch(
            f"call {index} of the batch has an id longer than {MAX_CALL_ID} characters "
            "or holding a NUL character; providers send short ids"
        )
    check_text(f"the id of call {index}", call.id)
    check_text(f"the tool name of call {index}", call.name)
    return call


def batch_from(calls, *, mode, workspace, on_error) -> Batch:
    if isinstance(calls, Batch):
        overrides = {"mode": mode, "workspace": workspace, "on_error": on_error}
        batch = calls.model_copy(update={k: v for k, v in overrides.items() if v is not None})
        for index, call in enumerate(batch.calls):
            call_from(index, call)
    else:
        batch = Batch(
            calls=[call_from(index, c) for index, c in enumerate(calls)],
            mode=Mode(mode or Mode.default),
            workspace=str(workspace or "."),
            on_error=on_error or "stop",
        )
    if not batch.calls:  # an empty batch has nothing to run, and no rows to record it by
        raise InvalidBatch("the batch has no calls; send at least one tool call")
    counts = Counter(call.id for call in batch.calls)  # linear: a batch may hold 10,000 calls
    duplicates = sorted(i for i, n in counts.items() if n > 1)
    if duplicates:
        raise InvalidBatch(f"duplicate call ids in batch: {', '.join(duplicates)}")
    check_text("the workspace", batch.workspace)
    root = Path(batch.workspace)
    try:
        usable = root.is_dir()
    except OSError:  # a name too long, a NUL: no directory can be there either
        usable = False
    if not usable:
        raise InvalidBatch(f"workspace {batch.workspace[:300]!r} is not a directory")
    return batch.model_copy(update={"workspace": str(root.resolve())})


def check_submission(key: str | None, rules: dict[str, Any] | None) -> None:
    """A submit's key and rules, as Unicode UTF-8 can carry (`check_text`)."""
    check_text("the submit key", key)
    for effect, texts in (rules or {}).items():
        for text in texts if isinstance(texts, list) else ():
            check_text(f"a {effect} rule", text)


def check_size(limits: Limits, batch: Batch) -> None:
    """The policy's size cap, before anything of the batch is written
    (docs/architecture.md, "Flow control")."""
    cap = limits.calls_per_batch
    if len(batch.calls) > cap:
        raise BatchTooLarge(
            f"the batch has {len(batch.calls)} calls and the policy allows {cap} per batch "
            "(limits.size.calls_per_batch); submit them in batches of at most that many"
        )


def check_open(limits: Limits, ledger: Ledger, submitter: str) -> int | None:
    """The policy's cap on a submitter's open batches, if it sets one (for
    `BatchRun.start`). A submitter at the cap is refused here, before
    the batch is planned: a read, so two submits may both pass it; the cap
    is taken for sure with the batch's record (`runtime.ledger.open_batches`)."""
    cap = limits.size.open_batches_per_key if limits.size else None
    if cap is not None and ledger.open_batches(submitter) >= cap:
        raise open_batches.refusal(submitter, cap)
    return cap


def turn_key(turn: ModelTurn, workspace: str | Path | None, scope: str) -> str:
    """A provider message's submit key: its submitter's `scope`, its dialect,
    its workspace and its calls (the provider's call ids among them), so the
    same turn again from the same submitter attaches, and the same turn from
    another one is a batch of its own that neither learns of
    (docs/architecture.md, "Attach and keys")."""
    where = str(Path(workspace or ".").resolve())
    return json.dumps(["turn/2", scope, turn.format, where, _calls_digest(turn)])


def submitted_turn_key(
    ledger: Ledger,
    turn: ModelTurn,
    workspace: str | Path | None,
    submitter: str,
    key_id: str | None,
) -> str:
    """`turn_key` scoped to the gateway key `key_id` when it is given, else to
    `submitter`. A turn an older toolrun recorded under its unscoped key, by
    this same submitter, keeps that key, so a retry across the upgrade attaches."""
    earlier = earlier_turn_key(turn, workspace)
    try:
        row = ledger.batch(keyed_id(earlier))
    except LedgerUnavailable:  # the submit fails closed on its own, with the new key
        row = None
    if row is not None and row.submitter == submitter:
        return earlier
    scope = f"gateway key {key_id}" if key_id else f"submitter {submitter}"
    return turn_key(turn, workspace, scope)


def earlier_turn_key(turn: ModelTurn, workspace: str | Path | None) -> str:
    """The key toolrun gave a turn before turn keys were scoped: a retry of a
    turn submitted then still finds its batch (`Runtime.submit_message`)."""
    return f"{turn.format}:{Path(workspace or '.').resolve()}:{_calls_digest(turn)}"


def _calls_digest(turn: ModelTurn) -> str:
    calls = json.dumps([c.model_dump(mode="json") for c in turn.calls], sort_keys=True)
    return hashlib.sha256(calls.encode()).hexdigest()
