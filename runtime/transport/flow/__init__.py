"""Flow control's Redis side: the throttle's windows, slots and fair share,
the commands that ride another round trip, their scripts, and the budgets'
counters (docs/architecture.md, "Where each limit is checked")."""
