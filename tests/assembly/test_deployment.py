"""What a process serving the cluster reads of it (`assembly/deployment.py`):
on the in-process transport there is no Redis, broker or throttle to read."""

from __future__ import annotations

import pytest

from runtime.errors import StateUnavailable
from runtime.testing import memory_runtime


def test_the_in_process_deployment_has_no_redis_and_is_never_ready():
    with memory_runtime() as rt:
        deployment = rt.deployment
        assert (deployment.app, deployment.client, deployment.throttle) == (None, None, None)
        assert deployment.budgets_used() is None
        assert deployment.ledger is rt.ledger
        with pytest.raises(StateUnavailable, match="no Redis"):
            deployment.ping()
