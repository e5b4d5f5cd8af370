"""batches the cluster owns: ends, plans, keys, deadlines, sealed approvals

Revision ID: 0002
Revises: '0001'
Created: 2026-11-30 13:44:54.759149
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "toolrun_end",
        sa.Column("batch_id", sa.String(), nullable=False),
        sa.Column("call_id", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("result", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("batch_id", "call_id"),
    )
    op.create_table(
        "toolrun_plan",
        sa.Column("batch_id", sa.String(), nullable=False),
        sa.Column("body", sa.JSON(none_as_null=True), nullable=True),
        sa.PrimaryKeyConstraint("batch_id"),
    )
    with op.batch_alter_table("toolrun_approval", schema=None) as batch_op:
        batch_op.add_column(sa.Column("arguments_given", sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column("seal", sa.String(), nullable=True))

    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("fingerprint", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("cancelled_by", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f("ix_toolrun_batch_ended_at"), ["ended_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_toolrun_batch_key"), ["key"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_toolrun_batch_key"))
        batch_op.drop_index(batch_op.f("ix_toolrun_batch_ended_at"))
        batch_op.drop_column("ended_at")
        batch_op.drop_column("cancelled_by")
        batch_op.drop_column("cancelled_at")
        batch_op.drop_column("deadline_at")
        batch_op.drop_column("fingerprint")
        batch_op.drop_column("key")

    with op.batch_alter_table("toolrun_approval", schema=None) as batch_op:
        batch_op.drop_column("seal")
        batch_op.drop_column("arguments_given")

    op.drop_table("toolrun_plan")
    op.drop_table("toolrun_end")
