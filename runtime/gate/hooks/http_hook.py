"""A hook that is an HTTP endpoint: the request is POSTed as JSON, signed as
approval notifications are (runtime/batch/notifying.py) but under a key of its
own (`Purpose.hook`, runtime/keyring.py): `X-Toolrun-Signature: sha256=` an
HMAC-SHA256 over `<timestamp>.<body>`, `X-Toolrun-Timestamp` the UNIX seconds it
was signed at, `X-Toolrun-Hook` the hook's name. The answer is the response's
JSON body (empty: no opinion). One attempt within the hook's timeout: a call
waits on it, so nothing is retried; no answer, a status other than 2xx or a
body that is not JSON is the hook's failure.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from typing import Any

from runtime.errors import HookFailed
from runtime.gate.hooks.declaration import Hook
from runtime.keyring import Purpose, derived

ANSWER_BYTES = 1024 * 1024  # what is read of an answer at most


def signature(key: bytes, timestamp: str, body: bytes) -> str:
    """What `X-Toolrun-Signature` carries for `body` signed at `timestamp`
    under the deployment's signing key `key`."""
    own = derived(key, Purpose.hook)
    return "sha256=" + hmac.new(own, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def ask(hook: Hook, request: dict[str, Any], key: bytes) -> Any:
    body = json.dumps(request, separators=(",", ":"), default=str).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "toolrun-hook",
        "X-Toolrun-Hook": hook.name,
        "X-Toolrun-Timestamp": timestamp,
        "X-Toolrun-Signature": signature(key, timestamp, body),
    }
    sent = urllib.request.Request(str(hook.target), data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(sent, timeout=hook.timeout) as response:  # noqa: S310 - org's URL
            text = response.read(ANSWER_BYTES)
    except urllib.error.HTTPError as error:
        raise HookFailed(f"answered HTTP {error.code}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, TimeoutError):
            raise HookFailed(f"gave no answer within {hook.timeout:g} s") from None
        raise HookFailed(f"could not be reached: {reason}") from None
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise HookFailed("answered a body that is not JSON") from None
