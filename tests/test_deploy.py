"""The deployment examples name real commands, options, queues, settings and metrics."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from prometheus_client.metrics import MetricWrapperBase

from wbsync.api.attention import EXPIRING_WITHIN_DAYS
from wbsync.cli import app
from wbsync.config import Settings
from wbsync.observability import metrics
from wbsync.syncs import SYNCS

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
UNITS = sorted(DEPLOY.glob("*.service"))
ENV_FILES = sorted(DEPLOY.glob("*.env.example"))
RULES = DEPLOY / "prometheus-rules.yml"
SETTING_NAMES = {f"WBSYNC_{name.upper()}" for name in Settings.model_fields}
# Labels Prometheus adds to every series it scrapes, and the metric it makes per target.
SCRAPE_LABELS = {"job", "instance"}
PROMETHEUS_OWN = {"up"}


def _unit(path: Path) -> dict[str, list[str]]:
    """A systemd unit's ``Key=Value`` lines (keys may repeat), continuation lines joined."""
    entries: dict[str, list[str]] = {}
    text = path.read_text("utf-8").replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        entries.setdefault(key.strip(), []).append(value.strip())
    return entries


def _env_file(path: Path) -> dict[str, str]:
    """An EnvironmentFile as systemd reads it: ``NAME=value``, single quotes kept literal."""
    values = {}
    for line in path.read_text("utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            if len(value) >= 2 and value[0] == value[-1] == "'":
                value = value[1:-1]
            values[name.strip()] = value
    return values


def _expand(command: str, env: dict[str, str]) -> list[str]:
    """The argv systemd runs: ``${NAME}`` from the unit's environment files."""

    def value(match: re.Match[str]) -> str:
        assert match.group(1) in env, f"{match.group(1)} is in no example environment file"
        return env[match.group(1)]

    return shlex.split(re.sub(r"\$\{(\w+)\}", value, command))


def test_there_are_units_and_environment_examples() -> None:
    names = {p.name for p in UNITS}
    assert {"wbsync-worker@.service", "wbsync-api.service", "wbsync-migrate.service"} <= names
    assert (DEPLOY / "wbsync.env.example") in ENV_FILES


def _environments(unit: str, entries: dict[str, list[str]]) -> list[dict[str, str]]:
    """The unit's environment per instance: /etc/wbsync/X.env is deploy/X.env.example, and a
    template's worker-%i.env stands for each deploy/worker-*.env.example in turn."""
    shared: dict[str, str] = {}
    instances: list[dict[str, str]] = [{}]
    for ref in entries.get("EnvironmentFile", []):
        name = Path(ref.lstrip("-")).name.replace("%i", "*") + ".example"
        matches = sorted(DEPLOY.glob(name))
        assert matches, f"{unit}: no example for {ref}"
        if "%i" in ref:
            instances = [_env_file(match) for match in matches]
        else:
            shared.update(_env_file(matches[0]))
    return [{**shared, **instance} for instance in instances]


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_units_run_real_wbsync_commands_and_options(unit: Path) -> None:
    entries = _unit(unit)
    commands = [
        c for key in ("ExecStart", "ExecStartPre", "ExecStop") for c in entries.get(key, [])
    ]
    assert commands, f"{unit.name} runs nothing"
    root: Any = typer.main.get_command(app)
    for env in _environments(unit.name, entries):
        for command in commands:
            program, *args = _expand(command, env)
            assert Path(program).name == "wbsync", command
            parent = root.make_context("wbsync", list(args), resilient_parsing=True)
            name, sub, rest = root.resolve_command(parent, list(args))
            assert sub is not None, f"{unit.name}: no command {name!r}"
            # Parses the options as wbsync would: an unknown option or a bad value fails here.
            sub.make_context(name, rest, parent=parent)
            if "--queues" in args:
                queues = args[args.index("--queues") + 1].split(",")
                assert set(queues) <= set(SYNCS), queues
    if " run " in f" {commands[0]} ":
        # SIGTERM gives running jobs the shutdown grace: the stop timeout must outlast it.
        grace = Settings.model_fields["shutdown_grace_s"].default
        assert float(entries["TimeoutStopSec"][0]) > grace
        assert entries["KillSignal"] == ["SIGTERM"]


def test_every_queue_is_served_by_some_worker_example() -> None:
    served = set()
    for path in DEPLOY.glob("worker-*.env.example"):
        served |= set(_env_file(path)["WORKER_QUEUES"].split(","))
    assert served == set(SYNCS)


def test_every_setting_named_in_the_examples_and_docs_is_real() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    texts = [p.read_text("utf-8") for p in [*UNITS, *ENV_FILES, *pages]]
    named = {name for text in texts for name in re.findall(r"\bWBSYNC_[A-Z0-9_]+\b", text)}
    named -= {"WBSYNC_TEST_POSTGRES_URL"}  # the suite's own variable, not a setting
    assert named and named <= SETTING_NAMES, sorted(named - SETTING_NAMES)


def test_the_environment_example_is_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    values = _env_file(DEPLOY / "wbsync.env.example")
    for name in [n for n in os.environ if n.startswith("WBSYNC_")]:
        monkeypatch.delenv(name)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.database_url.startswith("postgresql+asyncpg://")
    assert settings.secret_key is not None and len(settings.api_keys) == 1


def _exported() -> dict[str, set[str]]:
    """Every series name wbsync exports, with its labels."""
    suffixes = {
        "counter": ("_total", "_created"),
        "gauge": ("",),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
    }
    series: dict[str, set[str]] = {}
    for metric in vars(metrics).values():
        if isinstance(metric, MetricWrapperBase):
            [family] = metric.describe()
            labels = set(metric._labelnames)
            for suffix in suffixes[family.type]:
                extra = {"le"} if suffix == "_bucket" else set()
                series[family.name + suffix] = labels | extra
    return series


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text("utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_alert_rules_name_real_metrics_and_labels() -> None:
    exported = _exported()
    rules = _rules()
    assert len(rules) >= 5
    for rule in rules:
        assert rule["alert"] and rule["labels"]["severity"] and rule["annotations"]["summary"]
        expr = rule["expr"]
        names = re.findall(r"\b([a-z_][a-z0-9_]*)\s*(?=\{|\[|\)|\s|$|==|>|<)", expr)
        series = [n for n in names if n.startswith("wbsync_") or n in PROMETHEUS_OWN]
        assert series, f"{rule['alert']} names no metric: {expr}"
        for name, selector in re.findall(r"\b(wbsync_[a-z0-9_]+)(\{[^}]*\})?", expr):
            assert name in exported, f"{rule['alert']}: {name} is not exported"
            used = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector))
            assert used <= exported[name] | SCRAPE_LABELS, (rule["alert"], name, used)
        for grouping in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr):
            labels = {label.strip() for label in grouping.split(",")}
            known = set().union(
                *(exported[n] for n, _ in re.findall(r"\b(wbsync_[a-z0-9_]+)()", expr))
            )
            assert labels <= known | SCRAPE_LABELS, (rule["alert"], labels)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not on PATH")
def test_promtool_accepts_the_alert_rules() -> None:
    checked = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_cabinets_wb_refuses_and_tokens_expiring_are_alerted() -> None:
    rules = {rule["alert"]: rule for rule in _rules()}
    expiring = rules["WbsyncTokenExpiringSoon"]["expr"]
    assert "wbsync_cabinet_token_least_remaining_seconds" in expiring
    days = int(re.search(r"<\s*(\d+)\s*\*\s*86400", expiring).group(1))  # type: ignore[union-attr]
    assert 0 < days < EXPIRING_WITHIN_DAYS  # the panel lists the token before the alert fires
    assert 'wbsync_cabinets{state="expired"}' in rules["WbsyncTokensExpired"]["expr"]
    assert 'wbsync_cabinets{state="refused"}' in rules["WbsyncCabinetsRefused"]["expr"]
    assert "wbsync_cabinet_sections_suspended" in rules["WbsyncSectionsSuspended"]["expr"]
