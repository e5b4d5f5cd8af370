"""growth indexes: the batches' submitter, which `toolrun usage --key` and the
open-batch cap filter on, scanned every batch of a grown ledger (docs/benchmarks, P8)

Revision ID: 0008
Revises: '0007'
Created: 2026-12-04 23:21:55.479069
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_toolrun_batch_submitter"), ["submitter"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("toolrun_batch", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_toolrun_batch_submitter"))
