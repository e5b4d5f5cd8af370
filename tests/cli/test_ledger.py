"""`toolrun ledger prune` as an operator runs it, on a ledger of its own:
ended batches past the period go, their transcripts written first when
asked; without a period, one line (docs/architecture.md, "Retention")."""

from __future__ import annotations

import json
from datetime import timedelta

from runtime.ledger.store import Ledger
from runtime.transcript import parse, verify
from runtime.transcript.archive import file_name
from tests.ledger.test_retention import make
from tests.support.cli import assert_one_line_error, toolrun, toolrun_env

KEY = "cli-retention-key-0123456789abcdef"


def test_prune_exports_then_removes_what_ended_before_the_period(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = Ledger(url)
    old, recent = make(ledger), make(ledger, age=timedelta(days=2))
    ledger.close()
    env = toolrun_env(tmp_path / "home", TOOLRUN_DATABASE_URL=url, TOOLRUN_SIGNING_KEY=KEY)
    kept = tmp_path / "kept"

    dry = toolrun("ledger", "prune", "--days", "30", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("1 batch(es)")
    done = toolrun("ledger", "prune", "--days", "30", "--export", str(kept), "--json", env=env)

    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert (said["batches"], said["exported"]) == (1, 1)
    assert said["reclaimed"].startswith("incremental vacuum")
    document = parse((kept / file_name(old)).read_text())
    assert document["batch"]["id"] == old
    from runtime import config
    from runtime.settings import Settings

    assert verify(document, config.signing_key(Settings(signing_key=KEY))) == []
    ledger = Ledger(url)
    assert ledger.record(old) is None
    assert ledger.record(recent) is not None
    ledger.close()


def test_the_period_comes_from_the_settings_or_the_command_fails(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    Ledger(url).close()
    env = toolrun_env(tmp_path / "home", TOOLRUN_DATABASE_URL=url)
    assert_one_line_error(toolrun("ledger", "prune", env=env), "TOOLRUN_RETENTION_DAYS")
    done = toolrun("ledger", "prune", env=env | {"TOOLRUN_RETENTION_DAYS": "7"})
    assert done.returncode == 0, done.stderr
    assert "removed 0 batch(es)" in done.stdout


def test_without_days_the_org_files_period_and_archive_win_and_days_wins_over_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = Ledger(url)
    old, open_ = make(ledger), make(ledger, ended=False)
    ledger.close()
    kept, policy = tmp_path / "kept", tmp_path / "org.json"
    policy.write_text(json.dumps({"retention": {"days": 30, "export": str(kept)}}))
    env = toolrun_env(
        tmp_path / "home",
        TOOLRUN_DATABASE_URL=url,
        TOOLRUN_SIGNING_KEY=KEY,
        TOOLRUN_POLICY_FILE=str(policy),
        TOOLRUN_RETENTION_DAYS="1000",
        TOOLRUN_RETENTION_EXPORT=str(tmp_path / "unused"),
    )

    flag = toolrun("ledger", "prune", "--days", "1000", "--json", env=env)
    assert flag.returncode == 0, flag.stderr
    said = json.loads(flag.stdout)
    assert (said["batches"], said["period_from"]) == (0, "--days")
    done = toolrun("ledger", "prune", "--json", env=env)

    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert (said["batches"], said["exported"], said["period_from"]) == (1, 1, str(policy))
    assert [p.name for p in kept.iterdir()] == [file_name(old)]
    assert not (tmp_path / "unused").exists()
    ledger = Ledger(url)
    assert ledger.record(old) is None and ledger.record(open_) is not None
    ledger.close()


def test_a_bad_org_retention_is_one_line_naming_the_file(tmp_path):
    policy = tmp_path / "org.json"
    policy.write_text(json.dumps({"retention": {"days": -1}}))
    env = toolrun_env(tmp_path / "home", TOOLRUN_POLICY_FILE=str(policy))
    assert_one_line_error(
        toolrun("ledger", "prune", env=env), f"{policy}: retention.days must be a positive"
    )
