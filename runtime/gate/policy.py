"""The effective policy of one batch: rules from every level, workspace trust and
the workspace roots org policy admits, fixed when the batch is submitted.

Settings files have Claude Code's shape, with toolrun's own keys beside
`permissions`:

    {"permissions": {"allow": [...], "ask": [...], "deny": [...]},
     "trusted_workspaces": ["~/src"],          # org and user files only
     "workspace_roots": ["/srv/agents"],       # org file only
     "internal_hosts": ["10.2.0.0/16", "db.internal"],  # org file only
     "notifications": [{"url": "https://..."}],  # org file only (gate/notifiers.py)
     "retention": {"days": 90, "export": "/srv/archive"},  # org only (retention_policy.py)
     "hooks": [{"name": "opa", "when": "pre", "kind": "http", "url": "https://..."}],
     "sandbox": {"enabled": false,             # org file only
                 "network": {"allow": ["pypi.org", "*.npmjs.org"]}}}

`internal_hosts` names the internal hosts and ranges a network tool may reach
(runtime/gate/addresses.py); every other internal address is refused.
`sandbox` `{"enabled": false}` runs the processes tools start unconfined, and
each such call says so (docs/architecture.md, "The sandbox"); it is on otherwise.
Its `network.allow` lists the hosts (exact, `*.domain`, addresses or ranges) that
sandboxed processes may reach through the call's proxy; without it, no network.
`hooks` are policy hooks (runtime/gate/hooks/declaration.py): any file may
declare them, a project file's only count in a trusted workspace, and only the
org's may allow what the gate would ask about.

Org policy is `TOOLRUN_POLICY_FILE`, the project file `<workspace>/.toolrun/
settings.json`, the user file `TOOLRUN_USER_SETTINGS_FILE`. A file that cannot
be read, is not JSON, has an unknown key or an invalid rule is a
`ConfigurationError` naming the file and the culprit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runtime.errors import ConfigurationError
from runtime.flow import budget_reading as reading
from runtime.flow import budgets as spend
from runtime.flow import limit_reading
from runtime.flow import limits as flow_limits
from runtime.gate import retention_policy
from runtime.gate.addresses import InternalHosts
from runtime.gate.decision import Effect
from runtime.gate.hooks import declaration as hook_declaration
from runtime.gate.hooks.declaration import Hook
from runtime.gate.notifiers import Notifier
from runtime.gate.notifiers import read as read_notifiers
from runtime.gate.rules import Level, Rule, parse
from runtime.settings import Settings

PROJECT_FILE = Path(".toolrun") / "settings.json"
KEYS = {
    Level.org: {
        "permissions",
        "trusted_workspaces",
        "workspace_roots",
        "internal_hosts",
        "limits",
        "prices",
        "notifications",
        "sandbox",
        "hooks",
        "retention",
    },
    Level.user: {"permissions", "trusted_workspaces", "limits", "hooks"},
    Level.project: {"permissions", "limits", "hooks"},
}


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...]
    trusted: bool
    roots: tuple[str, ...] | None
    workspace: str
    version: str
    internal_hosts: tuple[str, ...] = ()
    # Budgets and prices (runtime/flow/budgets.py, `Spending.snapshot`), and
    # the submitter they are counted for; None: the policy has none.
    spending: dict[str, Any] | None = None
    # Rates, concurrency caps and fair share (runtime/flow/limits.py,
    # `Limits.snapshot`) and the submitter they count for; None: none.
    limits: dict[str, Any] | None = None
    # The org's sandbox switch ({"enabled": false}); None: the sandbox is on.
    sandbox: dict[str, Any] | None = None
    # Policy hooks, org's first, then the project's, then the user's.
    hooks: tuple[Hook, ...] = ()
    # Who submits the batch, as pre hooks are told; not in the snapshot.
    submitter: str | None = None

    def snapshot(self) -> dict[str, Any]:
        """The policy as JSON, carried (signed) in every task message so the
        worker checks against exactly what the batch was submitted under."""
        internal = {"internal_hosts": list(self.internal_hosts)} if self.internal_hosts else {}
        usage = {"usage": self.spending} if self.spending else {}
        flow = {"limits": self.limits} if self.limits else {}
        box = {"sandbox": self.sandbox} if self.sandbox else {}
        hooks = {"hooks": [hook.as_dict() for hook in self.hooks]} if self.hooks else {}
        return {
            **internal,
            **usage,
            **flow,
            **box,
            **hooks,
            "rules": [
                {
                    "text": r.text,
                    "effect": r.effect.value,
                    "level": r.level.name,
                    "source": r.source,
                }
                for r in self.rules
            ],
            "trusted": self.trusted,
            "roots": list(self.roots) if self.roots is not None else None,
            "workspace": self.workspace,
            "version": self.version,
        }

    def counted_for(self, principal: str) -> Policy:
        """The policy with the submitter its budgets and limits are counted for."""
        spending = self.spending and {**self.spending, "principal": principal}
        limits = self.limits and {**self.limits, "principal": principal}
        return replace(self, spending=spending, limits=limits, submitter=principal)

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> Policy:
        rules = tuple(
            parse(r["text"], Effect(r["effect"]), Level[r["level"]], r["source"])
            for r in data["rules"]
        )
        roots = tuple(data["roots"]) if data["roots"] is not None else None
        internal = tuple(data.get("internal_hosts", ()))
        return cls(
            rules,
            data["trusted"],
            roots,
            data["workspace"],
            data["version"],
            internal,
            data.get("usage"),
            data.get("limits"),
            data.get("sandbox"),
            tuple(Hook.from_dict(hook) for hook in data.get("hooks", ())),
        )


class PolicySources:
    """The org and user files, read once at startup; the project file is read
    per batch, from the batch's workspace."""

    def __init__(self, settings: Settings) -> None:
        self.org = _read(settings.policy_file, Level.org, required=True)
        self.user = _read(settings.user_settings_file, Level.user, required=False)
        # Parsed once, as the files are read once: every batch's policy starts from them.
        self._org_rules = tuple(_rules(self.org, Level.org))
        self._user_rules = tuple(_rules(self.user, Level.user))
        self._org_limits, self._user_limits = _file_limits(self.org, True), _file_limits(self.user)
        # The trusted directories, resolved once with the files that name them
        # (resolving them per batch cost P1 two walks of the file system a submit).
        self._trusted = _roots(self.org) + _roots(self.user)
        # What the submitter checks before anything else: the org's and user's sizes.
        self.limits = limit_reading.merged(self._org_limits, self._user_limits)
        # Who is told that a call waits for approval ("Approval notifications").
        self.notifiers: tuple[Notifier, ...] = read_notifiers(self.org, self.org.get("_source", ""))
        self._org_hooks = _hooks(self.org, Level.org)
        self._user_hooks = _hooks(self.user, Level.user)

    def rules(self) -> list[Rule]:
        """The org and user files' rules, known from startup."""
        return [*self._org_rules, *self._user_rules]

    def policy_for(
        self,
        workspace: Path,
        batch_rules: dict[str, Any] | None = None,
        remembered: Callable[[str], list[tuple[str, str]]] | None = None,
    ) -> Policy:
        """`remembered(workspace)`: the allow rules people remembered for this
        workspace or submitter, as (rule, source) ("Remembered rules")."""
        workspace = workspace.resolve()
        trusted = any(workspace == root or workspace.is_relative_to(root) for root in self._trusted)
        project = _read(workspace / PROJECT_FILE, Level.project, required=False)
        remembered_rules = remembered(str(workspace)) if remembered is not None else []
        rules = [
            *self._org_rules,
            # An untrusted repository may not grant itself anything; it may still restrict.
            *(r for r in _rules(project, Level.project) if trusted or r.effect is not Effect.allow),
            *self._user_rules,
            *(parse(text, Effect.allow, Level.user, source) for text, source in remembered_rules),
            *_rules({"permissions": batch_rules or {}, "_source": "submit"}, Level.batch),
        ]
        roots = self.org.get("workspace_roots")
        internal = tuple(self.org.get("internal_hosts", ()))
        spending = _spending(self.org, project, self.user)
        flow = limit_reading.merged(self._org_limits, _file_limits(project), self._user_limits)
        limits = flow.snapshot() if flow else None
        box = self.org.get("sandbox")
        # A repository's hook is its code, run by whoever submits: a trusted workspace's only.
        project_hooks = _hooks(project, Level.project) if trusted else ()
        hooks = (*self._org_hooks, *project_hooks, *self._user_hooks)
        body = {
            "rules": [r.as_dict() for r in rules],
            "trusted": trusted,
            "roots": roots,
            "workspace": str(workspace),
            **({"internal_hosts": list(internal)} if internal else {}),  # older versions stay
            **({"usage": spending} if spending else {}),
            **({"limits": limits} if limits else {}),
            **({"sandbox": box} if box else {}),
            **({"hooks": [hook.as_dict() for hook in hooks]} if hooks else {}),
        }
        version = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        return Policy(
            tuple(rules),
            trusted,
            tuple(roots) if roots else None,
            str(workspace),
            version,
            internal,
            spending,
            limits,
            box,
            hooks,
        )


def org_notifiers(settings: Settings) -> tuple[Notifier, ...]:
    """The org file's notifiers alone, for a process that reads no other policy (a worker)."""
    org = _read(settings.policy_file, Level.org, required=True)
    return read_notifiers(org, org.get("_source", ""))


def org_retention(settings: Settings) -> retention_policy.Retention:
    """The org file's retention, else the deployment's: the sweep's and `ledger prune`'s."""
    return retention_policy.resolve(_read(settings.policy_file, Level.org, required=True), settings)


def _read(path: Path | None, level: Level, *, required: bool) -> dict[str, Any]:
    if path is None:
        return {}
    path = Path(path).expanduser()
    if not path.exists():
        if required:
            raise ConfigurationError(f"{path}: {level.name} policy file does not exist")
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"{path}: cannot read settings: {error}") from error
    except json.JSONDecodeError as error:
        raise ConfigurationError(
            f"{path}: not valid JSON: {error.msg} (line {error.lineno})"
        ) from error
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path}: settings must be a JSON object")
    unknown = sorted(set(data) - KEYS[level])
    if unknown:
        raise ConfigurationError(f"{path}: unknown key(s) {unknown} in {level.name} settings")
    data["_source"] = str(path)
    _rules(data, level)  # parse now: an invalid rule is an error at startup
    for key in ("trusted_workspaces", "workspace_roots"):
        if key in data and not (
            isinstance(data[key], list) and all(isinstance(v, str) for v in data[key])
        ):
            raise ConfigurationError(f"{path}: {key} must be a list of directory paths")
    if "internal_hosts" in data:
        if not isinstance(data["internal_hosts"], list):
            raise ConfigurationError(f"{path}: internal_hosts must be a list of hosts or ranges")
        try:
            InternalHosts.parse(data["internal_hosts"])
        except ValueError as error:
            raise ConfigurationError(f"{path}: {error}") from None
    if "sandbox" in data:
        _check_sandbox(data["sandbox"], path)
    reading.read_budgets(data, str(path))  # docs/architecture.md, "Usage and budgets"
    limit_reading.read(data, str(path), org=level is Level.org)  # "Flow control"
    reading.read_prices(data, str(path))
    read_notifiers(data, str(path))
    retention_policy.read(data, str(path))  # docs/architecture.md, "Retention"
    hook_declaration.read(data, str(path), level)
    return data


def _check_sandbox(box: Any, path: Path) -> None:
    if not (
        isinstance(box, dict)
        and set(box) <= {"enabled", "network"}
        and isinstance(box.get("enabled", True), bool)
    ):
        raise ConfigurationError(
            f'{path}: sandbox must be {{"enabled": true|false, "network": {{"allow": [...]}}}}'
        )
    network = box.get("network", {})
    if not isinstance(network, dict) or set(network) - {"allow"}:
        raise ConfigurationError(f'{path}: sandbox.network must be {{"allow": ["host", ...]}}')
    if not isinstance(network.get("allow", []), list):
        raise ConfigurationError(f"{path}: sandbox.network.allow must be a list of hosts")
    try:
        InternalHosts.parse(network.get("allow", []), key="sandbox.network.allow")
    except ValueError as error:
        raise ConfigurationError(f"{path}: {error}") from None


def _spending(*files: dict[str, Any]) -> dict[str, Any] | None:
    """Every file's budgets (each one only tightens) and the org file's prices."""
    budgets = tuple(
        b for data in files for b in reading.read_budgets(data, data.get("_source", "settings"))
    )
    prices = reading.read_prices(files[0], files[0].get("_source", "org"))
    spending = spend.Spending(budgets, prices)
    return spending.snapshot() if spending else None


def _file_limits(data: dict[str, Any], org: bool = False) -> flow_limits.Limits:
    """One file's limits; merged, the org file's are tightened by the others'."""
    return limit_reading.read(data, data.get("_source", "settings"), org=org)


def _rules(data: dict[str, Any], level: Level) -> list[Rule]:
    source = data.get("_source", level.name)
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict):
        raise ConfigurationError(f"{source}: permissions must be an object")
    unknown = sorted(set(permissions) - {"allow", "ask", "deny"})
    if unknown:
        raise ConfigurationError(f"{source}: unknown permissions key(s) {unknown}")
    out = []
    for effect in (Effect.deny, Effect.ask, Effect.allow):
        texts = permissions.get(effect.value, [])
        if not isinstance(texts, list):
            raise ConfigurationError(f"{source}: permissions.{effect.value} must be a list")
        out += [parse(text, effect, level, source) for text in texts]
    return out


def _hooks(data: dict[str, Any], level: Level) -> tuple[Hook, ...]:
    return hook_declaration.read(data, data.get("_source", level.name), level)


def _roots(data: dict[str, Any]) -> tuple[Path, ...]:
    """A file's trusted workspaces, as directories resolved."""
    return tuple(Path(entry).expanduser().resolve() for entry in data.get("trusted_workspaces", []))
