"""The deployment bundles (deploy/compose.yaml, deploy/k8s/) set only real settings, start only
processes that exist, and autoscale each stage on its own consumer group and topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from infra.settings import Settings
from schemas.topics import STAGE_INPUTS
from tests.modules import assert_runs_as_module
from workers.__main__ import WORKERS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _documents() -> list[tuple[str, Any]]:
    found = [("compose.yaml", yaml.safe_load((DEPLOY / "compose.yaml").read_text()))]
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        found += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _variables() -> set[str]:
    """Every RAGLINE_* variable the bundles set (maps of variables, and `env` lists)."""
    names: set[str] = set()
    for _, document in _documents():
        for node in _walk(document):
            if isinstance(node, dict):
                names |= {k for k in node if isinstance(k, str) and k.startswith("RAGLINE_")}
                name = node.get("name")
                if isinstance(name, str) and name.startswith("RAGLINE_") and "value" in node:
                    names.add(name)
    return names


def _is_setting(variable: str) -> bool:
    """Whether RAGLINE_A__B names a field `a.b` of `Settings`."""
    model: type[BaseModel] = Settings
    parts = variable.removeprefix("RAGLINE_").lower().split("__")
    for depth, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        annotation = field.annotation
        last = depth == len(parts) - 1
        if last:
            return True
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return False
        model = annotation
    return False


def _commands() -> set[tuple[str, ...]]:
    """Every `python -m <module> [arguments]` the bundles start, without `python -m`."""
    commands = set()
    for _, document in _documents():
        for node in _walk(document):
            if isinstance(node, list) and node[:2] == ["python", "-m"]:
                commands.add(tuple(node[2:]))
    return commands


def test_every_variable_set_is_a_setting() -> None:
    variables = _variables()
    assert len(variables) >= 15
    assert sorted(v for v in variables if not _is_setting(v)) == []


@pytest.mark.parametrize(
    "variable", ["RAGLINE_KAFKA__NOPE", "RAGLINE_NOPE", "RAGLINE_LOG_LEVEL__X"]
)
def test_the_check_catches_a_misspelt_variable(variable: str) -> None:
    assert not _is_setting(variable)


def test_every_process_started_exists() -> None:
    commands = _commands()
    assert commands >= {("ragline.api",), ("workers", "relay")} | {
        ("workers", stage) for stage in STAGE_INPUTS
    }
    for module, *arguments in commands:
        assert_runs_as_module(module)
        if module == "workers":
            assert len(arguments) == 1, arguments
            assert arguments[0] in WORKERS, arguments


def test_each_stage_scales_on_its_own_consumer_group_and_topic() -> None:
    settings = Settings()
    triggers = {
        doc["metadata"]["name"].removeprefix("ragline-"): doc["spec"]["triggers"][0]["metadata"]
        for name, doc in _documents()
        if name == "keda.yaml"
    }
    assert set(triggers) == set(STAGE_INPUTS)
    for stage, trigger in triggers.items():
        assert trigger["consumerGroup"] == f"{settings.kafka.group_prefix}.{stage}"
        assert trigger["topic"] == STAGE_INPUTS[stage]
    deployments = {
        doc["metadata"]["name"]
        for name, doc in _documents()
        if name != "compose.yaml" and doc.get("kind") == "Deployment"
    }
    assert {f"ragline-{stage}" for stage in triggers} <= deployments


def test_compose_runs_every_process_on_the_real_engines() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"kafka", "mongo", "qdrant", "redis", "prometheus", "grafana"} <= set(services)
    assert "--replSet" in services["mongo"]["command"]
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    api_env = services["api"]["environment"]
    assert api_env["RAGLINE_LOCAL_MODE"] == "false"
    assert api_env["RAGLINE_QDRANT__URL"].startswith("http://qdrant")
