"""The compose stack's structure, checked without a Docker engine: services,
healthchecks, start order, secrets, pinned images, the Dockerfile. Its commands
are run for real in tests/integration/test_compose_commands.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from runtime.gate.policy import PolicySources
from runtime.settings import PREFIX, Settings
from tests.support import compose

SERVICES = {"redis", "postgres", "migrate", "reads", "effects", "flower", "gateway", "autoheal"}
WORKERS = {"reads": ("prefork", "reads@%h"), "effects": ("prefork", "effects@%h")}
TOOLRUN_SERVICES = ("migrate", "reads", "effects", "gateway")  # the ones holding the keys
SECRET = re.compile(r"PASSWORD|SECRET|SIGNING_KEY|TOKEN|BASIC_AUTH|REDISCLI_AUTH", re.I)


@pytest.fixture(scope="module")
def spec():
    return compose.load()


@pytest.fixture(scope="module")
def env():
    return compose.env_file()


def option(command: list[str], name: str) -> str | None:
    """The value of `--name=value` or `--name value` in a command."""
    for index, arg in enumerate(command):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and index + 1 < len(command):
            return command[index + 1]
    return None


def test_every_service_is_there(spec):
    assert set(spec["services"]) == SERVICES
    assert set(spec["volumes"]) >= {"redis-data", "postgres-data"}


def test_redis_has_a_password_appendonly_noeviction_and_a_healthcheck(spec, env):
    redis = compose.service("redis", env)
    command = redis["command"]
    # The password is in a config file compose writes, not on the command line `ps` shows.
    assert not [arg for arg in command if env["REDIS_PASSWORD"] in arg], command
    [config] = redis["configs"]
    assert command[:2] == ["redis-server", config["target"]]
    content = compose.interpolate(spec["configs"][config["source"]]["content"], env)
    assert content.split() == ["requirepass", env["REDIS_PASSWORD"]]
    assert option(command, "--appendonly") == "yes"
    assert option(command, "--maxmemory-policy") == "noeviction"
    assert option(command, "--maxmemory")  # bounded: a full Redis refuses, never evicts
    assert "redis-data:/data" in redis["volumes"]
    assert compose.environment(redis)["REDISCLI_AUTH"] == env["REDIS_PASSWORD"]
    assert "PONG" in " ".join(redis["healthcheck"]["test"])


def test_postgres_keeps_its_data_in_a_volume_and_has_a_healthcheck(spec, env):
    postgres = compose.service("postgres", env)
    assert "postgres-data:/var/lib/postgresql/data" in postgres["volumes"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert compose.environment(postgres)["POSTGRES_PASSWORD"] == env["POSTGRES_PASSWORD"]


def test_every_long_running_service_has_a_healthcheck(spec):
    for name, service in spec["services"].items():
        if name == "migrate":
            assert service["restart"] == "no"  # one shot: it must not loop
            continue
        check = service.get("healthcheck")
        assert check and check.get("test") and check.get("interval"), name


def test_the_start_order_waits_on_health_and_on_the_migration(spec):
    services = spec["services"]
    for name, service in services.items():
        for needed, how in (service.get("depends_on") or {}).items():
            condition = how["condition"]
            assert condition in ("service_healthy", "service_completed_successfully"), name
            if condition == "service_healthy":
                assert services[needed].get("healthcheck"), f"{name} waits on {needed}"
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for worker in WORKERS:
        assert services[worker]["depends_on"] == {
            "redis": {"condition": "service_healthy"},
            "postgres": {"condition": "service_healthy"},
            "migrate": {"condition": "service_completed_successfully"},
        }
    assert services["flower"]["depends_on"]["redis"] == {"condition": "service_healthy"}


def test_the_gateway_serves_after_the_migration_on_loopback_by_default(spec, env):
    gateway = compose.service("gateway", env)
    assert gateway["command"][:2] == ["toolrun", "serve"]
    assert option(gateway["command"], "--port") == "8000"
    assert spec["services"]["gateway"]["depends_on"]["migrate"] == {
        "condition": "service_completed_successfully"
    }
    assert gateway["ports"] == ["127.0.0.1:8000:8000"]
    assert "/readyz" in " ".join(gateway["healthcheck"]["test"])
    assert compose.environment(gateway)["TOOLRUN_SIGNING_KEY"] == env["TOOLRUN_SIGNING_KEY"]


def test_the_migration_service_runs_toolrun_db_upgrade(spec):
    assert spec["services"]["migrate"]["command"] == ["toolrun", "db", "upgrade"]


def test_workers_have_their_own_queue_pool_and_a_node_name_per_replica(spec, env):
    names = set()
    for name, (pool, node) in WORKERS.items():
        command = compose.service(name, env)["command"]
        assert command[:4] == ["celery", "-A", "workers", "worker"]
        assert option(command, "--queues") == name
        assert option(command, "--pool") == pool
        assert int(option(command, "--concurrency")) >= 1
        # %h is each container's hostname, so `--scale` gives every replica its own name.
        assert option(command, "--hostname") == node
        assert "--task-events" in command  # Flower sees only what workers send
        names.add(node)
    assert len(names) == len(WORKERS)
    reads = option(compose.service("reads", env)["command"], "--concurrency")
    effects = option(compose.service("effects", env)["command"], "--concurrency")
    assert int(reads) > int(effects)
    for name in WORKERS:  # a worker that exits comes back
        assert compose.service(name, env)["restart"] == "unless-stopped"


def test_a_worker_that_turns_unhealthy_is_restarted(spec, env):
    """Compose restarts what exits; the autoheal service restarts a labelled worker
    whose healthcheck (a ping to its own node) fails."""
    watcher = compose.service("autoheal", env)
    label = watcher["environment"]["AUTOHEAL_CONTAINER_LABEL"]
    assert watcher["restart"] == "unless-stopped"
    assert "/var/run/docker.sock:/var/run/docker.sock:ro" in watcher["volumes"]
    for name in WORKERS:
        service = compose.service(name, env)
        assert service["labels"][label] == "true"
        assert "inspect ping" in service["healthcheck"]["test"][1]


def test_flower_is_given_neither_the_signing_key_nor_the_ledger(spec, env):
    """Flower reads the broker's events: the signing key would let it send calls
    workers run, and the ledger URL holds the database's password."""
    given = compose.environment(compose.service("flower", env))
    assert given["TOOLRUN_REDIS_URL"].startswith(f"redis://:{env['REDIS_PASSWORD']}@")
    assert not {"TOOLRUN_SIGNING_KEY", "TOOLRUN_DATABASE_URL"} & set(given), given
    assert not [v for v in given.values() if env["POSTGRES_PASSWORD"] in v]
    assert not compose.service("flower", env).get("volumes")  # no workspaces either


def test_the_image_has_the_otel_extra_and_the_services_pass_otel_variables(env):
    [install] = [
        line for line in compose.DOCKERFILE.read_text().splitlines() if "pip install" in line
    ]
    extras = re.search(r"\.\[([a-z,]+)\]", install)[1].split(",")
    assert "otel" in extras, install
    collector = {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    for name in TOOLRUN_SERVICES:
        given = compose.environment(compose.service(name, collector))
        assert given["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4318", name
        assert given["OTEL_SERVICE_NAME"], name
        # Unset, no exporter is named, so no process tries to send spans anywhere.
        assert compose.environment(compose.service(name, env))["OTEL_EXPORTER_OTLP_ENDPOINT"] == ""


def test_an_org_policy_trusts_the_shared_workspaces(env, tmp_path):
    """The workers' workspaces are under /workspaces, and a batch's writes there run
    (asking as its mode says) only in a trusted workspace."""
    for name in TOOLRUN_SERVICES:
        service = compose.service(name, env)
        target = compose.environment(service)["TOOLRUN_POLICY_FILE"]
        assert f"./policy.json:{target}:ro" in service["volumes"], name
        assert "workspaces:/workspaces" in service["volumes"], name
    settings = Settings(
        policy_file=compose.COMPOSE / "policy.json", user_settings_file=tmp_path / "none.json"
    )
    sources = PolicySources(settings)
    assert sources.policy_for(Path("/workspaces/demo")).trusted
    assert not sources.policy_for(tmp_path).trusted


@pytest.mark.server  # starts `celery flower` (it stops at once, but it is a server's command)
def test_the_shipped_placeholders_are_refused_at_startup_in_one_line(env, tmp_path):
    """.env.example copied as it is: every toolrun service stops at once, saying
    which setting still holds a change-me, before it reaches for any server."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLRUN_", "OTEL_"))}
    for name in ("migrate", "flower"):
        service = compose.service(name, env)
        environment = compose.environment(service) | {"TOOLRUN_POLICY_FILE": ""}
        done = subprocess.run(
            compose.local_argv(service["command"]),
            env=base | environment | {"TOOLRUN_HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        said = done.stderr.strip()
        assert done.returncode != 0, (name, said)
        assert len(said.splitlines()) == 1 and "change-me" in said, (name, said)


def test_flower_asks_for_credentials_from_the_env_file(spec, env):
    flower = compose.service("flower", env)
    assert flower["command"] == ["celery", "-A", "workers", "flower"]
    auth = compose.environment(flower)["FLOWER_BASIC_AUTH"]
    assert auth == f"{env['TOOLRUN_FLOWER_USER']}:{env['TOOLRUN_FLOWER_PASSWORD']}"
    assert int(compose.environment(flower)["FLOWER_MAX_TASKS"]) <= 10_000  # bounded memory
    assert flower["ports"] == ["127.0.0.1:5555:5555"]  # loopback unless FLOWER_PUBLISH says
    with pytest.raises(KeyError, match="TOOLRUN_FLOWER_PASSWORD"):
        compose.service("flower", {k: v for k, v in env.items() if k != "TOOLRUN_FLOWER_PASSWORD"})


def test_no_secret_is_written_in_the_file(spec):
    """Each secret is `${NAME:?...}`: from the env file, or compose refuses to start."""
    for name, service in spec["services"].items():
        for key, value in compose.environment(service).items():
            if SECRET.search(key):
                assert "${" in value, f"{name}: {key} is inline"
        for text in [*compose.environment(service).values(), *map(str, service.get("command", []))]:
            for user_password in re.findall(r"://([^@/]*)@", text):
                assert "${" in user_password.split(":", 1)[-1], f"{name}: inline URL password"
    for variable, op, _arg in compose.variables(spec):
        if SECRET.search(variable):
            assert op == ":?", f"${{{variable}}} must be required, not defaulted"


def test_the_env_example_covers_every_required_variable_with_placeholders(spec, env):
    required = {name for name, op, _ in compose.variables(spec) if op == ":?"}
    assert required <= set(env)
    for name in required:
        if SECRET.search(name):
            assert env[name].startswith("change-me"), name
    assert "compose/.env" in (compose.REPO / ".gitignore").read_text().splitlines()


def test_every_toolrun_variable_named_is_a_setting():
    """A misspelt TOOLRUN_* stops every toolrun process at startup."""
    text = compose.COMPOSE_FILE.read_text() + compose.ENV_EXAMPLE.read_text()
    known = {PREFIX + field.upper() for field in Settings.model_fields}
    named = set(re.findall(r"\bTOOLRUN_[A-Z_]+\b", text))
    assert named and named <= known, named - known


def test_images_are_pinned_by_version(spec):
    for name, service in spec["services"].items():
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and tag not in ("", "latest"), f"{name}: {image}"
        assert re.match(r"\d+(\.\d+)+", tag), f"{name}: {image}"
    for line in compose.DOCKERFILE.read_text().splitlines():
        if line.startswith("ARG PYTHON_IMAGE="):
            assert re.fullmatch(r"ARG PYTHON_IMAGE=python:\d+\.\d+\.\d+-slim-\w+", line)


def test_the_dockerfile_is_two_stages_and_runs_as_a_user():
    lines = [
        line.strip()
        for line in compose.DOCKERFILE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    froms = [line for line in lines if line.startswith("FROM ")]
    assert len(froms) == 2 and froms[0].endswith(" AS build")
    final = lines[lines.index(froms[1]) :]
    users = [line for line in final if line.startswith("USER ")]
    assert users and users[-1] not in ("USER root", "USER 0")
    assert not any(re.search(r"apt-get|apk add|gcc|build-essential", line) for line in final)
    assert [line for line in final if line.startswith("COPY")] == [
        "COPY --from=build /opt/toolrun /opt/toolrun"
    ]


def test_the_image_installs_the_package_with_its_migrations(tmp_path):
    """Build the wheel from exactly what the Dockerfile copies: the workers'
    entry point and every migration must be in it."""
    copied = []
    for line in compose.DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            copied += line.split()[1:-1]
    source = tmp_path / "src"
    for name in copied:
        origin = compose.REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy(origin, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    revisions = {
        p.name for p in Path(compose.REPO / "runtime/ledger/migrations/versions").glob("*.py")
    }
    assert {
        "workers/app.py",
        "runtime/ledger/migrations/env.py",
        "runtime/ledger/migrations/script.py.mako",
    } <= names
    assert {f"runtime/ledger/migrations/versions/{name}" for name in revisions} <= names


def test_the_rabbitmq_override_makes_it_the_broker_of_every_toolrun_service(env):
    """compose/rabbitmq.yml: a pinned RabbitMQ whose password comes from .env,
    named as TOOLRUN_BROKER_URL by every service that sends or takes calls,
    each waiting for it to be healthy; Redis stays the state."""
    override = compose.interpolate(compose.load(compose.RABBITMQ_FILE), env)
    base = compose.load()
    rabbitmq = override["services"]["rabbitmq"]
    repository, _, tag = rabbitmq["image"].rpartition(":")
    assert repository == "rabbitmq" and re.match(r"\d+\.\d+\.\d+", tag)
    assert compose.environment(rabbitmq)["RABBITMQ_DEFAULT_PASS"] == env["RABBITMQ_PASSWORD"]
    assert env["RABBITMQ_PASSWORD"].startswith("change-me")
    assert (
        rabbitmq["healthcheck"]["test"] and "rabbitmq-data:/var/lib/rabbitmq" in rabbitmq["volumes"]
    )
    for name in ("reads", "effects", "flower", "gateway"):
        service = override["services"][name]
        url = compose.environment(service)["TOOLRUN_BROKER_URL"]
        assert url.startswith("amqp://") and env["RABBITMQ_PASSWORD"] in url, name
        assert service["depends_on"]["rabbitmq"]["condition"] == "service_healthy", name
        assert "TOOLRUN_REDIS_URL" in base["x-toolrun-environment"]  # the state, merged in
    for variable, op, _arg in compose.variables(compose.load(compose.RABBITMQ_FILE)):
        if SECRET.search(variable):
            assert op == ":?", f"${{{variable}}} must be required, not defaulted"


def test_rabbitmqs_consumer_timeout_outlasts_a_call_as_redis_visibility_timeout_does(env):
    override = compose.interpolate(compose.load(compose.RABBITMQ_FILE), env)
    arguments = compose.environment(override["services"]["rabbitmq"])[
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"
    ].split()
    milliseconds = int(arguments[arguments.index("consumer_timeout") + 1])
    assert milliseconds / 1000 > Settings().visibility_timeout


def test_every_toolrun_variable_the_override_names_is_a_setting():
    known = {PREFIX + field.upper() for field in Settings.model_fields}
    named = set(re.findall(r"\bTOOLRUN_[A-Z_]+\b", compose.RABBITMQ_FILE.read_text()))
    assert named and named <= known, named - known
