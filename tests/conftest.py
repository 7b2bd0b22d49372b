"""Shared fixtures: real local servers for the session, isolated names per test."""

from __future__ import annotations

import contextlib
import os
import secrets
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from pymongo import AsyncMongoClient, monitoring

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from devstack.launcher import LocalServices, Pipeline, free_port, pipeline_env
from infra.embedding.base import Embedder
from infra.mongo.client import Database, connect
from infra.mongo.indexes import ensure_indexes
from infra.settings import Settings
from infra.settings.embedding import EmbeddingSettings
from infra.settings.kafka import KafkaSettings
from infra.settings.mongo import MongoSettings
from infra.settings.redis import RedisSettings
from tests.shared_stacks import (
    ModelModulesTogether,
    SharedStacks,
    check_model_modules,
    put_in_order,
)
from tests.timing import TimeReport

FIXTURES = Path(__file__).parent / "fixtures"


# The longest modules (each half a minute or more of one worker's time in a full run, from the
# time report), longest first. They are collected before every other module, so that `make
# test`'s workers (pytest-xdist, `--dist loadfile`, which hands out whole modules in
# collection order: `tests/shared_stacks.py`) start on them and fill the end with short modules:
# a long module handed out last kept one worker alone for minutes.
LONGEST_MODULES = (
    "tests/e2e/test_benchmarks_run.py",
    "tests/e2e/test_chaos_benchmark_run.py",
    "tests/faults/test_faults.py",
    "tests/faults/test_freezes.py",
    "tests/e2e/test_api_fuzz.py",
    "tests/e2e/test_retrieval_quality.py",
    "tests/integration/test_onnx_encoder.py",
    "tests/e2e/test_exactly_once.py",
    "tests/integration/test_backup_service.py",
    "tests/e2e/test_outbox_and_recovery.py",
    "tests/integration/test_context_providers.py",
    "tests/e2e/test_crawl.py",
    "tests/e2e/test_backup_restore.py",
    "tests/e2e/test_hostile_inputs.py",
    "tests/e2e/test_scale_and_crash.py",
    "tests/e2e/test_memory_checks_run.py",
)


SHARED_STACKS_PLUGIN = "ragline-shared-stacks"


def pytest_configure(config: pytest.Config) -> None:
    """Reports where each run's time goes (`tests/timing.py`) and keeps the shared stacks
    (`tests/shared_stacks.py`)."""
    report = TimeReport(config)
    config.pluginmanager.register(report, "ragline-time-report")
    config.pluginmanager.register(SharedStacks(report), SHARED_STACKS_PLUGIN)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Puts the longest modules first (`LONGEST_MODULES`) and the modules of the packaged model's
    stack together, where the first of them would be (`tests/shared_stacks.py`); the rest keep
    their order."""
    moved = [path for path in LONGEST_MODULES if not (config.rootpath / path).is_file()]
    if moved:
        raise pytest.UsageError(f"LONGEST_MODULES names modules that do not exist: {moved}")
    check_model_modules(items)
    put_in_order(items, LONGEST_MODULES)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with the modules on the packaged model's stack handed out as one."""
    if config.getvalue("dist") != "loadfile":
        return None
    return ModelModulesTogether(config, log)


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class MongoCommands(monitoring.CommandListener):
    """Records what a MongoDB client sends: each command's name, collection and filter."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, object]]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        name = event.command_name
        collection = str(event.command.get(name, ""))
        self.sent.append((name, collection, dict(event.command.get("filter") or {})))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        return None

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        return None


@contextlib.asynccontextmanager
async def counted_database(
    services: LocalServices,
) -> AsyncIterator[tuple[Database, MongoCommands]]:
    """A database of its own with Ragline's indexes, on a client that records the commands
    sent to it once the indexes are made; dropped afterwards."""
    commands = MongoCommands()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        services.mongo_url, tz_aware=True, event_listeners=[commands]
    )
    db = client[unique("counted")]
    try:
        await ensure_indexes(db)
        commands.sent.clear()
        yield db, commands
    finally:
        await client.drop_database(db.name)
        await client.close()


# `make test-containers` sets this: the servers are the real engines in containers.
IN_CONTAINERS = os.environ.get("RAGLINE_TEST_SERVERS") == "containers"


@contextlib.contextmanager
def servers(run_dir: Path) -> Iterator[LocalServices]:
    """Kafka, MongoDB and Redis: the local stand-ins on free ports, or (`make
    test-containers`) the real engines in containers, which the tests use the same way."""
    if IN_CONTAINERS:
        from devstack.containers import ContainerServices

        with ContainerServices() as engines:
            yield engines  # type: ignore[misc]  # the same addresses and env(); no processes
        return
    with LocalServices.on_free_ports(run_dir) as services:
        yield services


@pytest.fixture(scope="session")
def local_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServices]:
    """Kafka, MongoDB and Redis for the whole session."""
    with servers(tmp_path_factory.mktemp("services")) as services:
        yield services


def settings_for(services: LocalServices, **overrides: object) -> Settings:
    """Settings pointing at the session's servers, with a database of the test's own."""
    kafka = {"session_timeout_ms": 6000 if IN_CONTAINERS else 1500, "heartbeat_interval_ms": 500}
    values: dict[str, object] = {
        "local_mode": True,
        "kafka": KafkaSettings(
            bootstrap_servers=services.kafka_bootstrap, fetch_max_wait_ms=20, **kafka
        ),
        "mongo": MongoSettings(url=services.mongo_url, database=unique("test")),
        "redis": RedisSettings(url=services.redis_url),
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
async def db(local_services: LocalServices) -> AsyncIterator[Database]:
    """A fresh MongoDB database, dropped afterwards."""
    settings = settings_for(local_services)
    client = connect(settings.mongo)
    database = client[settings.mongo.database]
    yield database
    await client.drop_database(settings.mongo.database)
    await client.close()


@pytest.fixture(scope="session", autouse=True)
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cache of the local model's ONNX export for the whole run: it is exported once,
    and every embedder and stack the tests start (they inherit the environment) reuses it.
    Parallel workers (pytest-xdist) share it through their common temporary directory: the
    export is written under a lock and renamed into place, so one worker exports and the
    others load it."""
    name = "RAGLINE_EMBEDDING__ONNX_DIR"
    if os.environ.get(name):
        path = Path(os.environ[name])
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        path = tmp_path_factory.getbasetemp().parent / "onnx"
        path.mkdir(exist_ok=True)
    else:
        path = tmp_path_factory.mktemp("onnx")
    with mock.patch.dict(os.environ, {name: str(path)}):
        yield path


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The local embedding model, loaded once for the session."""
    from infra.embedding.local import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(EmbeddingSettings())


class RunningPipeline:
    """A whole Ragline stack (API + stage workers as processes) and its credentials."""

    def __init__(
        self,
        pipeline: Pipeline,
        admin_token: str,
        internal_secret: str,
        services: LocalServices,
    ) -> None:
        self.pipeline = pipeline
        self.services = services
        self.url = pipeline.api_url
        self.admin_token = admin_token
        self.internal_secret = internal_secret
        self.database = pipeline.env["RAGLINE_MONGO__DATABASE"]
        self.mongo_url = pipeline.env["RAGLINE_MONGO__URL"]
        self.run_dir = pipeline.run_dir

    def settings(self) -> Settings:
        """Settings of this stack (to reach its Mongo and Kafka directly)."""
        return settings_for(
            self.services,
            mongo=MongoSettings(url=self.mongo_url, database=self.database),
        )


# The session's shared stacks call a document stalled when nothing has moved for a minute, not
# the 3 s of a module's own stack: many modules load them at once (one publishes 500 records),
# the stand-in MongoDB can then hold every stage for seconds, and a short deadline restarted
# documents queued behind hundreds of others until their restarts ran out (seen in a full run).
# With that patience the relay need not look for stalled documents every second as a module's
# own stack does: it checks at its default pace (each check also asks the broker whether it lost
# its topics, on a connection of its own).
SHARED_STACK = {
    "RAGLINE_INGEST__STALL_AFTER_S": "60",
    "RAGLINE_RELAY__RECONCILE_EVERY_S": "5",
}

# What a stack embeds with when its tests check the pipeline's mechanics, not the model: the
# hashed embedder (`infra/embedding/hashed.py`), which loads nothing and embeds in microseconds.
FAST_EMBEDDER = {"RAGLINE_EMBEDDING__PROVIDER": "hashed"}


def start_pipeline(
    services: LocalServices,
    run_dir: Path,
    extra_env: dict[str, str] | None = None,
    embed_workers: int = 1,
    *,
    real_model: bool,
    store_process: bool = False,
) -> RunningPipeline:
    """Starts the API and stage workers against the session's servers, embedding with the
    packaged model (`real_model`) or the fast hashed embedder; with `store_process`, the
    embedded store is served by a process of its own (so more API processes can be added)."""
    admin_token = secrets.token_urlsafe(16)
    internal_secret = secrets.token_urlsafe(16)
    env = {
        **pipeline_env(services, run_dir, admin_token, internal_secret),
        **({} if real_model else FAST_EMBEDDER),
        "RAGLINE_MONGO__DATABASE": unique("e2e"),
        "RAGLINE_KAFKA__GROUP_PREFIX": unique("g"),
        "RAGLINE_QDRANT__OPTIMIZE_IDLE_S": "2",
        "RAGLINE_INGEST__MAX_UPLOAD_MB": "2",
        # Small parts, so that multi-page documents go through the pipeline in several.
        "RAGLINE_INGEST__EXTRACT_PART_CHARS": "4000",
        "RAGLINE_EMBEDDING__BATCH_SIZE": "8",
        "RAGLINE_INGEST__STALL_AFTER_S": "3",
        "RAGLINE_RELAY__RECONCILE_EVERY_S": "1",
        # A publish Kafka does not acknowledge fails its try soon (and is retried), rather
        # than holding the stage for the default 30 s.
        "RAGLINE_KAFKA__PUBLISH_TIMEOUT_S": "10",
        # The local MongoDB (a Python server) on a loaded two-core machine can take seconds
        # where a real one takes milliseconds: the suite's stacks give a request 20 s. The
        # freeze tests (tests/faults/test_freezes.py) run with the default of 5 s.
        "RAGLINE_API__REQUEST_TIMEOUT_S": "20",
        **(extra_env or {}),
    }
    if store_process:
        env["RAGLINE_QDRANT__STORE_SOCKET"] = str(run_dir / "store.sock")
    pipeline = Pipeline(run_dir, env, api_port=free_port(), embed_workers=embed_workers)
    if store_process:
        pipeline.start_store()
    pipeline.start()
    pipeline.wait_settled(partitions=6)
    return RunningPipeline(pipeline, admin_token, internal_secret, services)


@contextlib.contextmanager
def own_stack(
    tmp: Path,
    extra_env: dict[str, str] | None = None,
    embed_workers: int = 1,
    *,
    real_model: bool = False,
    store_process: bool = False,
) -> Iterator[RunningPipeline]:
    """A stack with servers of its own (for tests that stop it or read its topics), embedding
    with the fast hashed embedder unless the model is part of what its tests check; with
    `store_process`, its store served by a process of its own."""
    with servers(tmp / "services") as services:
        running = start_pipeline(
            services,
            tmp / "run",
            extra_env,
            embed_workers,
            real_model=real_model,
            store_process=store_process,
        )
        try:
            yield running
        finally:
            running.pipeline.stop()


@pytest.fixture(scope="session")
def shared_stacks(
    request: pytest.FixtureRequest, local_services: LocalServices
) -> Iterator[SharedStacks]:
    """The shared stacks of this worker (`tests/shared_stacks.py`); whatever still runs at the
    session's end stops before the servers do."""
    stacks = request.config.pluginmanager.get_plugin(SHARED_STACKS_PLUGIN)
    assert isinstance(stacks, SharedStacks)
    yield stacks
    stacks.stop_all()


@pytest.fixture(scope="module")
def running_pipeline(
    local_services: LocalServices,
    shared_stacks: SharedStacks,
    tmp_path_factory: pytest.TempPathFactory,
) -> RunningPipeline:
    """One whole stack shared by the end-to-end modules whose subject is the model (each uses
    KBs of its own): it embeds with the packaged model. Retrieval quality, evaluations,
    ingest-and-search and the bots' searches run on it, one after the other on one worker
    (`MODEL_MODULES`), and it stops after the last of them."""
    return shared_stacks.running(
        "running_pipeline",
        lambda: start_pipeline(
            local_services, tmp_path_factory.mktemp("pipeline"), SHARED_STACK, real_model=True
        ),
    )


@pytest.fixture(scope="module")
def mechanics_pipeline(
    local_services: LocalServices,
    shared_stacks: SharedStacks,
    tmp_path_factory: pytest.TempPathFactory,
) -> RunningPipeline:
    """One whole stack shared by the end-to-end modules that check mechanics (each uses KBs,
    tenants and tokens of its own): it embeds with the hashed embedder, loading no model. It
    stops once no later test needs it."""
    return shared_stacks.running(
        "mechanics_pipeline",
        lambda: start_pipeline(
            local_services, tmp_path_factory.mktemp("mechanics"), SHARED_STACK, real_model=False
        ),
    )
