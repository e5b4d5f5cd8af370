"""The batch state's seam by role (`transport/base.py`): each role is a few
methods, `BatchState` is all of them, and both implementations have every
method of every role with the role's parameters, so a caller that names one
role can be given either transport, or a fake of that role alone."""

from __future__ import annotations

import inspect

import pytest

from runtime.transport import base
from runtime.transport.memory import MemoryTransport
from runtime.transport.redis_state import RedisState

ROLES = [base.ResultBus, base.SendMarks, base.Copies, base.Leases, base.Budgets]


def methods(protocol: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def test_the_state_is_its_roles_and_each_role_is_a_few_methods():
    every = [name for role in ROLES for name in methods(role)]
    assert len(every) == len(set(every)), "a method in two roles"
    assert set(ROLES) <= set(base.BatchState.__mro__)
    assert set(methods(base.BatchState)) == {"close"}  # nothing else outside a role
    assert all(len(methods(role)) <= 10 for role in ROLES)


@pytest.mark.parametrize("implementation", [MemoryTransport, RedisState])
@pytest.mark.parametrize("role", ROLES, ids=lambda role: role.__name__)
def test_each_implementation_has_every_method_of_every_role(implementation, role):
    for name, wanted in methods(role).items():
        found = inspect.signature(getattr(implementation, name))
        assert list(found.parameters) == list(wanted.parameters), f"{role.__name__}.{name}"
        kinds = [p.kind for p in found.parameters.values()]
        assert kinds == [p.kind for p in wanted.parameters.values()], f"{role.__name__}.{name}"
