"""The soak's level growth: a swing within a bound reads level, a climb does not (pure logic;
instant)."""

from __future__ import annotations

from benchmarks.levels import level_growth
from benchmarks.results import with_derived


def test_a_bounded_swing_reads_level_wherever_the_hour_begins_and_ends() -> None:
    # Two minutes of warm-up, then 30 measured: a 32 MB saw on a steady 430 MB, starting just
    # after a drop and ending at a peak (end against start would read +7%).
    saw = [430 + (minute % 10) * 3.2 for minute in range(30)]
    series = {"api": [400.0, 420.0, *saw]}
    assert saw[-1] / saw[0] - 1 > 0.06
    assert level_growth(series, warmup=2, minutes=30) == {"api": 0.0}


def test_a_climb_reads_as_growth_and_short_or_empty_series_are_left_out() -> None:
    climb = [100.0 + minute for minute in range(30)]
    # Median of minutes 0-9 is 104.5, of minutes 20-29 124.5.
    assert level_growth({"worker": climb}, warmup=0, minutes=30) == {"worker": 19.1}
    assert level_growth({"worker": climb[:15], "idle": [0.0] * 30}, warmup=0, minutes=30) == {}


def test_a_soak_published_without_level_figures_gets_them_from_its_own_series() -> None:
    figures = {
        "warmup_minutes": 0,
        "minutes": 30.0,
        "rss_mb_per_minute": {"api": [100.0 + minute for minute in range(30)]},
        "private_mb_per_minute": {"api": [50.0] * 30},
    }
    derived = with_derived("soak-plateau", figures)
    assert derived["rss_level_growth_pct"] == {"api": 19.1}
    assert derived["private_level_growth_pct"] == {"api": 0.0}
    # Figures the run printed itself are kept; other benchmarks are left as they are.
    kept = with_derived("soak", {**figures, "private_level_growth_pct": {"api": 1.0}})
    assert kept["private_level_growth_pct"] == {"api": 1.0}
    assert "rss_level_growth_pct" not in with_derived("chaos", figures)
