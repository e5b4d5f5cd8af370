"""What calls cost and what they may spend: budgets and prices of the policy
(docs/architecture.md, "Usage and budgets")."""
