"""The audit ledger: tables, rows, engine, group commit, buffer, schema and migrations,
approvals.
"""
