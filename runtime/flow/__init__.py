"""Flow control, what it is: the policy's rates, concurrency caps, size caps,
fair share, budgets and prices, read and checked from the settings files
(docs/architecture.md, "Flow control", "Usage and budgets", and "Where each
limit is checked" for the enforcement points that hold calls to them)."""
