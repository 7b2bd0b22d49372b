"""Where a search's time goes, step by step, for its answer's `metrics`.

The steps, in the order a search takes them: `access` (who may search what: the bot's access,
the person's readers, the KBs' revisions), `limit` (the rate limit), `cache` (the cached answer
and query vector), `embedding` (the query's vector from the model), `ranking` (the store's
ranking call and fusion), `fetch` (reading the chosen passages), `shaping` (folding copies,
merging neighbours, the answer's body) and `writes` (what the search leaves for the next one:
cached answer and vector, its retrieval event).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from schemas.search import CacheHits, SearchMetrics

STEPS = ("access", "limit", "cache", "embedding", "ranking", "fetch", "shaping", "writes")


class Clock:
    """Times the steps of one search."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._spent = dict.fromkeys(STEPS, 0.0)
        # The vector store's generation the search ranked against (its model embedded the
        # query), once it is chosen.
        self.generation: int | None = None

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Adds the time spent in the block to the step."""
        begun = time.perf_counter()
        try:
            yield
        finally:
            self._spent[name] += time.perf_counter() - begun

    def metrics(self, cache: CacheHits) -> SearchMetrics:
        """The answer's metrics, up to now."""
        spent = {f"{name}_ms": round(seconds * 1000, 3) for name, seconds in self._spent.items()}
        return SearchMetrics(
            **spent,
            vector_search_ms=round((self._spent["ranking"] + self._spent["fetch"]) * 1000, 3),
            total_ms=round((time.perf_counter() - self.started) * 1000, 3),
            cache=cache,
            generation=self.generation,
        )
