"""A submitter the tests kill: submits the batch given as JSON on argv, prints
its id, then waits to be SIGKILLed (`python -m tests.support.submitter SPEC`)."""

from __future__ import annotations

import json
import sys
import time

from runtime.client import Runtime


def main() -> None:
    spec = json.loads(sys.argv[1])
    runtime = Runtime.from_env()
    handle = runtime.submit(spec.pop("calls"), **spec)
    print(handle.batch_id, flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main()
