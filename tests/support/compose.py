"""Reading `compose/` without Docker: the YAML as compose sees it after
interpolating `${NAME}`, `${NAME:-default}` and `${NAME:?error}` from an env
file, so tests can check its structure and run its commands locally."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose"
COMPOSE_FILE = COMPOSE / "docker-compose.yml"
RABBITMQ_FILE = COMPOSE / "rabbitmq.yml"  # the override that makes RabbitMQ the broker
ENV_EXAMPLE = COMPOSE / ".env.example"
DOCKERFILE = COMPOSE / "Dockerfile"

_VARIABLE = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
)


def load(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    """A compose file as YAML (merge keys resolved, nothing interpolated)."""
    return yaml.safe_load(path.read_text())


def env_file(path: Path = ENV_EXAMPLE) -> dict[str, str]:
    """`NAME=value` lines, as compose reads an env file (comments and blanks skipped)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, value = line.split("=", 1)
            values[name.strip()] = value.strip()
    return values


def variables(value: Any) -> list[tuple[str, str | None, str | None]]:
    """Every `${NAME...}` in a value (strings inside lists and mappings too): (name, op, arg)."""
    if isinstance(value, dict):
        return [found for item in value.values() for found in variables(item)]
    if isinstance(value, list):
        return [found for item in value for found in variables(item)]
    if not isinstance(value, str):
        return []
    return [
        (match["name"], match["op"], match["arg"])
        for match in _VARIABLE.finditer(value)
        if match["name"]
    ]


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """`value` with every variable replaced as compose replaces it; `$$` becomes `$`."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match) -> str:
        if match[0] == "$$":
            return "$"
        name, op, arg = match["name"], match["op"], match["arg"]
        present = env.get(name)
        if op in (":-", "-"):
            unset = present is None or (op == ":-" and present == "")
            return arg if unset else present
        if op in (":?", "?"):
            if present is None or (op == ":?" and present == ""):
                raise KeyError(f"compose would refuse to start: {arg}")
            return present
        return present or ""

    return _VARIABLE.sub(replace, value)


def service(name: str, env: dict[str, str]) -> dict[str, Any]:
    """One service, interpolated with `env`."""
    return interpolate(load()["services"][name], env)


def environment(definition: dict[str, Any]) -> dict[str, str]:
    """A service's `environment`, mapping or list form, as strings."""
    given = definition.get("environment") or {}
    if isinstance(given, list):
        given = dict(item.split("=", 1) for item in given)
    return {key: "" if value is None else str(value) for key, value in given.items()}


def local_argv(command: list[str]) -> list[str]:
    """A service command runnable here: its program from this virtualenv, else PATH."""
    program = Path(sys.executable).parent / command[0]
    found = str(program) if program.exists() else shutil.which(command[0])
    if found is None:
        raise FileNotFoundError(command[0])
    return [found, *command[1:]]
