"""Alembic's entry point: migrate the connection that `runtime.ledger.schema` hands over.

Run migrations with `toolrun db upgrade` (or `runtime.ledger.schema.upgrade`), never
with the bare `alembic` command: toolrun chooses the engine, the lock and the
version table.
"""

from alembic import context

from runtime.ledger import schema

connection = context.config.attributes.get("connection")
if connection is None or context.is_offline_mode():
    raise RuntimeError("run toolrun's migrations with `toolrun db upgrade`, not `alembic`")

context.configure(
    connection=connection,
    process_revision_directives=context.config.attributes.get("process_revision_directives"),
    **schema.context_options(connection),
)
with context.begin_transaction():
    context.run_migrations()
