"""The operators' how-to pages (`docs/how-to/production-engines.md`,
`rotate-secrets-and-tokens.md`, `kubernetes.md`, `change-embedding-model.md`) name only what
exists: every `RAGLINE_...` variable is a setting, every file and folder is in the
repository, every `python -m`, `make`, `ragline` command and option and every endpoint exists,
and what the Kubernetes page says of `deploy/k8s/` is what the manifests hold (their
resources, names, containers, settings, scaling bounds). No engine is started.

Cost: about 4 s of one core, most of it building the API's OpenAPI schema once (the
endpoints named are checked against it); the rest reads the pages and manifests."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from docs.hooks import benchmark_pages, cli_page, openapi_page, settings_page
from docs.hooks.markdown_tables import table_rows
from tests.modules import assert_runs_as_module
from workers.__main__ import WORKERS

REPO = Path(__file__).resolve().parents[2]
HOW_TO = REPO / "docs" / "how-to"
PAGES = (
    "production-engines.md",
    "rotate-secrets-and-tokens.md",
    "kubernetes.md",
    "change-embedding-model.md",
)
K8S = REPO / "deploy" / "k8s"

# A repository path as the pages write it: a top-level folder of the project, then a file with
# an extension or a folder ending in `/` (`ragline/metrics`, a pod label, is neither).
REPO_PATH = re.compile(
    r"(?<![\w./~-])((?:deploy|infra|tests|ragline|workers|api|services|devstack|schemas|core|cli"
    r"|client|docs)/[\w./-]*?(?:\.(?:py|ya?ml|json|md|toml)|/))(?![\w])"
)
MODULE_RUN = re.compile(r"python3? -m ([\w.]+)((?: [a-z][\w-]*)?)")
MAKE_RUN = re.compile(r"(?<![\w-])make ([a-z][\w-]*)")
LINK = re.compile(r"\]\(([^)#\s]+\.md)(#[\w-]+)?\)")
ENDPOINT = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE)\s+(/api/v1/[\w/{}-]*[\w}])")
# A path called with curl on the pages: after `$API` or `$RAGLINE_URL`.
CALLED = re.compile(r"\$(?:API|RAGLINE_URL)(/[\w/$-]*)")


def page(name: str) -> str:
    """A page's Markdown."""
    return (HOW_TO / name).read_text()


def every_page() -> Iterator[tuple[str, str]]:
    """Each page's name and Markdown."""
    for name in PAGES:
        yield name, page(name)


def code_lines(markdown: str) -> list[str]:
    """The lines of the page's fenced code blocks, continuation lines joined."""
    lines: list[str] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", markdown, re.S):
        lines.extend(block.replace("\\\n", " ").splitlines())
    return lines


def code_text(markdown: str) -> str:
    """The page's code: its fenced blocks and its inline code spans."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", markdown, re.S)
    spans = re.findall(r"`([^`]+)`", re.sub(r"```.*?```", " ", markdown, flags=re.S))
    return "\n".join(blocks + spans)


def manifests() -> list[tuple[str, dict[str, Any]]]:
    """Every resource of `deploy/k8s/`, with the name of its file."""
    return [
        (path.name, doc)
        for path in sorted(K8S.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def deployments() -> dict[str, dict[str, Any]]:
    """The bundle's Deployments by name."""
    return {doc["metadata"]["name"]: doc for _, doc in manifests() if doc["kind"] == "Deployment"}


@pytest.mark.parametrize("name", PAGES)
def test_every_variable_named_is_a_setting(name: str) -> None:
    markdown = page(name)
    assert "RAGLINE_" in markdown
    assert settings_page.unknown_variables(markdown, settings_page.variable_names()) == []
    assert settings_page.table_problems(markdown) == []


def test_the_variable_check_catches_a_misspelt_one() -> None:
    known = settings_page.variable_names()
    assert settings_page.unknown_variables("`RAGLINE_QDRANT__API_KEYS=x`", known) == [
        "RAGLINE_QDRANT__API_KEYS"
    ]


@pytest.mark.parametrize("name", PAGES)
def test_no_figure_with_a_unit_is_typed_by_hand(name: str) -> None:
    markdown = page(name)
    published = benchmark_pages.published_figures(REPO / "docs" / benchmark_pages.RESULTS)
    defaults = benchmark_pages.setting_default_figures()
    assert benchmark_pages.unsourced_figures(markdown, defaults, published) == []


def test_every_repository_path_named_exists() -> None:
    named = {
        (name, path) for name, markdown in every_page() for path in REPO_PATH.findall(markdown)
    }
    assert len(named) >= 15
    assert {"deploy/k8s/", "infra/settings/kafka.py", "tests/unit/test_secrets.py"} <= {
        path for _, path in named
    }
    assert sorted((n, p) for n, p in named if not (REPO / p).exists()) == []


def test_the_path_pattern_skips_labels_and_local_folders() -> None:
    text = "`ragline/metrics: 'true'`, `.ragline/admin_token`, `./ragline-k8s/api.yaml`"
    assert REPO_PATH.findall(text + " and deploy/Dockerfile/") == ["deploy/Dockerfile/"]


def test_every_link_between_pages_leads_to_a_page() -> None:
    for name, markdown in every_page():
        for target, _ in LINK.findall(markdown):
            assert (HOW_TO / target).resolve().is_file(), (name, target)


def test_every_python_module_run_exists() -> None:
    runs = {
        (module, argument.strip())
        for _, markdown in every_page()
        for module, argument in MODULE_RUN.findall(markdown)
    }
    assert {("ragline.api", ""), ("workers", "index"), ("ragline.tokens_cli", "")} <= runs
    for module, argument in runs:
        assert_runs_as_module(module)
        if module == "workers" and argument:  # `python -m workers <stage>` names none
            assert argument in WORKERS, argument


def test_every_worker_of_the_pipeline_is_started_on_the_production_page() -> None:
    started = set(re.findall(r"python -m workers (\w+)", page("production-engines.md")))
    assert started == set(WORKERS)


def test_every_make_target_named_exists() -> None:
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*)(?: [a-z][\w -]*)?:", makefile, re.M))
    named = {
        target for _, markdown in every_page() for target in MAKE_RUN.findall(code_text(markdown))
    }
    assert "run" in named
    assert named <= targets


def test_every_ragline_command_and_option_named_exists() -> None:
    commands = {name: command for name, command, _ in cli_page.commands()}
    used = 0
    for name, markdown in every_page():
        for line in code_lines(markdown):
            if not line.strip().startswith("ragline "):
                continue
            words = shlex.split(line.split(" #", 1)[0])
            depth = max(n for n in range(1, len(words) + 1) if " ".join(words[:n]) in commands)
            command = commands[" ".join(words[:depth])]
            assert depth >= 2, (name, line)
            options = {opt for param in command.params for opt in param.opts}
            for word in words[depth:]:
                if word.startswith("--"):
                    assert word.split("=", 1)[0] in options, (name, line, word)
            used += 1
    assert used >= 10


def test_every_endpoint_named_is_served() -> None:
    schema = openapi_page.served_schema()
    served = {(method.upper(), path) for method, path, _ in openapi_page.operations(schema)} | {
        ("GET", path) for path in ("/readyz", "/healthz", "/metrics")
    }
    named = {
        (method, path)
        for _, markdown in every_page()
        for method, path in ENDPOINT.findall(markdown)
    }
    assert ("DELETE", "/api/v1/tokens/{token_id}") in named
    assert ("POST", "/api/v1/bots/{bot_id}/tokens") in named
    assert sorted(named - served) == []
    for _, markdown in every_page():
        for path in CALLED.findall(markdown):
            generic = re.sub(r"/\$\w+|/tok_\w+|/smoke", "/{x}", path.rstrip("/"))
            assert any(re.sub(r"\{[^}]+\}", "{x}", known) == generic for _, known in served), path


def test_the_bundle_table_lists_the_resources_of_each_file() -> None:
    rows = table_rows(page("kubernetes.md"), "| file | kind | name |")
    listed = {
        (row[0].strip("`").removeprefix("deploy/k8s/"), row[1], name)
        for row in rows
        for name in re.findall(r"`([\w-]+)`", row[2])
    }
    held = {(file, doc["kind"], doc["metadata"]["name"]) for file, doc in manifests()}
    assert listed == held


def test_the_deployment_names_and_containers_of_the_commands_exist() -> None:
    markdown = page("kubernetes.md") + page("rotate-secrets-and-tokens.md")
    found = deployments()
    for name in re.findall(r"deployment/(ragline-[a-z]+)", markdown):
        assert name in found, name
    loop = re.search(r"for name in ([a-z ]+); do", markdown)
    assert loop is not None
    for suffix in loop.group(1).split():
        containers = found[f"ragline-{suffix}"]["spec"]["template"]["spec"]["containers"]
        assert [c["name"] for c in containers] == [suffix]  # `$name=<image>` sets it
    assert set(found) == {f"ragline-{suffix}" for suffix in loop.group(1).split()}


def test_what_the_kubernetes_page_says_of_the_manifests_is_what_they_hold() -> None:
    markdown = " ".join(page("kubernetes.md").split())
    config = next(doc for _, doc in manifests() if doc["kind"] == "ConfigMap")
    raw = (K8S / "config.yaml").read_text()
    for key in config["data"]:
        line = next(ln.strip() for ln in raw.splitlines() if ln.strip().startswith(f"{key}:"))
        assert f"`{line}`" in markdown, line
    for name, doc in deployments().items():
        container = doc["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == "ragline:latest"
        assert {"configMapRef": {"name": "ragline"}} in container["envFrom"]
        assert {"secretRef": {"name": "ragline"}} in container["envFrom"]
        assert doc["spec"]["template"]["metadata"]["labels"] == {
            "app": name,
            "ragline/metrics": "true",
        }
        assert doc["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 60
        probes = {"readinessProbe", "livenessProbe"} & set(container)
        assert probes == ({"readinessProbe", "livenessProbe"} if name == "ragline-api" else set())
    api = deployments()["ragline-api"]["spec"]["template"]["spec"]["containers"][0]
    assert api["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8000}
    assert api["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8000}
    assert api["readinessProbe"]["periodSeconds"] == 5
    assert api["livenessProbe"]["periodSeconds"] == 10
    assert {e["name"]: e["value"] for e in api["env"]} == {
        "RAGLINE_API__HOST": "0.0.0.0",
        "RAGLINE_API__PORT": "8000",
        "RAGLINE_API__MCP_ALLOWED_HOSTS": '["*"]',
    }
    secret = next(doc for _, doc in manifests() if doc["kind"] == "Secret")
    assert set(secret["stringData"]) == {"RAGLINE_ADMIN_TOKEN", "RAGLINE_INTERNAL_SECRET"}
    assert "`<a long random token>` and `<a long random secret>`" in markdown


def test_the_scaling_bounds_the_page_states_are_the_manifests() -> None:
    scaled = {
        doc["metadata"]["name"].removeprefix("ragline-"): doc["spec"]
        for _, doc in manifests()
        if doc["kind"] == "ScaledObject"
    }
    assert {stage: spec["maxReplicaCount"] for stage, spec in scaled.items()} == {
        "records": 4,
        "crawl": 4,
        "chunk": 4,
        "index": 4,
        "extract": 8,
        "embed": 12,
    }
    markdown = " ".join(page("kubernetes.md").split())
    assert (
        "`maxReplicaCount` `4` for records, crawl, chunk and index, `8` for extract and `12` "
        "for embed" in markdown
    )
    for spec in scaled.values():
        trigger = spec["triggers"][0]["metadata"]
        assert (spec["minReplicaCount"], spec["pollingInterval"], spec["cooldownPeriod"]) == (
            1,
            15,
            300,
        )
        assert trigger["lagThreshold"] == "50"
        assert trigger["bootstrapServers"] == "kafka-bootstrap.kafka:9092"
    assert "`bootstrapServers: kafka-bootstrap.kafka:9092`" in markdown
