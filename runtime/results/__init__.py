"""Results: the formatter, terminal results, redaction, display."""
