"""what a batch's transcript needs that the rows lacked: who submitted it, the
provider dialect of its message, its policy files and stages, its conversation
and the turn before it; each call's provider kind (docs/architecture.md, "Transcripts")

Revision ID: 0004
Revises: '0003'
Created: 2026-12-01 02:19:28.228176
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("submitter", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("format", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("policy_files", sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column("stages", sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column("conversation", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("previous_batch", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("previous_digest", sa.String(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_toolrun_batch_conversation"), ["conversation"], unique=False
        )

    with op.batch_alter_table("toolrun_call", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("toolrun_call", schema=None) as batch_op:
        batch_op.drop_column("kind")

    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_toolrun_batch_conversation"))
        batch_op.drop_column("previous_digest")
        batch_op.drop_column("previous_batch")
        batch_op.drop_column("conversation")
        batch_op.drop_column("stages")
        batch_op.drop_column("policy_files")
        batch_op.drop_column("format")
        batch_op.drop_column("submitter")
