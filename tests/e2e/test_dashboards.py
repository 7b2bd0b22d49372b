"""The Grafana dashboard and the Prometheus alerts use only metrics a running stack exposes,
and the rules pass `promtool` (Debian's `prometheus` package, installed by `make test`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import RunningPipeline
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# Debian's prometheus package puts it here (`make test` installs it).
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
METRIC = re.compile(r"\bragline_[a-z0-9_]+")
SUFFIXES = ("_bucket", "_sum", "_count")
# Series every working stack has after one upload and one search (the others appear with
# their events: a stalled document, a dead letter, a Redis error).
ALWAYS_SAMPLED = {
    "ragline_documents_processed_total",
    "ragline_stage_messages_total",
    "ragline_chunks_embedded_total",
    "ragline_search_latency_seconds",
    "ragline_search_requests_total",
    "ragline_search_cache_total",
    "ragline_tenant_requests_total",
    "ragline_uploads_total",
    "ragline_consumer_lag_messages",
}


def _dashboard_metrics() -> set[str]:
    dashboard = json.loads((DEPLOY / "grafana" / "ragline.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(dashboard["panels"]) >= 10
    return {name for expr in exprs for name in METRIC.findall(expr)}


def _alert_metrics() -> set[str]:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    return {name for expr in exprs for name in METRIC.findall(expr)}


def _base(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def _exposition(stack: RunningPipeline) -> str:
    urls = [f"{stack.url}/metrics"] + [
        f"http://127.0.0.1:{proc.env['RAGLINE_METRICS_PORT']}/metrics"
        for proc in stack.pipeline.processes
        if proc.name != "api"
    ]
    return "\n".join(httpx.get(url, timeout=10).text for url in urls)


async def test_every_metric_a_panel_or_rule_uses_is_exposed(
    api: Api, stack: RunningPipeline
) -> None:
    kb = await api.create_kb("Metrics")
    document = await api.upload(kb["id"], "pumps.txt", b"Pump P-7 is serviced every spring.")
    await api.wait_final(kb["id"], document["id"])
    bot = await api.http.post(
        "/api/v1/bots",
        json={"name": "m", "knowledge": {"enabled": True, "kb_ids": [kb["id"]]}},
        headers=api.auth,
    )
    for _ in range(2):  # the second answer comes from the cache
        answer = await api.http.post(
            "/api/v1/internal/knowledge/search",
            json={"bot_id": bot.json()["id"], "session_id": "s", "query": "When is P-7 serviced?"},
            headers={"X-Internal-Secret": stack.internal_secret},
        )
        assert answer.status_code == 200
    text = _exposition(stack)
    exposed = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    sampled = {_base(m.group(0)) for m in re.finditer(r"^ragline_[a-z0-9_]+", text, re.M)}
    used = _dashboard_metrics() | _alert_metrics()
    missing = sorted(name for name in used if _base(name) not in exposed)
    assert missing == [], f"used by a panel or rule but exposed by no process: {missing}"
    assert ALWAYS_SAMPLED - sampled == set()
    assert {_base(n) for n in used} >= ALWAYS_SAMPLED - {"ragline_chunks_embedded_total"}


def test_the_alert_rules_pass_promtool() -> None:
    checked = subprocess.run(
        [PROMTOOL, "check", "rules", str(DEPLOY / "prometheus" / "alerts.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [PROMTOOL, "test", "rules", str(DEPLOY / "prometheus" / "alerts_test.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
