"""Remembered rules: allow rules people added while answering an approval,
each scoped to a workspace or a submitter, with who added it and when, until
someone revokes it (docs/architecture.md, "Remembered rules"). A revoked rule
stays, as the record of who allowed what and who took it back."""

from __future__ import annotations

from sqlalchemy import and_, or_, select, update
from sqlmodel import Session
from sqlmodel import select as select_rows

from runtime.ledger.store import Ledger
from runtime.ledger.tables import RememberedRuleRow, utc_now

SCOPES = ("workspace", "submitter")
RULES = RememberedRuleRow.__table__


class RememberedRules:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def add(
        self, rule: str, *, scope: str, scope_value: str, by: str, batch_id: str, call_id: str
    ) -> RememberedRuleRow:
        if scope not in SCOPES:
            raise ValueError(f"a rule is remembered for a workspace or a submitter, not {scope!r}")
        row = RememberedRuleRow(
            rule=rule,
            scope=scope,
            scope_value=scope_value,
            added_by=by,
            batch_id=batch_id,
            call_id=call_id,
        )

        def work(session: Session) -> RememberedRuleRow:
            session.add(row)
            session.flush()
            session.refresh(row)
            session.expunge(row)
            return row

        return self.ledger.transaction(work)

    def active(self, workspace: str, submitter: str | None) -> list[tuple[int, str, str]]:
        """The rules a batch of `workspace` submitted by `submitter` runs under,
        as (id, rule, added by): one indexed read in SQL alone, on every submit
        that has a call an allow rule can change (docs/architecture.md,
        "Remembered rules": the ORM's select cost several times as much)."""
        mine = and_(RULES.c.scope == "workspace", RULES.c.scope_value == workspace)
        if submitter is not None:
            mine = or_(mine, and_(RULES.c.scope == "submitter", RULES.c.scope_value == submitter))
        query = (
            select(RULES.c.id, RULES.c.rule, RULES.c.added_by)
            .where(RULES.c.revoked_at.is_(None), mine)
            .order_by(RULES.c.id)
        )
        rows = self.ledger.transaction(lambda c: c.execute(query).all(), write=False, core=True)
        return [tuple(row) for row in rows]

    def listing(self, *, revoked: bool = False) -> list[RememberedRuleRow]:
        query = select_rows(RememberedRuleRow).order_by(RememberedRuleRow.id)
        if not revoked:
            query = query.where(RememberedRuleRow.revoked_at.is_(None))
        return self.ledger.transaction(lambda s: list(s.exec(query).all()), write=False)

    def revoke(self, rule_id: int, *, by: str) -> bool:
        """False if there is no such rule, or it was revoked already."""
        statement = (
            update(RememberedRuleRow)
            .where(RememberedRuleRow.id == rule_id, RememberedRuleRow.revoked_at.is_(None))
            .values(revoked_by=by, revoked_at=utc_now())
        )
        return self.ledger.transaction(lambda s: s.exec(statement).rowcount == 1)
