"""What the tests' policy hooks answer, whatever their kind: the same rules for
the Python callable (`decide`), the command (this file run as a script, with
Claude Code's exit codes) and the HTTP endpoint (tests/support/hook_server.py).
The call's one text argument (`label` or `text`) says what to answer, by its
first word: allow, deny, ask, replace, invalid, slow, crash; anything else, no
opinion. A post hook notes and marks a result whose text starts with `note`.
Standard library only: the command runs with an allowlisted environment."""

from __future__ import annotations

import json
import sys
import time

FIELDS = {"bump": "label", "echo": "text"}
SLOW = 20.0  # seconds a slow hook takes, far past the tests' timeouts
DENIAL = "not on a Friday"


def word(request: dict) -> str:
    value = request.get("arguments", {}).get(FIELDS.get(request["tool"], "text"), "")
    return str(value).split("-")[0]


def decide(request: dict) -> dict | None:
    said = word(request)
    if request["event"] == "post_tool_use":
        return {"note": "checked by the hook", "mark": "reviewed"} if said == "note" else {}
    field = FIELDS.get(request["tool"], "text")
    if said == "slow":
        time.sleep(SLOW)
    if said == "crash":
        raise RuntimeError("the hook crashed")
    return {
        "allow": {"decision": "allow", "reason": "the hook knows this one"},
        "deny": {"decision": "deny", "reason": DENIAL},
        "ask": {"decision": "ask", "reason": "a person should look"},
        "replace": {"arguments": {field: "replaced"}},
        "invalid": {"arguments": {field: 3}},
    }.get(said)


def main() -> int:
    request = json.load(sys.stdin)
    said = word(request)
    if request["event"] == "pre_tool_use" and said == "deny":
        print(DENIAL, file=sys.stderr)
        return 2
    if said == "crash":
        print("the hook crashed", file=sys.stderr)
        return 1
    answer = decide(request)
    if answer is not None:
        json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
