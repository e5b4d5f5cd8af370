"""The plan's JSON made once for its copy and the kept record (`plan_json`)."""

from __future__ import annotations

import json

from pydantic import BaseModel

from runtime.client.first_send import plan_json


class Planned(BaseModel):
    reason: str
    calls: list[int]


def test_a_plan_is_pydantic_s_json():
    plan = Planned(reason="été", calls=[1, 2])
    assert json.loads(plan_json(plan)) == plan.model_dump(mode="json")


def test_a_lone_surrogate_goes_through_the_dict_spelled_with_an_escape():
    """pydantic cannot write it as UTF-8; JSON spells it `\\ud800`, as before."""
    plan = Planned(reason="a\ud800b", calls=[])
    text = plan_json(plan)
    assert "\\ud800" in text
    assert json.loads(text) == plan.model_dump(mode="json")
