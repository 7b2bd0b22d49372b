"""The internal secret's check, with a rotation in progress."""

from __future__ import annotations

from api.deps import secret_matches


def test_the_current_and_the_previous_secret_are_accepted_during_a_rotation() -> None:
    assert secret_matches("new-secret", ["new-secret", "old-secret"])
    assert secret_matches("old-secret", ["new-secret", "old-secret"])
    assert not secret_matches("other", ["new-secret", "old-secret"])


def test_an_empty_secret_admits_nobody() -> None:
    assert not secret_matches("", ["", ""])
    assert not secret_matches("", ["current", ""])
    assert secret_matches("current", ["current", ""])
