"""Hosts a stage in a process: its Kafka subscriber, its runner and the watch on its
consumers. The only place that knows FastStream's subscribers; the objects a stage works with
come from the composition root (`ragline.system`)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError
from faststream import AckPolicy, FastStream
from faststream.kafka import KafkaBroker, KafkaMessage
from faststream.kafka.subscriber.usecase import (
    BatchSubscriber,
    ConcurrentBetweenPartitionsSubscriber,
    DefaultSubscriber,
    LogicSubscriber,
)

from core.errors import RetryableError
from core.periodic import Periodic
from infra.kafka.client import build_broker, consumer_options, kafka_dead_letter
from infra.mongo.broker_epoch import BrokerEpoch
from infra.process.metrics import (
    ASSIGNED_PARTITIONS,
    CONSUMER_LAG,
    CONSUMER_REJOINS,
    CONSUMER_REWINDS,
    DEAD_LETTERS,
)
from infra.settings import Settings
from ragline.process import open_process
from ragline.system import System
from schemas.topics import STAGE_INPUTS
from workers.runtime import Stage, StageRunner

log = logging.getLogger(__name__)

# How often a stage's consumers are checked for a new broker epoch and for positions past their
# partitions' ends.
REWIND_CHECK_S = 2.0
# For this many checks (a minute of the process running) after a stage saw the broker begin a new
# life, a partition handed to one of its consumers is read from the start as well: every member
# of the group rejoins after such a restart (within a session timeout of noticing it), and until
# then a member may commit a position from the broker's previous life, which the next owner of
# that partition starts from.
SETTLING_CHECKS = 30
# While settling, a stage none of whose consumers holds a partition at two checks in a row makes
# them join their group again as new members (`rejoin_afresh`), at most this many times a life.
SETTLING_REJOINS = 3


# How long a batch read waits for a first message (and an empty read sleeps again as long):
# the most an idle stage adds to a message's way through it.
BATCH_WAIT_MS = 100


def _records_of(message: KafkaMessage) -> tuple[ConsumerRecord[Any, Any], ...]:
    """The Kafka records a message of a subscriber stands for: one, or a batch."""
    raw = message.raw_message
    return raw if isinstance(raw, tuple) else (raw,)


def _report_lag(stage: str, message: KafkaMessage) -> None:
    consumer = message.consumer
    if not isinstance(consumer, AIOKafkaConsumer):
        return  # a test broker's consumer
    # The high watermark of fetched data; the broker's reported end offsets are not trusted.
    for record in _records_of(message):
        highwater = consumer.highwater(TopicPartition(record.topic, record.partition))
        if highwater is not None:
            lag = max(highwater - record.offset - 1, 0)
            CONSUMER_LAG.labels(stage, str(record.partition)).set(lag)


async def run_by_key(
    records: Sequence[ConsumerRecord[Any, Any]], run: Callable[[bytes], Awaitable[None]]
) -> None:
    """Runs a batch's messages: those of one key (one document, one connector record) one
    after another in the order read, the keys at once, as one consumer per partition would.
    Raises the first error once every key's messages are done or stopped at theirs."""
    lanes: dict[tuple[str, int, bytes | None], list[bytes]] = {}
    for record in records:
        lane_of = (record.topic, record.partition, record.key)
        lanes.setdefault(lane_of, []).append(record.value or b"")

    async def lane(values: list[bytes]) -> None:
        for value in values:
            await run(value)

    outcomes = await asyncio.gather(
        *(lane(values) for values in lanes.values()), return_exceptions=True
    )
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


class AssignmentTracker(ConsumerRebalanceListener):  # type: ignore[misc]
    """Keeps `ragline_assigned_partitions` current through group rebalances, and counts how
    many times each partition was handed to one of the process's consumers (`handed`)."""

    def __init__(self, stage: str) -> None:
        self._stage = stage
        self._owned: set[tuple[str, int]] = set()
        self.handed: Counter[TopicPartition] = Counter()
        ASSIGNED_PARTITIONS.labels(stage).set(0)

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Forgets partitions taken away (all of this process's consumers share this)."""
        self._owned -= {(tp.topic, tp.partition) for tp in revoked}
        ASSIGNED_PARTITIONS.labels(self._stage).set(len(self._owned))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """Counts partitions handed over."""
        self._owned |= {(tp.topic, tp.partition) for tp in assigned}
        self.handed.update(assigned)
        ASSIGNED_PARTITIONS.labels(self._stage).set(len(self._owned))


def _consumers_of(subscriber: LogicSubscriber[Any]) -> list[AIOKafkaConsumer]:
    """The Kafka consumers behind a stage's subscriber: one, or one per worker."""
    if isinstance(subscriber, ConcurrentBetweenPartitionsSubscriber):
        return list(subscriber.consumer_subgroup)
    return [] if subscriber.consumer is None else [subscriber.consumer]


async def rewind_past_the_end(consumer: AIOKafkaConsumer, stage: str) -> int:
    """Reads again from their start the assigned partitions whose position is past the end
    the broker gives in its fetch answers; returns how many.

    A broker that loses its messages in a restart (the local one keeps them in memory) may
    then be sent a commit of a position from before the restart, and it answers fetches
    beyond its end with nothing instead of an out-of-range error, so that partition's new
    messages (the recovery's re-driven events among them) would never be read. Reading a
    partition again is harmless: every stage skips what it has already done.
    """
    rewound = 0
    for tp in consumer.assignment():
        if tp not in consumer.assignment():
            continue  # handed elsewhere while an earlier partition was looked at
        highwater = consumer.highwater(tp)
        if highwater is None:
            continue
        try:
            position = await asyncio.wait_for(consumer.position(tp), 1.0)
        except (TimeoutError, KafkaError, IllegalStateError):
            continue  # rebalancing or reconnecting: looked at again next time
        if position > highwater:
            log.warning(
                "%s: position %d of %s[%d] is past its end (%d): reading it from the start",
                stage, position, tp.topic, tp.partition, highwater,
            )  # fmt: skip
            try:
                await consumer.seek_to_beginning(tp)
            except IllegalStateError:
                continue  # handed elsewhere meanwhile: its new holder reads it from there
            CONSUMER_REWINDS.labels(stage).inc()
            rewound += 1
    return rewound


async def read_from_the_start(
    consumer: AIOKafkaConsumer, stage: str, partitions: set[TopicPartition] | None = None
) -> int:
    """Reads the consumer's assigned partitions (or those of them in `partitions`) again from
    their start; returns how many."""
    assigned = consumer.assignment()
    if partitions is not None:
        assigned &= partitions
    if assigned:
        log.warning(
            "%s: the broker began a new life: reading %d partitions again from the start",
            stage, len(assigned),
        )  # fmt: skip
        await consumer.seek_to_beginning(*assigned)
        CONSUMER_REWINDS.labels(stage).inc(len(assigned))
    return len(assigned)


def _started(consumer: AIOKafkaConsumer) -> bool:
    return consumer._coordinator is not None


async def rejoin_afresh(consumers: list[AIOKafkaConsumer], stage: str) -> bool:
    """Has the consumers join their group again as new members, once each has learnt the
    broker's topics anew.

    Consumers that rejoined their group while a broker that lost its topics had not got them
    back yet were handed no partitions. Kafka hands the topics' partitions out once the group's
    leader notices them at its next metadata refresh (`kafka.metadata_max_age_ms`), and the
    local broker not even then: a rejoining leader does not make it rebalance the group, while
    a new member does, on either. aiokafka has no public call for either step: these are the
    ones it takes itself on finding a topic (`force_metadata_update`) and on unsubscribing
    (`_maybe_leave_group`: leave the group if it holds a generation, then join as a new
    member). False when the topics could not be learnt within a check's time (not rejoined)."""
    try:
        async with asyncio.timeout(REWIND_CHECK_S):
            await asyncio.gather(
                *(consumer._client.force_metadata_update() for consumer in consumers)
            )
    except TimeoutError:
        log.warning("%s: could not learn the broker's topics anew: rejoining later", stage)
        return False
    log.warning(
        "%s: the broker began a new life and no partition came back to this worker: "
        "joining the group again as new members",
        stage,
    )
    for consumer in consumers:
        await consumer._coordinator._maybe_leave_group()
    CONSUMER_REJOINS.labels(stage).inc(len(consumers))
    return True


class _Unread:
    """The epoch could not be read (MongoDB unavailable)."""


UNREAD = _Unread()


class Rewinder:
    """Keeps a stage's consumers reading what the broker holds: from the start of every
    partition when the broker began a new life (`infra.mongo.broker_epoch`) since the last check,
    and from the start of a partition whose position is past its end (`rewind_past_the_end`).

    A new life is seen while the group may still be settling: a consumer may have no partitions
    yet, or hold ones it is about to lose (`assignment()` reports them until the new ones
    arrive), and a member still holding its old ones may commit their positions from the
    previous life, which whoever is handed those partitions next starts from. So for
    `SETTLING_CHECKS` checks a partition handed over again (`AssignmentTracker.handed`) is read
    from the start again; each handing once. And if meanwhile the stage's consumers hold no
    partition at all (they rejoined the group while the broker had no topics yet), they join it
    again as new members (`rejoin_afresh`)."""

    def __init__(
        self, stage: str, epoch: BrokerEpoch, assignments: AssignmentTracker | None = None
    ) -> None:
        self._stage = stage
        self._epoch = epoch
        self._handed: Counter[TopicPartition] = (
            Counter() if assignments is None else assignments.handed
        )
        self._seen: str | _Unread | None = UNREAD
        self._settling = 0
        # Partition -> its handing (count) that was read from the start in this life.
        self._rewound: dict[TopicPartition, int] = {}
        self._rejoins_left = 0
        self._unassigned_checks = 0

    async def _read(self) -> str | _Unread | None:
        try:
            return await self._epoch.current()
        except RetryableError as exc:
            log.warning("%s: could not read the broker's epoch: %s", self._stage, exc)
            return UNREAD

    async def start(self) -> None:
        """Notes the epoch the consumers start in."""
        self._seen = await self._read()

    async def check(self, consumers: list[AIOKafkaConsumer]) -> int:
        """Rewinds what needs it; returns how many partitions were rewound."""
        epoch = await self._read()
        if not isinstance(epoch, _Unread):
            if not isinstance(self._seen, _Unread) and epoch != self._seen:
                self._settling = SETTLING_CHECKS
                self._rewound.clear()
                self._rejoins_left = SETTLING_REJOINS
                self._unassigned_checks = 0
            self._seen = epoch
        rewound = 0
        if self._settling:
            for consumer in consumers:
                rewound += await self._read_handed_from_the_start(consumer)
            await self._rejoin_if_unassigned(consumers)
            self._settling -= 1  # only once every consumer has been rewound (they may raise)
        for consumer in consumers:
            rewound += await rewind_past_the_end(consumer, self._stage)
        return rewound

    async def _rejoin_if_unassigned(self, consumers: list[AIOKafkaConsumer]) -> None:
        """Makes the consumers rejoin their group afresh when none has held a partition at
        this check and the one before (a group settling ordinarily hands them out within a
        check)."""
        started = [consumer for consumer in consumers if _started(consumer)]
        if not started or any(consumer.assignment() for consumer in started):
            self._unassigned_checks = 0
            return
        self._unassigned_checks += 1
        if self._unassigned_checks < 2 or not self._rejoins_left:
            return
        if await rejoin_afresh(started, self._stage):
            self._rejoins_left -= 1
            self._unassigned_checks = 0

    async def _read_handed_from_the_start(self, consumer: AIOKafkaConsumer) -> int:
        """Reads from the start the consumer's partitions not yet read from the start since
        they were last handed to it."""
        due = {
            tp: self._handed[tp]
            for tp in consumer.assignment()
            if self._rewound.get(tp) != self._handed[tp]
        }
        rewound = await read_from_the_start(consumer, self._stage, set(due))
        self._rewound.update(due)
        return rewound


@asynccontextmanager
async def rewinding(
    subscriber: LogicSubscriber[Any],
    stage: str,
    epoch: BrokerEpoch,
    assignments: AssignmentTracker | None = None,
) -> AsyncIterator[None]:
    """Checks the subscriber's consumers every `REWIND_CHECK_S` (`Rewinder`); `assignments`
    is the listener the subscriber's consumers report their partitions to."""
    rewinder = Rewinder(stage, epoch, assignments)
    await rewinder.start()

    async def check() -> None:
        try:
            await rewinder.check(_consumers_of(subscriber))
        except (KafkaError, IllegalStateError) as exc:
            log.warning("%s: could not check consumer positions: %s", stage, exc)

    async with Periodic(f"{stage}: checking consumer positions", REWIND_CHECK_S, check):
        yield


def subscribe_stage(
    broker: KafkaBroker,
    settings: Settings,
    stage: str,
    runner: StageRunner[Any],
    concurrency: int = 1,
    assignments: AssignmentTracker | None = None,
    *,
    batches: bool = False,
) -> LogicSubscriber[Any]:
    """Subscribes the stage's input topic in the stage's consumer group (before `broker`
    starts); returns the subscriber (to watch with `rewinding`, given the same `assignments`).

    With `batches`, the process joins the group with one consumer that reads up to
    `concurrency` messages at a time and works them at once (`run_by_key`); the read is
    committed once all are done. Otherwise, with `concurrency` above 1, it joins with that many
    consumers, each working through its own partitions one message at a time.
    """
    options = consumer_options(settings.kafka, stage)
    # On an error the runner could not even record, rewind so the message (or batch) comes
    # back.
    options["ack_policy"] = AckPolicy.NACK_ON_ERROR
    options["listener"] = AssignmentTracker(stage) if assignments is None else assignments
    if batches:
        options.update(batch=True, max_records=concurrency, batch_timeout_ms=BATCH_WAIT_MS)
    elif concurrency > 1:
        options["max_workers"] = concurrency

    subscriber = broker.subscriber(STAGE_INPUTS[stage], **options)
    if not isinstance(subscriber, BatchSubscriber | DefaultSubscriber):
        raise TypeError(f"{stage}: a {type(subscriber).__name__} cannot host a stage")

    async def consume(message: KafkaMessage) -> None:
        _report_lag(stage, message)
        await run_by_key(_records_of(message), runner.run)

    subscriber(consume)
    return subscriber


def stage_runner(system: System, stage: Stage[Any]) -> StageRunner[Any]:
    """A runner for the stage with Kafka publishing and dead-lettering (kept in MongoDB for
    the dead-letter API, and sent to the stage's dead-letter topic)."""
    to_topic = kafka_dead_letter(system.broker, stage.name, system.settings.kafka.publish_timeout_s)

    async def dead_letter(raw: bytes, headers: dict[str, str]) -> None:
        await system.dead_letter_repo.add(stage.name, raw, headers)
        DEAD_LETTERS.labels(stage.name).inc()
        await to_topic(raw, headers)

    return StageRunner(
        stage, system.document_repo, system.publish, dead_letter, system.settings.ingest
    )


@dataclass(frozen=True)
class StageProcess:
    """A stage as a process hosts it: its name, and how it is built over the process's
    objects (its handler and its policy; how many of its messages one process works at once is
    `stages.<name>.concurrency`)."""

    name: str
    build: Callable[[System], Awaitable[Stage[Any]]]


async def host_stage(system: System, stage: StageProcess, stack: AsyncExitStack) -> None:
    """Builds the stage and subscribes it on the system's broker, which the process starts
    afterwards; its consumers are watched (`rewinding`) for as long as `stack` is open."""
    runner = stage_runner(system, await stage.build(system))
    policy = system.settings.stages.of(stage.name)
    assignments = AssignmentTracker(stage.name)
    subscriber = subscribe_stage(
        system.broker,
        system.settings,
        stage.name,
        runner,
        policy.concurrency,
        assignments,
        batches=policy.batches,
    )
    await stack.enter_async_context(
        rewinding(subscriber, stage.name, system.broker_epoch, assignments)
    )


def stage_app(settings: Settings, stage: StageProcess) -> FastStream:
    """A worker process for one stage; FastStream starts the broker after the lifespan has
    opened the process and subscribed the stage, and stops it on SIGINT or SIGTERM."""
    broker = build_broker(settings.kafka, f"ragline-{stage.name}")

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            system = await open_process(settings, stage.name, stack, broker)
            await host_stage(system, stage, stack)
            log.info("%s worker ready", stage.name)
            yield

    return FastStream(broker, lifespan=lifespan)
