"""gateway API keys (hashed) and which key submitted each batch

Revision ID: 0003
Revises: '0002'
Created: 2026-11-30 14:09:51.844147
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "toolrun_api_key",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("secret_hash", sa.String(), nullable=False),
        sa.Column("workspace_roots", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("max_mode", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("toolrun_api_key", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_toolrun_api_key_name"), ["name"], unique=True)

    op.create_table(
        "toolrun_batch_owner",
        sa.Column("batch_id", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("key_name", sa.String(), nullable=False),
        sa.Column("format", sa.String(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("batch_id"),
    )
    with op.batch_alter_table("toolrun_batch_owner", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_toolrun_batch_owner_key_id"), ["key_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("toolrun_batch_owner", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_toolrun_batch_owner_key_id"))

    op.drop_table("toolrun_batch_owner")
    with op.batch_alter_table("toolrun_api_key", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_toolrun_api_key_name"))

    op.drop_table("toolrun_api_key")
