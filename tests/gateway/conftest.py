"""One gateway process per test session (per xdist process), on the session's
stack, with an org policy that allows one rule (what a submitter key's batch may
allow). Each module makes keys of its own (`keys`, names unique per module) and
works in roots of its own, so the modules share the process and not their keys,
batches, limits or usage; the few tests about a gateway's own start, stop or
settings start theirs (test_app.py, test_restart.py, test_waits.py)."""

from __future__ import annotations

import json

import pytest

from runtime.gateway.keys import Role
from runtime.types import Mode
from tests.support.gateway import running_gateway

ORG_ALLOW = "write_file(docs/**)"


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    return tmp_path_factory.mktemp("gateway-root")


@pytest.fixture(scope="session")
def gateway(stack, user_settings, tmp_path_factory):
    home = tmp_path_factory.mktemp("gateway")
    policy = home / "policy.json"
    policy.write_text(json.dumps({"permissions": {"allow": [ORG_ALLOW]}}))
    with running_gateway(
        stack, user_settings, home / "gateway.log", TOOLRUN_POLICY_FILE=str(policy)
    ) as running:
        yield running


@pytest.fixture(scope="module")
def keys(gateway, roots, request):
    """A submitter confined to `roots` (modes up to accept_edits), an approver,
    an admin, and a second submitter; names unique per module."""
    tag = request.module.__name__.rsplit(".", 1)[-1]
    return {
        "submitter": gateway.key(
            f"{tag}-alice", Role.submitter, roots=[roots], max_mode=Mode.accept_edits
        ),
        "other": gateway.key(f"{tag}-oscar", Role.submitter, roots=[roots]),
        "approver": gateway.key(f"{tag}-bob", Role.approver),
        "admin": gateway.key(f"{tag}-root", Role.admin),
    }


@pytest.fixture
def space(roots, request):
    """A fresh workspace inside the keys' roots."""
    path = roots / request.node.name[:60]
    path.mkdir()
    return path
