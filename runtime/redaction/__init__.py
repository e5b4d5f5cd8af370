"""Secrets out of everything that leaves a worker: results, ledger rows, logs,
what Flower shows. `Redactor` applies the built-in detectors (`detectors`,
`anchors`, `secret_names`) and a deployment's own patterns."""

from runtime.redaction.redactor import BUILT_IN, Redactor, redact, redact_text, redactor_for

__all__ = ["BUILT_IN", "Redactor", "redact", "redact_text", "redactor_for"]
