"""The chaos soak's fault schedule: a function of its seed, with the spacing, the parts, the
freezes and the overlapping pairs it promises; and which 5xx answers it holds against the
stack (pure logic; milliseconds)."""

from __future__ import annotations

import itertools

from benchmarks.chaos import (
    BOUND_S,
    DEPENDENCY_SETTLE_S,
    FREEZE,
    KILL,
    PARTS,
    TINY,
    Fault,
    ServerError,
    Struck,
    overlapping,
    plan,
    unfair_server_errors,
)

HALF_HOUR = 30 * 60.0


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    first = plan(11, HALF_HOUR, (45, 90), (10, 30), 5)
    assert first == plan(11, HALF_HOUR, (45, 90), (10, 30), 5)
    assert first != plan(12, HALF_HOUR, (45, 90), (10, 30), 5)


def test_faults_come_every_45_to_90_s_and_strike_every_kind_of_part() -> None:
    faults = plan(11, HALF_HOUR, (45, 90), (10, 30), 5)
    # The first of each pair keeps the spacing; its companion comes during it.
    leaders = [f for f in faults if not _companion(f, faults)]
    gaps = [b.at_s - a.at_s for a, b in itertools.pairwise(leaders)]
    assert 19 <= len(leaders) <= 40
    assert all(45 <= gap <= 90 for gap in gaps), gaps
    assert all(f.at_s < HALF_HOUR for f in faults)
    assert {f.part for f in faults} <= set(PARTS)
    assert {f.action for f in faults} == {KILL, FREEZE}
    freezes = [f.hold_s for f in faults if f.action == FREEZE]
    assert all(10 <= hold <= 30 for hold in freezes)
    assert all(f.hold_s == 0 for f in faults if f.action == KILL)
    # Over many seeds every part is struck, each way.
    kinds = {f.kind for seed in range(20) for f in plan(seed, HALF_HOUR, (45, 90), (10, 30), 5)}
    assert kinds == {f"{action} {part}" for part in PARTS for action in (KILL, FREEZE)}


def test_at_least_five_faults_begin_while_another_part_is_frozen() -> None:
    for seed in range(10):
        faults = plan(seed, HALF_HOUR, (45, 90), (10, 30), 5)
        pairs = [f for f in faults if _companion(f, faults)]
        assert len(pairs) == 5, seed
        for second in pairs:
            first = _companion(second, faults)
            assert first is not None
            assert first.action == FREEZE
            assert first.part != second.part


def test_overlaps_are_counted_from_what_happened() -> None:
    freeze, kill = Fault(10, "MongoDB", FREEZE, 12), Fault(15, "API", KILL)
    assert overlapping([Struck(freeze, 10, 22), Struck(kill, 15, 19)]) == 1
    assert overlapping([Struck(freeze, 10, 22), Struck(kill, 30, 34)]) == 0
    # A fault still on (no end yet) holds the next one too.
    assert overlapping([Struck(freeze, 10), Struck(kill, 15, 19)]) == 1


def _companion(fault: Fault, faults: list[Fault]) -> Fault | None:
    """The freeze during which a fault began, if it is the second of a pair."""
    return next(
        (
            other
            for other in faults
            if other is not fault
            and other.action == FREEZE
            and other.at_s < fault.at_s < other.at_s + other.hold_s
        ),
        None,
    )


def test_every_part_is_struck_once_before_any_is_struck_twice() -> None:
    for seed in range(10):
        faults = plan(seed, HALF_HOUR, (45, 90), (10, 30), 5)
        first_round = [f.part for f in faults[: len(PARTS)]]
        assert sorted(first_round) == sorted(PARTS), (seed, first_round)


def test_the_tiny_run_strikes_every_part_and_holds_mongodb_past_the_bound() -> None:
    faults = plan(
        11,
        TINY["minutes"] * 60,
        TINY["gap_s"],
        TINY["hold_s"],
        TINY["overlaps"],
        TINY["long_hold_s"],
    )
    assert {f.part for f in faults} == set(PARTS)
    mongodb = next(f for f in faults if f.part == "MongoDB")
    assert mongodb.action == FREEZE
    assert mongodb.hold_s == TINY["long_hold_s"] > BOUND_S
    # Its other freezes stay within the bound.
    assert all(f.hold_s < BOUND_S for f in faults if f is not mongodb)


def test_a_503_with_retry_after_is_fair_only_until_the_api_or_mongodb_has_recovered() -> None:
    struck = [
        Struck(Fault(10, "MongoDB", FREEZE, 10), 10, 20, recovery_s=2.0),
        Struck(Fault(40, "Redis", FREEZE, 10), 40, 50),
        # Recovered (its canary indexed) only 30 s after it was back.
        Struck(Fault(100, "API", KILL), 100, 105, recovery_s=30.0),
    ]

    def error(sent: float, status: int = 503, retry_after: bool = True) -> ServerError:
        return ServerError("search_bot", sent, sent + 1, status, retry_after, "")

    fair = [error(12), error(9.5), error(20 + DEPENDENCY_SETTLE_S - 1), error(133)]
    unfair = [
        error(12, status=500),  # a 500 is never fair
        error(12, retry_after=False),  # nor a 503 that does not say when to retry
        error(42),  # Redis is no dependency: search answers without its cache
        error(20 + DEPENDENCY_SETTLE_S + 1),  # MongoDB long recovered
        error(136),  # the API recovered
    ]
    assert unfair_server_errors(struck, fair + unfair) == unfair
