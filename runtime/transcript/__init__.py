"""A batch's transcript: one document built from the ledger alone, in a
versioned shape (`toolrun.transcript/1`, docs/schemas/transcript-1.json),
sealed with a digest and an HMAC under the signing key and chained to the turn
before it in its conversation (docs/architecture.md, "Transcripts").

`document` builds it (`calls` the part of each call), `integrity` seals and
verifies it, `conversation` links and checks the turns of a conversation, `formats`
writes it as JSON, JSON Lines, Markdown (`markdown`) or one HTML page (`page`),
a write's change shown as diff lines (`changes`).
"""

from runtime.transcript.document import SCHEMA, build
from runtime.transcript.formats import FORMATS, MEDIA_TYPES, parse, render
from runtime.transcript.integrity import digest, seal, verify

__all__ = [
    "FORMATS",
    "MEDIA_TYPES",
    "SCHEMA",
    "build",
    "digest",
    "parse",
    "render",
    "seal",
    "verify",
]
