"""A process starting while MongoDB does not answer waits the outage out, within its patience,
rather than exiting (its supervisor's next start would make the outage longer); any other
error, or an outage longer than its patience, still ends the start (pure logic; about 0.1 s)."""

from __future__ import annotations

import pytest

from core.errors import PermanentError, ServiceUnavailable
from ragline.process import through_outages


class _Flaky:
    """Unavailable for its first `failures` tries, then `done`."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or ServiceUnavailable("mongodb", "no answer")
        self.tries = 0

    async def __call__(self) -> str:
        self.tries += 1
        if self.tries <= self.failures:
            raise self.error
        return "done"


async def test_a_start_during_an_outage_waits_it_out() -> None:
    attempt = _Flaky(failures=3)
    assert await through_outages(attempt, "api", patience_s=5.0, pause_s=0.01) == "done"
    assert attempt.tries == 4


async def test_an_outage_longer_than_the_patience_ends_the_start() -> None:
    attempt = _Flaky(failures=1_000)
    with pytest.raises(ServiceUnavailable):
        await through_outages(attempt, "api", patience_s=0.05, pause_s=0.01)
    assert 2 <= attempt.tries < 1_000


async def test_an_error_that_is_not_an_outage_ends_the_start_at_once() -> None:
    attempt = _Flaky(failures=5, error=PermanentError("bad settings"))
    with pytest.raises(PermanentError):
        await through_outages(attempt, "api", patience_s=5.0, pause_s=0.01)
    assert attempt.tries == 1
