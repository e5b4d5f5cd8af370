"""The audit ledger: `Ledger` (store) is the one way in; tables, rows, batches and
claims (its statements), engine, group commit, buffer, write hold, schema and
migrations, approvals, keys. Nothing outside this package writes SQL.
"""
