"""The approvals page: people answer waiting calls in a browser
(docs/architecture.md, "The approvals page")."""
