"""The memory checks run as their user runs them (`python -m benchmarks.embed_memory`,
`python -m benchmarks.store_churn`), short, and report what they promise. Neither starts a
stack; about 30 s of one worker in all (two processes loading the model, then two churning a
store). A module of its own, so that it runs beside the benchmarks' runs rather than after
them."""

from __future__ import annotations

import pytest

from tests.benchmark_runs import final_figures, run_module

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_the_embed_memory_check_compares_both_capacities() -> None:
    """The document embedder's memory check, three batches per capacity (no stack: two
    processes loading the model, about 25 s)."""
    run = run_module("embed_memory", ["--rounds", "1", "--batches", "3"])
    figures = final_figures("embed_memory", run)
    for capacity in (1024, 0):
        assert figures[f"texts_per_s_cache{capacity}"] > 0, figures
        assert figures[f"in_use_mb_end_cache{capacity}"] > 0, figures


def test_the_store_churn_check_reports_both_modes() -> None:
    """The embedded store churned at a constant number of live documents, optimised and never
    (no stack: two processes, about 3 s)."""
    arguments = "--live 10 --rounds 60 --every 10 --optimize-every 5 --searchers 1"
    run = run_module("store_churn", arguments.split())
    figures = final_figures("store_churn", run)
    for mode in ("optimised", "never"):
        assert figures[f"samples_{mode}"] == 4, figures  # after churns 20: 30, 40, 50, 60
        least, most = figures[f"in_use_mb_band_second_half_{mode}"]
        assert 0 < least <= most, figures
        assert f"private_mb_top_growth_pct_{mode}" in figures, figures
