"""Deployment assets, checked by reading them (no Docker engine here).

The Grafana dashboard only queries metrics app/metrics/ defines and its PromQL parses
(promtool); the Prometheus config is valid; docker-compose.yml and the Dockerfile have the
services, commands, users and health checks the deployment guide promises.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app import metrics
from app.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "graphkeep.json"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
RATE = "$__rate_interval"  # Grafana's variable; any duration for a syntax check
METRIC_NAME = re.compile(r"\bgraphkeep_[a-z0-9_]+")


def promtool() -> str:
    """promtool's path; skips locally without it, fails in CI (scripts/test installs it)."""
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is required in CI; scripts/test installs Debian's prometheus")
        pytest.skip("promtool not installed")
    return path


def _exprs() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def test_dashboard_queries_only_defined_metrics() -> None:
    exprs = _exprs()
    assert exprs
    used = {name for expr in exprs for name in METRIC_NAME.findall(expr)}
    unknown = used - metrics.exposed_names()
    assert not unknown, f"dashboard queries metrics app/metrics/ does not define: {unknown}"


def test_dashboard_covers_the_operational_questions() -> None:
    joined = "\n".join(_exprs())
    for needed in (
        "graphkeep_http_requests_total",  # throughput
        "graphkeep_http_request_duration_seconds_bucket",  # latency
        "graphkeep_run_queue_depth",  # queue
        "graphkeep_run_queue_wait_seconds_bucket",
        "graphkeep_runs_finished_total{status=~",  # failures
        "graphkeep_run_resume_failures_total",
        "graphkeep_runs_recovered_total",
        "graphkeep_checkpoint_size_bytes_bucket",  # checkpoint size
        "graphkeep_store_operation_duration_seconds_bucket",  # store latency
        "graphkeep_thread_history_length_bucket",
    ):
        assert needed in joined, needed
    board = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


def test_dashboard_promql_parses(tmp_path: Path) -> None:
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {
                        "record": f"graphkeep:dashboard_{i}",
                        "expr": e.replace("$__rate_interval", "5m"),
                    }
                    for i, e in enumerate(_exprs())
                ],
            }
        ]
    }
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, timeout=60
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()


def test_prometheus_scrapes_api_and_workers() -> None:
    config = yaml.safe_load(PROMETHEUS.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    services = _compose()["services"]
    worker_port = services["worker"]["environment"]["GRAPHKEEP_WORKER_METRICS_PORT"]
    api_sd = jobs["graphkeep-api"]["dns_sd_configs"][0]
    worker_sd = jobs["graphkeep-worker"]["dns_sd_configs"][0]
    assert (api_sd["names"], api_sd["port"]) == (["api"], 8123)
    assert (worker_sd["names"], worker_sd["port"]) == (["worker"], int(worker_port))
    if shutil.which("promtool") or os.environ.get("CI") == "true":
        proc = subprocess.run(
            [promtool(), "check", "config", str(PROMETHEUS)], capture_output=True, timeout=60
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()


def test_compose_services_commands_and_health() -> None:
    services = _compose()["services"]
    assert {"postgres", "migrate", "api", "worker", "prometheus", "grafana"} <= set(services)

    pg = services["postgres"]
    assert pg["image"].startswith("pgvector/pgvector:pg")
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])

    migrate = services["migrate"]
    assert migrate["command"] == ["graphkeep", "migrate"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"

    api, worker = services["api"], services["worker"]
    assert api["command"][:2] == ["graphkeep", "serve"]
    assert "--host" in api["command"] and "0.0.0.0" in api["command"]
    assert api["environment"]["GRAPHKEEP_WORKERS"] == "0"
    assert "/ready" in " ".join(api["healthcheck"]["test"])
    assert worker["command"] == ["graphkeep", "worker"]
    assert int(worker["environment"]["GRAPHKEEP_WORKERS"]) >= 1
    for svc in (api, worker):
        assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert svc["environment"]["GRAPHKEEP_DATABASE_URL"].startswith("postgresql://")
        assert "@postgres:5432/" in svc["environment"]["GRAPHKEEP_DATABASE_URL"]
        # SIGTERM grace longer than the drain timeout
        grace = int(svc["stop_grace_period"].rstrip("s"))
        assert grace > Settings().drain_timeout_seconds

    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"]
        for volume in services[name]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"


def test_compose_sets_only_real_settings() -> None:
    fields = {f"GRAPHKEEP_{name}".upper() for name in Settings.model_fields}
    for name, service in _compose()["services"].items():
        env = service.get("environment") or {}
        unknown = {k for k in env if k.startswith("GRAPHKEEP_")} - fields
        assert not unknown, f"service {name} sets unknown settings {unknown}"


def _stages(text: str) -> list[list[str]]:
    stages: list[list[str]] = []
    logical = re.sub(r"\\\n\s*", " ", text)
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_dockerfile_is_multi_stage_non_root_with_healthcheck() -> None:
    stages = _stages(DOCKERFILE.read_text())
    assert len(stages) >= 2
    runtime = stages[-1]
    assert runtime[0].endswith("AS runtime")
    users = [ln.split()[1] for ln in runtime if ln.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    health = next(ln for ln in runtime if ln.startswith("HEALTHCHECK"))
    assert "/ok" in health
    cmd = next(ln for ln in runtime if ln.startswith("CMD "))
    assert json.loads(cmd.removeprefix("CMD ")) == ["graphkeep", "serve", "--host", "0.0.0.0"]
    # the runtime copies the built virtualenv, not the source tree
    assert any(ln.startswith("COPY --from=builder") for ln in runtime)
    for line in (ln for stage in stages for ln in stage if ln.startswith("COPY ")):
        parts = line.split()
        if parts[1].startswith("--from"):
            continue
        for source in parts[1:-1]:
            assert (ROOT / source).exists(), f"Dockerfile copies missing {source}"


def test_alert_rules_use_defined_metrics_and_parse() -> None:
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    assert len(rules) >= 5
    used = {name for rule in rules for name in METRIC_NAME.findall(rule["expr"])}
    assert used and not used - metrics.exposed_names(), used - metrics.exposed_names()
    assert "alerts.yml" in yaml.safe_load(PROMETHEUS.read_text())["rule_files"]
    if shutil.which("promtool") or os.environ.get("CI") == "true":
        proc = subprocess.run(
            [promtool(), "check", "rules", str(ALERTS)], capture_output=True, timeout=60
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()


def test_dockerfile_installs_the_built_wheel_at_the_tested_pins() -> None:
    builder = _stages(DOCKERFILE.read_text())[0]
    runs = [ln for ln in builder if ln.startswith("RUN ")]
    installs = [
        part.strip()
        for ln in runs
        for part in ln.removeprefix("RUN ").split("&&")
        if part.strip().startswith("pip install")
    ]
    assert installs
    for command in installs:  # every install at the pins CI passed with
        assert "-c constraints.txt" in command, command
        assert " -e " not in command and not command.endswith(" ."), command
    assert any("pip wheel --no-deps" in ln for ln in runs)
    assert any(c.split()[-1].endswith(".whl") for c in installs)
    # the installed package migrates from its packaged copy of the scripts at build time
    assert any("graphkeep migrate" in ln for ln in runs)
    copied = [ln.split()[1:-1] for ln in builder if ln.startswith("COPY ")]
    assert any("constraints.txt" in sources for sources in copied)


def test_compose_requires_a_postgres_password() -> None:
    text = COMPOSE.read_text()
    assert "POSTGRES_PASSWORD:-" not in text  # no silent default password
    services = _compose()["services"]
    required = "${POSTGRES_PASSWORD:?"
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(required)
    for name in ("migrate", "api", "worker"):
        assert required in services[name]["environment"]["GRAPHKEEP_DATABASE_URL"], name
