"""usage per call and the model's tokens per batch: what each call cost and what
the turn's model spent (docs/architecture.md, "Usage and budgets")

Revision ID: 0005
Revises: '0004'
Created: 2026-12-01 05:35:29.677718
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "toolrun_usage",
        sa.Column("batch_id", sa.String(), nullable=False),
        sa.Column("call_id", sa.String(), nullable=False),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("wall_ms", sa.Float(), nullable=True),
        sa.Column("cpu_ms", sa.Float(), nullable=True),
        sa.Column("queue_ms", sa.Float(), nullable=True),
        sa.Column("approval_ms", sa.Float(), nullable=True),
        sa.Column("cost", sa.Float(), nullable=True),
        sa.Column("reported", sa.JSON(none_as_null=True), nullable=True),
        sa.PrimaryKeyConstraint("batch_id", "call_id"),
    )
    with op.batch_alter_table("toolrun_usage", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_toolrun_usage_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_toolrun_usage_tool"), ["tool"], unique=False)

    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("input_tokens", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("output_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.drop_column("output_tokens")
        batch_op.drop_column("input_tokens")
        batch_op.drop_column("model")

    with op.batch_alter_table("toolrun_usage", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_toolrun_usage_tool"))
        batch_op.drop_index(batch_op.f("ix_toolrun_usage_at"))

    op.drop_table("toolrun_usage")
