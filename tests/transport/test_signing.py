"""Task-message signatures: what they cover, and what a worker refuses."""

from __future__ import annotations

from runtime.transport.signing import FIELD, genuine, sealed, sign, verify
from runtime.types import CallMessage

KEY = b"k" * 32
MESSAGE = {
    "batch_id": "b1",
    "call_id": "c1",
    "tool": "bump",
    "arguments": {"label": "é"},
    "policy": {"rules": []},
    "decision": {"effect": "allow"},
}


def signed(data: dict) -> dict:
    return {**data, FIELD: sign(data, KEY)}


def test_a_signed_message_verifies_whatever_its_key_order():
    message = signed(MESSAGE)
    assert verify(message, KEY)
    assert verify(dict(reversed(list(message.items()))), KEY)


def test_unsigned_foreign_key_and_altered_messages_do_not_verify():
    assert not verify(MESSAGE, KEY)
    assert not verify({**MESSAGE, FIELD: ""}, KEY)
    assert not verify({**MESSAGE, FIELD: 42}, KEY)
    assert not verify(signed(MESSAGE), b"another key")
    assert not verify({**signed(MESSAGE), "arguments": {"label": "x"}}, KEY)
    assert not verify({**signed(MESSAGE), "approved_by": "mallory"}, KEY)


def test_a_chain_s_next_steps_are_outside_the_signature_they_carry_their_own():
    assert verify({**signed(MESSAGE), "then": [signed({**MESSAGE, "call_id": "c2"})]}, KEY)


def test_the_time_of_posting_is_outside_the_signature():
    """The queue stamps `sent_at` after the client signed; a worker still runs it."""
    assert verify({**signed(MESSAGE), "sent_at": 1764560000.25}, KEY)
    data = CallMessage.from_wire({**MESSAGE, "mode": "auto", "workspace": ".", "position": 0})
    sealed_message = sealed(data, KEY)
    assert genuine(sealed_message.model_copy(update={"sent_at": 1764560000.25}), KEY)


def test_the_signature_is_under_the_task_messages_own_key_not_the_signing_key():
    import hashlib
    import hmac

    from runtime.transport.signing import canonical

    assert sign(MESSAGE, KEY) != hmac.new(KEY, canonical(MESSAGE), hashlib.sha256).hexdigest()
