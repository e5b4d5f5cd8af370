"""Flow control, all of it (docs/architecture.md, "Flow control", "Usage and
budgets"): what the policy's rates, concurrency caps, size caps, fair share,
budgets and prices are, read and checked from the settings files; and their
counters in Redis, the callers of flow control's scripts (the throttle's
windows, slots and fair share, the commands that ride another round trip, and
the budgets' counters). The enforcement points that call into it stand in the
process step that runs them ("Where each limit is checked")."""
