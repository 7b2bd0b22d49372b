"""Which finished version of a source goes live (`schemas.rules.goes_live`). Pure, instant."""

from __future__ import annotations

from schemas.rules import goes_live


def test_the_first_version_of_a_source_goes_live() -> None:
    assert goes_live(1, None)


def test_a_newer_version_goes_live_and_an_older_one_finishing_late_does_not() -> None:
    assert goes_live(3, 2)
    assert not goes_live(2, 3)


def test_the_live_version_finishing_again_stays_live() -> None:
    assert goes_live(3, 3)
