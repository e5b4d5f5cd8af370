"""Task messages are signed, so a worker runs only what a client admitted.

Anyone who can write to Redis can push a task message. The HMAC covers the
call, its arguments, the policy snapshot and the decision; a worker refuses a
message that is unsigned, signed with another key, or altered after signing.
The key is the task messages' own, derived from the signing key
(`runtime.keyring`), so a transcript's or an approval's HMAC is never a
message's signature.
The signature is computed over the message's wire form (`CallMessage.wire`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from runtime.keyring import Purpose, derived
from runtime.types import CallMessage

FIELD = "signature"
UNSIGNED = (FIELD, "then", "sent_at")  # a chain's next steps, and the time of posting
# Covered when set; a message without one signs as before it existed.
OPTIONAL = ("traceparent", "approval_ms")


def canonical(data: dict[str, Any]) -> bytes:
    """What the signature covers: everything but itself, a chain's next
    steps (`then`), which carry their own, and the time the queue posted the
    message (`sent_at`: set after signing, only a figure for the transcript)."""
    body = {
        key: value
        for key, value in data.items()
        if key not in UNSIGNED and not (key in OPTIONAL and value is None)
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign(data: dict[str, Any], key: bytes) -> str:
    """The HMAC under the task messages' own key, derived from the signing
    key `key` (`runtime.keyring`): no other signed thing verifies as a message."""
    own = derived(key, Purpose.task_message)
    return hmac.new(own, canonical(data), hashlib.sha256).hexdigest()


def verify(data: dict[str, Any], key: bytes) -> bool:
    signature = data.get(FIELD)
    if not isinstance(signature, str) or not signature:
        return False
    return hmac.compare_digest(signature, sign(data, key))


def sealed(message: CallMessage, key: bytes) -> CallMessage:
    """`message` with its signature."""
    return message.model_copy(update={FIELD: sign(_covered(message), key)})


def genuine(message: CallMessage, key: bytes) -> bool:
    """Whether `message` carries a valid signature under `key`."""
    if not message.signature:
        return False
    return hmac.compare_digest(message.signature, sign(_covered(message), key))


def _covered(message: CallMessage) -> dict[str, Any]:
    """The wire form of what the signature covers, without dumping a chain's
    next steps only to leave them out."""
    unset = {key for key in OPTIONAL if getattr(message, key) is None}
    return message.model_dump(mode="json", exclude={*UNSIGNED, *unset})
