"""The environment of a process the embedded stack starts (a worker, Flower)."""

from __future__ import annotations

import json
import os

from pydantic import SecretStr

from runtime.settings import PREFIX, Settings


def child_env(
    settings: Settings, redis_url: str, extra_env: dict[str, str] | None
) -> dict[str, str]:
    """The environment of a worker or Flower: these settings, this stack's URLs, the repo."""
    env = {key: value for key, value in os.environ.items() if key != f"{PREFIX}FLOWER_PASSWORD"}
    for name in type(settings).model_fields.keys() - {"flower_password"}:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            env[f"{PREFIX}{name.upper()}"] = value.get_secret_value()
        elif isinstance(value, dict | list):  # read back as JSON (redaction_patterns)
            env[f"{PREFIX}{name.upper()}"] = json.dumps(value)
        elif value is not None:
            env[f"{PREFIX}{name.upper()}"] = str(value)
    env[f"{PREFIX}HOME"] = str(settings.home.resolve())
    env[f"{PREFIX}REDIS_URL"] = redis_url
    env[f"{PREFIX}DATABASE_URL"] = settings.ledger_url
    env.update(extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    return env
