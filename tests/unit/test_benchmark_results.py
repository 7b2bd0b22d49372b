"""Benchmark results files: a run's figures are written with their date, commit and arguments,
the search and quality figures drawn as plots, a tiny run writes nothing into the documentation,
a saved log is published as the run would have been, and the tables render from the file."""

from __future__ import annotations

import ast
import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from benchmarks import results
from benchmarks.search_stores import STORES, suffix

BENCHMARKS_DIR = Path(results.__file__).parent
PNG = b"\x89PNG\r\n\x1a\n"


def search_figures(suffixes: tuple[str, ...] = ("", "_distinct")) -> dict[str, Any]:
    """A small search run's figures, keyed as `benchmarks/search.py` keys them."""
    figures: dict[str, Any] = {}
    for end in suffixes:
        for cache, base in (("uncached", 60.0), ("cached", 5.0)):
            for concurrency in (1, 8, 32):
                figures[f"p50_ms_{cache}_c{concurrency}{end}"] = base * concurrency
                figures[f"p95_ms_{cache}_c{concurrency}{end}"] = 1.5 * base * concurrency
                figures[f"p99_ms_{cache}_c{concurrency}{end}"] = 2 * base * concurrency
                figures[f"rps_{cache}_c{concurrency}{end}"] = 100.0 / base
        figures[f"api_peak_rss_mb{end}"] = 900
        figures[f"recall_at_10_quantised{end}"] = 0.998
        for cache, ranking in (("uncached", 4.5), ("cached", 0.0)):
            figures[f"steps_{cache}_c1{end}"] = {
                "cache": {"p50": 0.3, "p95": 0.5},
                "ranking": {"p50": ranking, "p95": 2 * ranking},
                "total": {"p50": 9.25, "p95": 14.0},
            }
    figures |= {
        "mcp_added_p95_ms": 3.1,
        "encoder_p50_ms_c1": 6.5,
        "chunks": [100000],
        "stores": {"100000": ["duplicates", "distinct"]},
        "goals": {
            "p95_ms_uncached_c1 <= 30": {"value": 90.0, "met": False},
            "p95_ms_uncached_c1_1m <= 35": {"value": None, "met": None},
        },
    }
    return figures


def quality_figures() -> dict[str, Any]:
    """A small quality run's figures: the man pages unprefixed, the other sets prefixed."""
    figures: dict[str, Any] = {"ingest_s": 12, "kbs": {"manpages": {"chunks": 30}}}
    for prefix in ("", "multiformat_", "paraphrase_test_"):
        for metric in ("recall4", "recall10", "mrr10", "ndcg10"):
            for n, mode in enumerate(("dense", "sparse", "hybrid", "hybrid_convex0.6")):
                figures[f"{prefix}{metric}_{mode}"] = 0.7 + 0.05 * n
    figures["goals"] = {"manpages: ndcg10_hybrid >= 0.86": False}
    return figures


def test_a_search_run_is_written_with_its_provenance_and_a_plot_per_store(tmp_path: Path) -> None:
    path = results.write_results(
        "search", search_figures(), directory=tmp_path, arguments=["--chunks", "100000"]
    )

    record = json.loads(path.read_text())
    assert path == tmp_path / "search.json"
    assert record["benchmark"] == "search"
    assert record["figures"] == search_figures()
    assert record["arguments"] == ["--chunks", "100000"]
    assert datetime.strptime(record["date"], "%Y-%m-%dT%H:%M:%SZ")
    assert len(record["commit"]) == 40
    assert record["commit_of"] == "run"
    assert record["plots"] == [
        "search-latency-duplicates-100k.png",
        "search-latency-distinct-100k.png",
    ]
    for plot in record["plots"]:
        assert (tmp_path / plot).read_bytes().startswith(PNG)


def test_a_quality_run_gets_a_plot_per_set(tmp_path: Path) -> None:
    record = json.loads(
        results.write_results("quality", quality_figures(), directory=tmp_path).read_text()
    )

    assert record["plots"] == [
        "quality-manpages.png",
        "quality-multiformat.png",
        "quality-paraphrase-test.png",
    ]
    assert all((tmp_path / plot).read_bytes().startswith(PNG) for plot in record["plots"])
    assert results.quality_figures(quality_figures())["paraphrase_test"]["hybrid_convex0.6"] == {
        "recall4": pytest.approx(0.85),
        "recall10": pytest.approx(0.85),
        "mrr10": pytest.approx(0.85),
        "ndcg10": pytest.approx(0.85),
    }


def test_a_chaos_run_gets_its_timeline_plotted_and_tabled_without_it(tmp_path: Path) -> None:
    figures = {
        "lost_documents": 0,
        "faults_injected": {"kill API": 1, "freeze MongoDB": 1},
        "timeline": {
            "faults": [[7.4, 10.7, "freeze MongoDB"], [9.0, 15.3, "kill API"]],
            "errors_per_10s": [0, 3, 0],
        },
    }

    path = results.write_results("chaos", figures, directory=tmp_path)
    record = json.loads(path.read_text())
    page = results.render_markdown(record, link_prefix="results/")

    assert record["plots"] == ["chaos-timeline.png"]
    assert (tmp_path / "chaos-timeline.png").read_bytes().startswith(PNG)
    assert "![chaos](results/chaos-timeline.png)" in page
    assert "`faults_injected.kill API` | 1" in page
    assert "errors_per_10s" not in page


def test_a_soak_gets_its_memory_by_minute_plotted(tmp_path: Path) -> None:
    figures = {
        "warmup_minutes": 2,
        "rss_mb_per_minute": {"api": [400.0, 420.0, 425.0, 426.0], "embed-1": [800.0] * 4},
        "private_mb_per_minute": {"api": [300.0, 310.0, 311.0, 311.0], "embed-1": [600.0] * 4},
    }

    record = json.loads(results.write_results("soak", figures, directory=tmp_path).read_text())

    assert record["plots"] == ["soak-memory.png"]
    assert (tmp_path / "soak-memory.png").read_bytes().startswith(PNG)
    assert "![soak](results/soak-memory.png)" in results.render_markdown(record)
    # A run from before the soak kept its memory by minute has no plot.
    older = results.write_results("soak", {"warmup_minutes": 2}, directory=tmp_path)
    assert json.loads(older.read_text())["plots"] == []


def test_a_new_run_replaces_the_plots_of_the_last_one(tmp_path: Path) -> None:
    results.write_results("search", search_figures(("", "_distinct")), directory=tmp_path)
    (tmp_path / "search-user-form-old.png").write_bytes(PNG)

    results.write_results("search", search_figures(("_1m",)), directory=tmp_path)

    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "search-latency-distinct-1m.png",
        "search-user-form-old.png",  # another benchmark's
    ]


def test_a_run_from_a_clean_checkout_is_not_dirty_for_replacing_its_own_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The results directory is tracked: the new run's plots replacing the last run's are not
    uncommitted changes of the code that ran (a few git calls, well under a second)."""
    repo = tmp_path / "repo"
    published = repo / "results"
    results.write_results("search", search_figures(), directory=published)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "last run"], check=True)
    monkeypatch.setattr(results, "REPO", repo)

    written = results.write_results("search", search_figures(("_1m",)), directory=published)

    assert json.loads(written.read_text())["dirty"] is False
    (repo / "results" / "search.json").write_text("{}")
    written = results.write_results("search", search_figures(), directory=repo / "other")
    assert json.loads(written.read_text())["dirty"] is True


def test_a_store_measured_uncached_only_is_still_plotted(tmp_path: Path) -> None:
    figures = {"p50_ms_uncached_c1_distinct_2k": 30.0, "p95_ms_uncached_c1_distinct_2k": 45.0}

    record = json.loads(results.write_results("search", figures, directory=tmp_path).read_text())

    assert record["plots"] == ["search-latency-distinct-2k.png"]


def test_other_benchmarks_are_written_without_plots(tmp_path: Path) -> None:
    figures = {"pdf_2_pages": {"chunks": 3, "peak_rss_mb": {"api": 500}}}

    record = json.loads(
        results.write_results("large_inputs", figures, directory=tmp_path).read_text()
    )

    assert record["plots"] == []
    assert record["figures"] == figures
    with pytest.raises(ValueError, match="unknown benchmark"):
        results.write_results("nope", figures, directory=tmp_path)


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("chunks", [2_000, 100_000, 250_000, 1_000_000, 2_000_000])
def test_store_labels_read_the_search_benchmarks_suffixes(store: str, chunks: int) -> None:
    assert results.store_of(suffix(store, chunks)) == (store, chunks)


def test_a_tiny_run_writes_nothing_into_the_documentation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site_results = tmp_path / "docs-results"
    monkeypatch.setattr(results, "DOCS_RESULTS", site_results)

    results.publish("quality", quality_figures(), tiny=True, results_dir=None)
    assert not site_results.exists()
    assert results.results_directory(tiny=True, given=None) is None

    elsewhere = tmp_path / "elsewhere"
    results.publish("quality", quality_figures(), tiny=True, results_dir=elsewhere)
    assert (elsewhere / "quality.json").is_file()
    assert not site_results.exists()

    results.publish("quality", quality_figures(), tiny=False, results_dir=None)
    assert (site_results / "quality.json").is_file()


@pytest.mark.parametrize(
    "module", ["search", "quality", "ingest", "crawl", "large_inputs", "soak", "chaos", "encoder"]
)
def test_every_benchmark_takes_results_dir_and_publishes_its_run(module: str) -> None:
    tree = ast.parse((BENCHMARKS_DIR / f"{module}.py").read_text())
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert "add_results_option" in called
    # `report` publishes, after printing the figures (and exits on lost data).
    assert called & {"publish", "report"}


def test_a_saved_log_is_published_from_its_last_json_line(tmp_path: Path) -> None:
    log = tmp_path / "search-1m.log"
    figures = search_figures(("_1m",))
    log.write_text(
        "stack settings: {}\n"
        f"round 1: {json.dumps({'p50_ms_uncached_c1_1m': 1})}\n"
        "goal p95_ms_uncached_c1 <= 30: not measured in this run\n"
        f"{json.dumps(figures)}\n"
        "results written to elsewhere\n"
    )
    ended = datetime(2026, 3, 1, 12, 30, tzinfo=UTC).timestamp()
    os.utime(log, (ended, ended))

    assert results.main(["search", str(log), "--results-dir", str(tmp_path / "out")]) == 0

    record = json.loads((tmp_path / "out" / "search.json").read_text())
    assert record["figures"] == figures
    assert record["date"] == "2026-03-01T12:30:00Z"
    assert record["source"] == str(log)
    assert record["commit_of"] == "publication"
    assert record["plots"] == ["search-latency-distinct-1m.png"]


def test_a_log_without_a_json_line_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "broken.log"
    log.write_text("Traceback (most recent call last):\n  ...\n")

    with pytest.raises(SystemExit):
        results.main(["search", str(log), "--results-dir", str(tmp_path)])
    assert not (tmp_path / "search.json").exists()


def test_the_search_tables_render_from_the_file(tmp_path: Path) -> None:
    results.write_results("search", search_figures(), directory=tmp_path, commit="abc1234def")
    record = results.load("search", tmp_path)
    assert record is not None

    page = results.render_markdown(record, link_prefix="results/")

    assert "commit `abc1234def`" in page
    assert "[search.json](results/search.json)" in page
    assert "#### duplicates-100k" in page
    assert "| uncached c32 | 1920 | 2880 | 3840 | 1.66667 |" in page
    assert "![search latency, distinct-100k](results/search-latency-distinct-100k.png)" in page
    assert "| `api_peak_rss_mb` | 900 | 900 |" in page
    # Each store's time per step, uncached and cached, as its own table.
    assert "| step (ms) | uncached p50 | uncached p95 | cached p50 | cached p95 |" in page
    assert "| ranking | 4.5 | 9 | 0 | 0 |" in page
    assert page.count("| ranking |") == 2
    assert "steps_uncached_c1" not in page
    assert "| `mcp_added_p95_ms` | 3.1 |  |" in page
    assert "| `p95_ms_uncached_c1 <= 30` | 90 | **missed** |" in page
    assert "| `p95_ms_uncached_c1_1m <= 35` |  | not measured |" in page
    assert results.load("quality", tmp_path) is None


def test_the_quality_tables_render_from_the_file(tmp_path: Path) -> None:
    results.write_results("quality", quality_figures(), directory=tmp_path)
    record = results.load("quality", tmp_path)
    assert record is not None

    page = results.render_markdown(record, link_prefix="results/")

    assert "#### paraphrase test" in page
    assert "| mode | recall@4 | recall@10 | MRR@10 | nDCG@10 |" in page
    assert "| hybrid | 0.8 | 0.8 | 0.8 | 0.8 |" in page
    assert "![quality, multiformat](results/quality-multiformat.png)" in page
    assert "| `kbs.manpages.chunks` | 30 |" in page


def test_the_quality_page_shows_intervals_and_paired_comparisons(tmp_path: Path) -> None:
    figures = {
        **quality_figures(),
        "intervals": {"paraphrase_test/hybrid/recall4": [0.71, 0.88]},
        "paired": {
            "paraphrase_test: hybrid vs dense": {
                "recall4": {
                    "questions": 83, "wins": 9, "losses": 2, "ties": 72, "difference": 0.0843,
                    "interval": [0.012, 0.157], "p_value": 0.0331, "significant": True,
                },
                "mrr10": {
                    "questions": 83, "wins": 20, "losses": 22, "ties": 41, "difference": -0.0121,
                    "interval": [-0.061, 0.038], "p_value": 0.6412, "significant": False,
                },
            }
        },
    }  # fmt: skip
    results.write_results("quality", figures, directory=tmp_path)
    record = results.load("quality", tmp_path)
    assert record is not None

    page = results.render_markdown(record, link_prefix="results/")

    assert "| hybrid | 0.8 [0.710, 0.880] | 0.8 | 0.8 | 0.8 |" in page
    assert (
        "| paraphrase_test: hybrid vs dense | recall@4 | +0.0843 [+0.012, +0.157] | 9 / 2 / 72 "
        "| 0.033 | **significant** |"
    ) in page
    assert "| -0.0121 [-0.061, +0.038] | 20 / 22 / 41 | 0.641 | not significant |" in page
    assert "`intervals" not in page
