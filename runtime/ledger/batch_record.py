"""A batch's first rows as data: everything `Ledger.record_batch` writes at
submit (the batch, its calls' decisions, the ends decided before anything
ran, the plan, the key, fingerprint and deadline columns), in a form that
outlives the process that made it.

When the ledger cannot be reached at submit, the submitter keeps this record
in its own buffer and also hands it to the cluster's state as JSON; the sweep
writes it once the ledger is back, so a submitter that exits or is killed
meanwhile does not take its batch with it (docs/architecture.md, "The
ledger"). Whoever writes it first wins the batch row's compare-and-set; the
other write finds it recorded and writes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from runtime.ledger.ends import CallEnd
from runtime.ledger.store import Ledger, Recorded
from runtime.ledger.tables import BatchRow, EventKind
from runtime.redaction import Redactor
from runtime.types import Batch, ToolResult

_TIME = "$time"  # how a datetime travels in the JSON


@dataclass(frozen=True)
class EndRecord:
    """A call's end decided before anything ran (a refusal; a side effect that
    failed closed without the ledger), with its event's fields."""

    result: ToolResult
    kind: EventKind = EventKind.finished
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchRecord:
    batch: Batch
    risks: dict[str, str | None]
    policy_version: str | None
    events: list[dict[str, Any]]  # decision rows (`event_fields`), redacted already
    ends: list[EndRecord]
    plan: dict[str, Any] | None
    columns: dict[str, Any]
    # The redactor `events` were made with (`event_fields`), when this process
    # made them: a ledger with that same redactor writes them as they are instead
    # of checking and redacting them again. A record read back (`loads`) has none.
    redacted_by: Redactor | None = field(default=None, compare=False, repr=False)
    owner: dict[str, Any] | None = None  # the gateway key's (`Ledger.record_batch`)

    def with_plan(self, plan: dict[str, Any]) -> BatchRecord:
        return replace(self, plan=plan)

    def with_ends(self, more: list[EndRecord]) -> BatchRecord:
        return BatchRecord(
            self.batch,
            self.risks,
            self.policy_version,
            self.events,
            [*self.ends, *more],
            self.plan,
            self.columns,
            self.redacted_by,
            self.owner,
        )

    def row(self) -> BatchRow:
        """The batch's row as the record will write it (not written): what a
        racing submitter of its key checks its own batch against."""
        columns = {k: v for k, v in self.columns.items() if k in BatchRow.model_fields}
        return BatchRow(
            id=self.batch.id,
            mode=self.batch.mode.value,
            workspace=self.batch.workspace,
            on_error=self.batch.on_error,
            call_count=len(self.batch.calls),
            policy_version=self.policy_version,
            **columns,
        )

    def write(self, ledger: Ledger, *, open_cap: int | None = None) -> Recorded:
        """Write it in one transaction; `Recorded.found` (false) if the batch was
        recorded already (by its submitter, the sweep, or another submitter of
        its key). `open_cap`: `Ledger.record_batch`'s, at submit only (a record
        written late stands for a batch that has run already)."""
        return ledger.record_batch(
            self.batch,
            risks=self.risks,
            events=self.events,
            policy_version=self.policy_version,
            ends=[
                CallEnd(
                    self.batch.id, end.result, kind=end.kind, redactor=ledger.redactor, **end.fields
                )
                for end in self.ends
            ],
            plan=self.plan,
            columns=self.columns,
            open_cap=open_cap,
            checked=self.redacted_by is ledger.redactor,
            owner=self.owner,
        )

    def dumps(self, plan_text: str | None = None) -> str:
        """The record as JSON; `plan_text`: its plan's, made already (the
        plan's copy), put in as it is where the record holds none."""
        body = {
            "batch": self.batch.model_dump(mode="json"),
            "risks": self.risks,
            "policy_version": self.policy_version,
            "events": self.events,
            "ends": [
                {
                    "result": e.result.model_dump(mode="json"),
                    "kind": e.kind.value,
                    "fields": e.fields,
                }
                for e in self.ends
            ],
            "plan": self.plan,
            "columns": self.columns,
            "owner": self.owner,
        }
        if plan_text is None or self.plan is not None:
            return json.dumps(body, default=_encode)
        del body["plan"]
        return f'{json.dumps(body, default=_encode)[:-1]}, "plan": {plan_text}}}'

    @classmethod
    def loads(cls, text: str | bytes) -> BatchRecord:
        """The record `dumps` made; ValueError (or a pydantic one) if it is not one."""
        body = json.loads(text, object_hook=_decode)
        return cls(
            batch=Batch.model_validate(body["batch"]),
            risks=body["risks"],
            policy_version=body["policy_version"],
            events=body["events"],
            ends=[
                EndRecord(ToolResult.model_validate(e["result"]), EventKind(e["kind"]), e["fields"])
                for e in body["ends"]
            ],
            plan=body["plan"],
            columns=body["columns"],
            owner=body.get("owner"),  # kept before owners rode the record: none
        )


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {_TIME: value.isoformat()}
    if hasattr(value, "value"):  # an enum in an event's fields
        return value.value
    raise TypeError(f"{type(value).__name__} cannot be kept in a batch record")


def _decode(found: dict[str, Any]) -> Any:
    if set(found) == {_TIME}:
        return datetime.fromisoformat(found[_TIME])
    return found
