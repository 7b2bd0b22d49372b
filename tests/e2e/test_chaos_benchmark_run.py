"""The chaos soak runs at its tiny size, as its docstring says (`python -m benchmarks.chaos
--tiny`, a stack of its own, every part killed or frozen once while uploads, deletes and
searches go on), and loses, doubles and leaks nothing.

Alone, about 110 s of one worker and 30 CPU-s: most of it waits for faults, recoveries and
the pipeline to drain. A module of its own, so that it runs beside the other benchmarks' runs
(`test_benchmarks_run.py`), not after them.
"""

from __future__ import annotations

import pytest

from benchmarks.chaos import BOUND_S, DATA_PROBLEMS, PARTS, TINY
from tests.benchmark_runs import last_json, run_module

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

CHAOS_KEYS = {
    "faults_injected",
    "overlaps",
    "lost_documents",
    "stuck_documents",
    "indexed_twice",
    "deleted_documents_returned",
    "replaced_versions_returned",
    "search_availability",
    "search_availability_any_answer",
    "server_errors",
    "events",
    "parts_struck",
    "longest_freeze_s",
    "search_p95_ms_during_faults",
    "search_p95_ms_outside_faults",
    "recovery_s",
    "kb_counts_match",
    "timeline",
}


def test_the_chaos_soak_loses_nothing_while_parts_are_killed_and_frozen() -> None:
    figures = last_json("chaos", run_module("chaos", ["--tiny"]))
    assert set(figures) >= CHAOS_KEYS, sorted(CHAOS_KEYS - set(figures))
    # Faults were injected, killed and frozen, one while another was on: every part was
    # struck (the API, the embed worker and Redis among them), and MongoDB frozen for longer
    # than the request bound.
    kinds = figures["faults_injected"]
    assert sum(kinds.values()) >= len(PARTS), kinds
    assert {kind.split(" ", 1)[0] for kind in kinds} == {"kill", "freeze"}, kinds
    assert set(figures["parts_struck"]) == set(PARTS), figures["parts_struck"]
    assert figures["longest_freeze_s"] > BOUND_S, kinds
    assert "freeze MongoDB" in kinds, kinds
    assert figures["overlaps"] >= 1, figures["timeline"]
    assert figures["faults_not_back"] == [], figures["faults_not_back"]
    # Nothing lost, stuck, doubled, leaked or answered 5xx unfairly; every hostile file failed
    # with a reason; every live document asked for was found; every delete finished; the KB's
    # counts are its documents'.
    for key in DATA_PROBLEMS:
        assert figures[key] == 0, (key, figures[key], figures["errors_by_kind"])
    assert figures["kb_counts_match"], (figures["kb_counts"], figures["kb_counts_expected"])
    assert figures["documents"]["indexed"] > 0, figures["documents"]
    # Every kind of event the run promises happened: the checks above had something to check.
    assert figures["events_missing"] == [], figures["events"]
    assert min(figures["events"].values()) >= 1, figures["events"]
    # Every fault's canary was indexed within the tiny run's bound once the fault was over.
    recoveries = [s for times in figures["recovery_s"].values() for s in times]
    assert len(recoveries) == figures["faults"], figures["recovery_s"]
    assert None not in recoveries, figures["recovery_s"]
    assert max(recoveries) <= TINY["recovery_limit_s"], figures["recovery_s"]
    # While the API process was up, searches were answered correctly within the bound (a
    # 2xx, well-formed, naming no deleted document, finding the live one asked for), all but
    # a few on a machine the suite's other workers share; and every one had some answer.
    assert figures["search_availability"] >= 0.97, figures["errors_by_kind"]
    assert figures["search_availability_any_answer"] >= 0.99, figures["errors_by_kind"]
