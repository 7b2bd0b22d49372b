"""The real engines in containers, for the tests where a Docker engine is reachable
(`make test-containers`): Kafka (KRaft), a one-node MongoDB replica set, Redis and Qdrant,
started with testcontainers and offered to the tests exactly as `LocalServices` offers the
stand-ins (the same fixtures, the same settings).

`python -m devstack.containers` says whether an engine is reachable and exits non-zero when
none is, so the make target never pretends to have run the suite.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

KAFKA_IMAGE = "apache/kafka:4.1.0"
MONGO_IMAGE = "mongo:8.0"
REDIS_IMAGE = "redis:7.4"
QDRANT_IMAGE = "qdrant/qdrant:v1.15.5"


def docker_problem() -> str | None:
    """Why no Docker engine can be used here (None: one answers)."""
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],  # noqa: S607 - the docker CLI on PATH
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except FileNotFoundError:
        return "the docker command is not installed"
    except subprocess.TimeoutExpired:
        return "the Docker engine did not answer within 20 s"
    if done.returncode != 0:
        return f"no Docker engine answers: {done.stderr.strip() or done.stdout.strip()}"
    return None


class ContainerServices:
    """Kafka, MongoDB, Redis and Qdrant in containers, shaped like `LocalServices`."""

    def __init__(self) -> None:
        self._containers: list[Any] = []
        self.kafka_bootstrap = ""
        self.mongo_url = ""
        self.redis_url = ""
        self.qdrant_url = ""

    def __enter__(self) -> ContainerServices:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        """Starts the four engines and waits until each answers."""
        from testcontainers.community.kafka import KafkaContainer
        from testcontainers.community.qdrant import QdrantContainer
        from testcontainers.community.redis import RedisContainer
        from testcontainers.core.container import DockerContainer

        try:
            kafka = KafkaContainer(KAFKA_IMAGE).with_kraft()
            self._start(kafka)
            self.kafka_bootstrap = kafka.get_bootstrap_server()
            mongo = (
                DockerContainer(MONGO_IMAGE)
                .with_command("--replSet rs0 --bind_ip_all")
                .with_exposed_ports(27017)
            )
            self._start(mongo)
            self._initiate_replica_set(mongo)
            host = mongo.get_container_host_ip()
            port = mongo.get_exposed_port(27017)
            self.mongo_url = f"mongodb://{host}:{port}/?directConnection=true"
            redis = RedisContainer(REDIS_IMAGE)
            self._start(redis)
            self.redis_url = (
                f"redis://{redis.get_container_host_ip()}:{redis.get_exposed_port(6379)}/0"
            )
            qdrant = QdrantContainer(QDRANT_IMAGE)
            self._start(qdrant)
            self.qdrant_url = f"http://{qdrant.rest_host_address}"
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Removes the containers, newest first."""
        for container in reversed(self._containers):
            container.stop()
        self._containers.clear()

    def env(self) -> dict[str, str]:
        """Settings (as environment variables) pointing Ragline at these engines."""
        return {
            "RAGLINE_KAFKA__BOOTSTRAP_SERVERS": self.kafka_bootstrap,
            "RAGLINE_MONGO__URL": self.mongo_url,
            "RAGLINE_REDIS__URL": self.redis_url,
            "RAGLINE_QDRANT__URL": self.qdrant_url,
            "RAGLINE_KAFKA__SESSION_TIMEOUT_MS": "6000",
            "RAGLINE_KAFKA__HEARTBEAT_INTERVAL_MS": "2000",
            "RAGLINE_KAFKA__FETCH_MAX_WAIT_MS": "100",
        }

    def _start(self, container: Any) -> None:
        container.start()
        self._containers.append(container)

    @staticmethod
    def _initiate_replica_set(mongo: Any, timeout: float = 60.0) -> None:
        script = (
            "try { rs.status().ok } catch (e) { rs.initiate().ok }; "
            "db.hello().isWritablePrimary ? 'primary' : 'waiting'"
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = mongo.exec(["mongosh", "--quiet", "--eval", script])
            if result.exit_code == 0 and b"primary" in result.output:
                return
            time.sleep(1)
        raise RuntimeError("the MongoDB replica set did not elect a primary in time")


def main() -> int:
    """Exit 0 if a Docker engine answers; else say why and exit 1."""
    problem = docker_problem()
    if problem is None:
        print("Docker engine reachable: the suite runs against Kafka, MongoDB, Redis, Qdrant")
        return 0
    print(
        f"make test-containers cannot run here: {problem}. The tests against the real engines "
        "need a Docker engine; `make test` runs the same suites on the local stand-ins.",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
