"""remembered rules: allow rules added while answering an approval, scoped to
a workspace or a submitter (docs/architecture.md, "Remembered rules")

Revision ID: 0006
Revises: '0005'
Created: 2026-12-04 21:09:06.810407
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "toolrun_remembered_rule",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rule", sa.String(), nullable=False),
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("scope_value", sa.String(), nullable=False),
        sa.Column("added_by", sa.String(), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("batch_id", sa.String(), nullable=False),
        sa.Column("call_id", sa.String(), nullable=False),
        sa.Column("revoked_by", sa.String(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("toolrun_remembered_rule", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_toolrun_remembered_rule_scope_value"), ["scope_value"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("toolrun_remembered_rule", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_toolrun_remembered_rule_scope_value"))

    op.drop_table("toolrun_remembered_rule")
