"""A refusal states the wait its Retry-After header sends."""

from __future__ import annotations

import pytest

from core.errors import RateLimited


@pytest.mark.parametrize(
    ("wait_s", "stated"), [(0.0, 1), (0.2, 1), (1.0, 1), (1.01, 2), (41.5, 42)]
)
def test_a_refusal_says_whole_seconds_rounded_up_and_at_least_one(
    wait_s: float, stated: int
) -> None:
    refusal = RateLimited("searches", wait_s)
    assert refusal.retry_after_s == stated
    assert str(refusal) == f"too many searches; try again in {stated} s"
