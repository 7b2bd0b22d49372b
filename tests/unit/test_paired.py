"""The quality benchmark's statistics (`benchmarks.paired`): an interval that holds the mean,
and a paired test that calls a real difference significant and noise not. Pure numpy, well
under a second."""

from __future__ import annotations

import random

import pytest

from core.paired import bootstrap_interval, compare


def test_the_interval_holds_the_mean_and_narrows_with_more_questions() -> None:
    rng = random.Random(1)
    few = [float(rng.random() < 0.7) for _ in range(40)]
    many = [float(rng.random() < 0.7) for _ in range(1600)]
    low, high = bootstrap_interval(few)
    assert low <= sum(few) / len(few) <= high
    many_low, many_high = bootstrap_interval(many)
    assert many_high - many_low < (high - low) / 3
    assert bootstrap_interval(few) == (low, high)  # the same scores, the same figures


def test_a_mode_better_on_many_questions_is_significantly_better() -> None:
    questions = [f"q{i}" for i in range(200)]
    b = {q: float(i % 2) for i, q in enumerate(questions)}
    # a answers every question b answers, and 30 more.
    a = dict(b)
    for q in questions[:60]:
        a[q] = 1.0
    paired = compare(a, b)
    assert (paired.wins, paired.losses, paired.ties) == (30, 0, 170)
    assert paired.difference == pytest.approx(30 / 200)
    assert paired.interval[0] > 0
    assert paired.significant


def test_wins_and_losses_that_cancel_are_not_significant() -> None:
    questions = [f"q{i}" for i in range(200)]
    b = {q: float(i % 2) for i, q in enumerate(questions)}
    a = {q: 1.0 - v if i < 20 else v for i, (q, v) in enumerate(b.items())}
    paired = compare(a, b)
    assert (paired.wins, paired.losses) == (10, 10)
    assert paired.difference == 0
    assert not paired.significant
    assert paired.interval[0] < 0 < paired.interval[1]


def test_one_question_out_of_eighty_three_is_no_finding() -> None:
    questions = [f"q{i}" for i in range(83)]
    b = {q: float(i % 3 != 0) for i, q in enumerate(questions)}
    a = dict(b)
    a["q0"] = 1.0
    paired = compare(a, b)
    assert (paired.wins, paired.losses) == (1, 0)
    assert not paired.significant


def test_the_modes_must_have_been_asked_the_same_questions() -> None:
    with pytest.raises(ValueError, match="same questions"):
        compare({"q1": 1.0}, {"q2": 1.0})
