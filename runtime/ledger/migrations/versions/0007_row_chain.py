"""row chain: each event and end row's hash as written, the batch's seal over
its calls' hashes and its turn, signed when the batch ends, and each
conversation's signed head (docs/architecture.md, "Transcripts")

Revision ID: 0007
Revises: '0006'
Created: 2026-12-04 23:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("toolrun_event", schema=None) as batch_op:
        batch_op.add_column(sa.Column("chain", sa.String(), nullable=True))
    with op.batch_alter_table("toolrun_end", schema=None) as batch_op:
        batch_op.add_column(sa.Column("chain", sa.String(), nullable=True))
    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("seal", sa.JSON(none_as_null=True), nullable=True))
    op.create_table(
        "toolrun_conversation",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("last_batch", sa.String(), nullable=False),
        sa.Column("seal", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("toolrun_conversation")
    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.drop_column("seal")
    with op.batch_alter_table("toolrun_end", schema=None) as batch_op:
        batch_op.drop_column("chain")
    with op.batch_alter_table("toolrun_event", schema=None) as batch_op:
        batch_op.drop_column("chain")
