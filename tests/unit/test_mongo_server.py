"""The local MongoDB stand-in's retryable-write records, pruned oldest first
(`devstack.mongo_server`): the same rules as the server's own pruning (a reply kept for its
lifetime, at most the cap, the oldest dropped first), so a driver's retry is still answered
from its record. Pure logic on the server's registry, in this process (milliseconds)."""

from __future__ import annotations

import pytest
from secantus import transactions
from secantus.transactions import TransactionRegistry

from devstack.mongo_server import _kept_in_order, prune_oldest_first

SESSION = b"session-1"
REPLY = {"ok": 1.0, "n": 1}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> TransactionRegistry:
    monkeypatch.setattr(
        TransactionRegistry, "__init__", _kept_in_order(TransactionRegistry.__init__)
    )
    monkeypatch.setattr(TransactionRegistry, "_prune_retryable_locked", prune_oldest_first)
    monkeypatch.setattr(transactions, "_RETRYABLE_RECORD_MAX", 5)
    return TransactionRegistry(time_func=clock)


def _record(registry: TransactionRegistry, number: int) -> None:
    registry.record_retryable(SESSION, number, b"write", dict(REPLY))


def _answered(registry: TransactionRegistry, number: int) -> bool:
    return bool(registry.retryable_reply(SESSION, number, b"write") == REPLY)


def test_a_retry_within_the_lifetime_is_answered_from_its_record(
    registry: TransactionRegistry, clock: Clock
) -> None:
    _record(registry, 1)
    clock.now += transactions._RETRYABLE_RECORD_LIFETIME_SECONDS - 1
    assert _answered(registry, 1)
    # The same key for another write is not answered with this one's reply.
    assert registry.retryable_reply(SESSION, 1, b"another write") is None


def test_records_past_their_lifetime_are_dropped_and_younger_ones_kept(
    registry: TransactionRegistry, clock: Clock
) -> None:
    _record(registry, 1)
    _record(registry, 2)
    clock.now += 60
    _record(registry, 3)
    clock.now += transactions._RETRYABLE_RECORD_LIFETIME_SECONDS - 30
    assert not _answered(registry, 1)
    assert not _answered(registry, 2)
    assert _answered(registry, 3)


def test_past_the_cap_the_oldest_records_go_first(registry: TransactionRegistry) -> None:
    for number in range(1, 9):
        _record(registry, number)
    assert [n for n in range(1, 9) if _answered(registry, n)] == [4, 5, 6, 7, 8]
