"""Checking consumer positions while the group hands partitions elsewhere (pure logic, with a
stand-in consumer: no broker; a few milliseconds).

`rewind_past_the_end` awaits each partition's position in turn; a rebalance may take the
next partitions away meanwhile. Found in the chaos benchmark: the check raised on a partition
no longer assigned ("Partition is not assigned") and the partitions after it went unchecked
until the next round.
"""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition
from aiokafka.errors import IllegalStateError

from workers.hosting import rewind_past_the_end

TOPIC = "documents.uploaded.v1"


class RebalancedWhileChecked:
    """A consumer that holds partitions 0-2, every position past the end the broker gives,
    and loses `lost` to a rebalance while the first position is read."""

    def __init__(self, lost: set[int]) -> None:
        self.assigned = {TopicPartition(TOPIC, n) for n in range(3)}
        self.lost = {TopicPartition(TOPIC, n) for n in lost}
        self.rewound: list[int] = []

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    def highwater(self, tp: TopicPartition) -> int:
        assert tp in self.assigned, "Partition is not assigned"  # as aiokafka's does
        return 0

    async def position(self, tp: TopicPartition) -> int:
        await asyncio.sleep(0)
        self.assigned -= self.lost
        return 5

    async def seek_to_beginning(self, tp: TopicPartition) -> None:
        if tp not in self.assigned:
            raise IllegalStateError(f"Partitions {{{tp}}} are not assigned")
        self.rewound.append(tp.partition)


def test_partitions_handed_elsewhere_mid_check_are_skipped_and_the_rest_rewound() -> None:
    consumer = RebalancedWhileChecked(lost={1})
    rewound = asyncio.run(rewind_past_the_end(consumer, "extract"))
    assert sorted(consumer.rewound) == [0, 2]
    assert rewound == 2


def test_a_partition_lost_between_its_position_and_its_seek_is_skipped() -> None:
    consumer = RebalancedWhileChecked(lost={0, 1, 2})
    assert asyncio.run(rewind_past_the_end(consumer, "extract")) == 0
    assert consumer.rewound == []
