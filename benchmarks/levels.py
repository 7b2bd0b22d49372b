"""Whether a figure sampled every minute levelled off over a soak's measured minutes (pure)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

# Minutes at each end of the measured hour whose medians `level_growth` compares.
LEVEL_MINUTES = 10


def level_growth(
    series: Mapping[str, Sequence[float]], warmup: int, minutes: int, span: int = LEVEL_MINUTES
) -> dict[str, float]:
    """Per process, how much its level grew over the measured minutes, in percent: the median
    of their last `span` minutes over the median of their first `span` (`series`: a figure
    every minute from the start, the warm-up's included). Unlike the end against the start, a
    figure that swings within a bound (the store's write-ahead log fills its 32 MB segment and
    leaves memory at each rotation) reads as level wherever in the swing the hour begins and
    ends."""
    growth = {}
    for name, values in series.items():
        measured = list(values[warmup : warmup + minutes])
        if len(measured) < 2 * span:
            continue
        first = statistics.median(measured[:span])
        last = statistics.median(measured[-span:])
        if first > 0:
            growth[name] = round((last - first) / first * 100, 1)
    return growth
