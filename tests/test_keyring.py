"""Keys per purpose from the one signing key (runtime/keyring.py)."""

from __future__ import annotations

import hashlib
import hmac

from runtime.keyring import Purpose, derived


def test_each_purpose_has_a_key_of_its_own_that_every_process_derives_alike():
    keys = {purpose: derived(b"secret", purpose) for purpose in Purpose}
    assert len(set(keys.values()) | {b"secret"}) == len(Purpose) + 1
    assert derived(b"secret", Purpose.transcript) != derived(b"other", Purpose.transcript)
    expected = hmac.new(b"secret", b"toolrun/v1/task-message", hashlib.sha256).digest()
    assert keys[Purpose.task_message] == expected  # what docs/architecture.md says, byte for byte
