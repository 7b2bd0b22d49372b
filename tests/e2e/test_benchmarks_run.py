"""Every benchmark runs at its tiny size, as its docstring says, and ends with the JSON object it
promises: a change that breaks a benchmark fails here. Speed figures are not judged (a few
seconds of load on a shared machine say nothing); what is checked is that each benchmark ran
its main path (its stack started with the settings it prints, its load went through, its figures
came out) and that its data came through whole: the soak lost nothing and answered every
request, ingest and crawl indexed every chunk their inputs make, bulk indexed every record once,
the quantised store's recall holds. A benchmark whose run loses or corrupts data also exits
non-zero by itself.

Each benchmark runs as a user runs it (`python -m benchmarks.<name> --tiny` from the
repository's root), in a process of its own with stacks of its own. (The search benchmark's
`--user-form --tiny`, a second mode of it, is left out: about 20 s more.) One runs at a time:
alone they take about 175 s in all on a quiet two-core machine (search 33 s, soak 27 s, ingest
33 s, crawl 29 s, bulk 25 s, quality 16 s, large inputs 10 s, MongoDB aging 9 s); two at a time
beside the suite's other workers overloaded the machine (the search benchmark alone took 343 s
in such a run). The chaos soak, which mostly waits, and the memory checks, which start no
stack, run in modules of their own (`test_chaos_benchmark_run.py`,
`test_memory_checks_run.py`), beside these.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from benchmarks import quality
from benchmarks.fixture_set import DOCUMENTS as FIXTURE_DOCUMENTS
from benchmarks.results import Goal, judge
from benchmarks.search_stores import GOALS
from tests.benchmark_runs import last_json, run_module

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

AT_ONCE = 1

SEARCH_KEYS = {
    f"{figure}{store}_2k"
    for figure in (
        "p50_ms_uncached_c1",
        "p95_ms_uncached_c1",
        "rps_uncached_c32",
        "p95_ms_uncached_c32",
        "p95_ms_cached_c1",
        "rps_cached_c32",
        "api_peak_rss_mb",
        "recall_at_10_quantised",
        "ratio_uncached_c32_to_encoder",
        "max_copies_of_a_text",
        "fill_s",
    )
    for store in ("", "_distinct")
} | {
    "mcp_added_p95_ms_2k",
    "encoder_p50_ms_c1",
    "encoder_p95_ms_c1",
    "encoder_qps_batch32",
    "chunks",
    "stores",
    "goals",
}
QUALITY_KEYS = {
    f"fixtures_{metric}_{mode}"
    for metric in ("recall4", "recall10", "mrr10", "ndcg10")
    for mode in ("dense", "sparse", "hybrid")
} | {"fixtures_queries", "ingest_s", "kbs", "goals", "total_s"}
INGEST_KEYS = {
    "chunks",
    "e2e_chunks_per_s",
    "model_chunks_per_s",
    "ratio",
    "ratio_ceiling_cpu",
    "model_plain_chunks_per_s",
    "e2e_chunks_per_s_text_copies",
    "model_chunks_per_s_text_copies",
    "ratio_text_copies",
    "embed_workers",
    "peak_rss_mb",
    "stage_seconds",
}
CRAWL_KEYS = {
    "pages",
    "chunks",
    "crawl_seconds",
    "pages_per_s",
    "chunks_per_s",
    "recrawl_seconds",
    "recrawl_pages_per_s",
    "recrawl_counts",
    "model_alone_chunks",
    "model_alone_chunks_per_s",
    "model_alone_pages_per_s",
    "ratio",
    "first_counts",
}
SOAK_KEYS = {
    "errors",
    "errors_by_kind",
    "lost_documents",
    "deleted_documents_returned",
    "deleted_documents_with_points",
    "documents",
    "requests",
    "max_rss_growth_pct",
    "rss_growth_pct",
    "private_growth_pct",
    "mapped_growth_mb",
    "cpu_pct_of_a_core",
    "p95_ms_upload",
    "p95_ms_search",
    "p95_ms_search_per_minute",
    "load_average_at_end",
}
# name: (module, arguments, keys of the last line), the longest first.
BULK_KEYS = {
    "records",
    "distinct_records",
    "chunks",
    "seconds",
    "records_per_s",
    "bulk_ratio_to_model",
    "mongo_commands_idle_per_s",
    "mongo_commands_per_record",
    "mongo_commands_per_file",
    "mongo_writes_per_record",
    "mongo_writes_per_file",
    "mongo_commands_per_s",
    "goals",
    "mongo_commands_by_kind_per_record",
    "mongo_commands_by_kind_per_file",
    "intake_p95_ms",
    "lost_records",
    "indexed_twice",
    "points_of_no_document",
    "files_not_indexed",
}
MIGRATE_KEYS = {
    "state",
    "chunks",
    "copy_chunks_per_s",
    "model_alone_chunks_per_s",
    "embed_stage_chunks_per_s",
    "migration_ratio_to_embed",
    "migration_ratio_to_model",
    "hours_per_million_chunks",
    "seconds_to_switch",
    "search_p95_ms_before",
    "search_p95_ms_during",
    "search_p95_during_migration",
    "wrong_answers",
    "mixed_generations",
    "chunks_missing",
    "api_peak_rss_mb",
    "goals",
}
BENCHMARKS: dict[str, tuple[str, list[str], set[str]]] = {
    "search": ("search", ["--tiny"], SEARCH_KEYS),
    # With the store in a process of its own: the chaos soak runs the API holding it.
    "soak": ("soak", ["--tiny", "--store-process"], SOAK_KEYS),
    "ingest": ("ingest", ["--tiny"], INGEST_KEYS),
    "quality": ("quality", ["--tiny"], QUALITY_KEYS),
    "crawl": ("crawl", ["--tiny"], CRAWL_KEYS),
    "bulk": ("bulk", ["--tiny"], BULK_KEYS),
    "large_inputs": ("large_inputs", ["--tiny"], {"pdf_2_pages"}),
    "migrate": ("migrate", ["--tiny"], MIGRATE_KEYS),
    "mongo_aging": (
        "mongo_aging",
        ["--tiny"],
        {"secantusdb_write_p50_drift", "ragline_standin_write_p50_drift"},
    ),
}


def run_benchmark(name: str) -> subprocess.CompletedProcess[str]:
    """Runs one benchmark at its tiny size, as its docstring says."""
    module, arguments, _ = BENCHMARKS[name]
    return run_module(module, arguments)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """Every benchmark's run, started at once, `AT_ONCE` at a time."""
    with ThreadPoolExecutor(AT_ONCE, thread_name_prefix="benchmark") as pool:
        yield {name: pool.submit(run_benchmark, name) for name in BENCHMARKS}


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_benchmark_runs_at_tiny_size(
    name: str, runs: dict[str, Future[subprocess.CompletedProcess[str]]]
) -> None:
    figures = last_json(name, runs[name].result())
    _, _, keys = BENCHMARKS[name]
    assert keys <= set(figures), sorted(keys - set(figures))


def test_the_migration_answers_every_search_right_and_switches_with_every_chunk(
    runs: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    figures = last_json("migrate", runs["migrate"].result())
    assert figures["state"] == "live"
    assert figures["searches_before"] > 0, figures
    assert figures["wrong_answers"] == 0, figures
    assert figures["mixed_generations"] == 0, figures
    assert figures["chunks_missing"] == 0, figures
    assert figures["copied"] >= figures["chunks"] > 0, figures


def test_the_soak_loses_nothing_and_answers_every_request(
    runs: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    figures = last_json("soak", runs["soak"].result())
    assert figures["errors"] == 0, figures["errors_by_kind"]
    assert figures["lost_documents"] == 0
    assert figures["deleted_documents_returned"] == 0
    assert figures["deleted_documents_with_points"] == 0
    assert figures["documents_with_wrong_point_count"] == 0
    assert figures["points_of_no_uploaded_document"] == 0
    assert figures["documents"]["indexed"] > 0, figures["documents"]
    assert figures["documents"]["failed_unexpectedly"] == 0, figures["documents"]
    assert figures["requests"]["search_bot"] > 0, figures["requests"]
    assert figures["requests"]["delete"] > 0, figures["requests"]
    # What the API's allocators held, read from its /metrics every minute.
    held = figures["api_allocators_per_minute"]
    assert min(held["malloc_in_use_mb"]) > 10, held
    assert min(held["python_blocks_k"]) > 100, held
    # The store served by a process of its own, whose allocators were read beside every
    # worker's (a level needs a longer run: each process is named, with no figure yet).
    assert figures["store_process"] is True
    processes = set(figures["allocators_level_growth_pct"])
    assert {"api", "store", "extract-1", "chunk-1", "embed-1"} <= processes, processes
    # What the machine gave the measured minute: the fixed probe ran and took time, and every
    # process's CPU was read (the API's and the embed worker's were busy with the load).
    assert len(figures["probe_ms_per_minute"]) == 1, figures["probe_ms_per_minute"]
    assert figures["probe_ms_per_minute"][0] > 0
    assert figures["probe_cpu_ms_per_minute"][0] > 0
    assert len(figures["machine_steal_pct_per_minute"]) == 1
    assert 0 < figures["machine_busy_pct_per_minute"][0] <= 100
    cpu = figures["cpu_pct_per_minute"]
    assert cpu["api"][0] > 0, cpu
    assert cpu["embed-1"][0] > 0, cpu


def test_ingest_and_crawl_index_every_chunk_their_inputs_make(
    runs: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    ingest = last_json("ingest", runs["ingest"].result())
    assert ingest["chunks"] == ingest["chunks_made"] == ingest["chunks_in_store"] > 0
    crawl = last_json("crawl", runs["crawl"].result())
    assert crawl["chunks"] == crawl["model_alone_chunks"] == crawl["chunks_in_store"] > 0


def test_bulk_indexes_every_record_once_and_counts_what_each_costs_mongodb(
    runs: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    figures = last_json("bulk", runs["bulk"].result())
    assert figures["records"] > figures["distinct_records"] > 0  # some published again
    assert (figures["lost_records"], figures["indexed_twice"]) == (0, 0)
    assert (figures["points_of_no_document"], figures["files_not_indexed"]) == (0, 0)
    # Every process's commands are counted: each stage's share of a record shows up.
    processes = {key.split()[0] for key in figures["mongo_commands_by_kind_per_record"]}
    assert {"api", "records-1", "extract-1", "chunk-1", "embed-1"} <= processes
    assert figures["mongo_commands_per_record"] > figures["mongo_writes_per_record"] > 0
    assert figures["mongo_commands_per_file"] > figures["mongo_writes_per_file"] > 0
    # The command goals are judged on the tiny run's figures; its ratio says nothing.
    goals = figures["goals"]
    assert goals["mongo_commands_per_record <= 12"]["value"] == figures["mongo_commands_per_record"]
    assert isinstance(goals["mongo_commands_per_file <= 16"]["met"], bool)
    assert goals["bulk_ratio_to_model >= 0.9"] == {"value": None, "met": None}


def _at_tiny_size(goal: Goal) -> str:
    """The tiny run's key of a goal's figure: the same figure of the same store at 2,000
    chunks (the million-chunk goals are the distinct store's)."""
    if goal.key.endswith("_1m"):
        return goal.key.removesuffix("_1m") + "_distinct_2k"
    return f"{goal.key}_2k"


def test_search_benchmark_measures_both_stores_and_judges_every_goal(
    runs: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    figures = last_json("search", runs["search"].result())
    assert figures["stores"] == {"2000": ["duplicates", "distinct"]}
    # The distinct store holds every text once; the duplicate-heavy one many times over.
    assert figures["max_copies_of_a_text_distinct_2k"] == 1
    assert figures["max_copies_of_a_text_2k"] > 2
    assert figures["real_chunks_distinct_2k"] + figures["made_chunks_distinct_2k"] == 2000
    # The server's steps at one client and at 32, uncached and cached.
    for table in ("steps_uncached_c1", "steps_cached_c1", "steps_uncached_c32", "steps_cached_c32"):
        steps = figures[f"{table}_2k"]
        assert steps["total"]["p50"] > 0, (table, steps)
        assert steps["total"]["p95"] >= steps["ranking"]["p95"], (table, steps)
    # Every goal is listed; at this size none of their figures is measured…
    assert set(figures["goals"]) == {goal.name for goal in GOALS}
    assert all(verdict["met"] is None for verdict in figures["goals"].values())
    # …but each has its figure at this size, and is judged on it. Speed figures of a few
    # seconds of load on a shared machine say nothing; the quantised store's recall does.
    tiny = {goal.key: figures[_at_tiny_size(goal)] for goal in GOALS}
    verdicts = judge(tiny, GOALS)
    assert all(isinstance(verdict["met"], bool) for verdict in verdicts.values()), verdicts
    assert verdicts["recall_at_10_quantised_1m >= 0.99"]["met"] is True, verdicts


def test_quality_finds_the_fixture_answers_in_every_mode(
    runs: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    figures = last_json("quality", runs["quality"].result())
    assert figures["kbs"]["fixtures"]["documents"] == len(FIXTURE_DOCUMENTS), figures["kbs"]
    assert figures["kbs"]["fixtures"]["chunks"] > 0, figures["kbs"]
    for mode in quality.MODES:
        for metric, floor in quality.FIXTURE_FLOORS.items():
            key = f"fixtures_{metric}_{mode}"
            assert figures[key] >= floor, (key, figures[key], floor)
    assert quality.broken_figures(figures) == []


def test_large_inputs_reports_each_process_of_its_stack(
    runs: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    figures = last_json("large_inputs", runs["large_inputs"].result())["pdf_2_pages"]
    assert {"input_mb", "chunks", "chunks_made", "seconds", "peak_rss_mb"} <= set(figures)
    assert "failed" not in figures, figures["failed"]
    # Every chunk the file makes (extracted and chunked in-process) was indexed.
    assert figures["chunks"] == figures["chunks_made"] > 0, figures
    assert {"api", "embed-1"} <= set(figures["peak_rss_mb"])
