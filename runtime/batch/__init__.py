"""A batch: its plan, its run (stages, chains, approvals, deadline, cancel), its handle and
its audit rows.
"""
