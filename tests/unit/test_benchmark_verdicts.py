"""The quality and large-inputs benchmarks judge their own figures: a run whose retrieval or
ingestion is broken names what on stderr and exits 1 after its JSON line (no stack: figures as
the runs print them)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import large_inputs, quality


def fixture_figures(**changed: float) -> dict[str, Any]:
    """A tiny quality run's figures, as measured (`quality.FIXTURE_FLOORS`), with some changed
    (`recall4_sparse=0.0`)."""
    measured = {
        "dense": {"recall4": 0.875, "recall10": 1.0, "mrr10": 0.8889, "ndcg10": 0.9126},
        "sparse": {"recall4": 0.875, "recall10": 0.875, "mrr10": 0.8125, "ndcg10": 0.8289},
        "hybrid": {"recall4": 0.875, "recall10": 0.875, "mrr10": 0.875, "ndcg10": 0.875},
    }
    figures: dict[str, Any] = {
        f"fixtures_{metric}_{mode}": value
        for mode, metrics in measured.items()
        for metric, value in metrics.items()
    }
    figures |= {f"fixtures_{key}": value for key, value in changed.items()}
    return figures | {
        "kbs": {"fixtures": {"documents": 4, "chunks": 28}},
        "fixtures_queries": 8,
        "goals": {},
    }


def input_figures(chunks: int = 33, made: int = 33, **more: Any) -> dict[str, Any]:
    """One large input's figures, as the run prints them."""
    return {
        "input_mb": 0.35,
        "chunks": chunks,
        "chunks_made": made,
        "seconds": 2.6,
        "peak_rss_mb": {"api": 334.0, "embed-1": 973.5},
        **more,
    }


def test_the_tiny_quality_run_as_measured_is_not_broken() -> None:
    assert quality.broken_figures(fixture_figures()) == []


def test_a_sparse_retriever_that_finds_nothing_is_named() -> None:
    figures = fixture_figures(recall4_sparse=0.0, recall10_sparse=0.0, mrr10_sparse=0.0)
    figures["fixtures_ndcg10_sparse"] = 0.0
    problems = quality.broken_figures(figures)
    assert problems == [
        "fixtures_recall10_sparse is 0: the mode found nothing relevant for any query",
        "fixtures_recall4_sparse 0.0 is below its floor 0.625",
        "fixtures_mrr10_sparse 0.0 is below its floor 0.6",
        "fixtures_ndcg10_sparse 0.0 is below its floor 0.6",
    ]


@pytest.mark.parametrize("mode", quality.MODES)
@pytest.mark.parametrize("metric", list(quality.FIXTURE_FLOORS))
def test_each_mode_is_held_to_each_floor(mode: str, metric: str) -> None:
    floor = quality.FIXTURE_FLOORS[metric]
    at_floor = quality.fixture_problems(fixture_figures(**{f"{metric}_{mode}": floor}))
    assert not [problem for problem in at_floor if "below its floor" in problem]
    below = quality.fixture_problems(fixture_figures(**{f"{metric}_{mode}": floor - 0.01}))
    assert f"fixtures_{metric}_{mode} {floor - 0.01} is below its floor {floor}" in below


def test_hybrid_may_trail_the_better_single_mode_only_by_the_margin() -> None:
    lead = 0.9126  # dense nDCG@10
    within = fixture_figures(ndcg10_hybrid=round(lead - quality.HYBRID_MARGIN + 0.01, 4))
    assert quality.fixture_problems(within) == []
    behind = fixture_figures(ndcg10_hybrid=0.8)
    assert quality.fixture_problems(behind) == [
        f"fixtures_ndcg10_hybrid 0.8 trails fixtures_ndcg10_dense {lead} by more than "
        f"{quality.HYBRID_MARGIN}"
    ]


def test_any_set_with_an_empty_kb_or_a_mode_that_finds_nothing_is_named() -> None:
    figures = {
        "kbs": {
            "manpages": {"documents": 1481, "chunks": 2346},
            "one_copy": {"documents": 37, "chunks": 0},
        },
        "recall10_dense": 0.98,
        "paraphrase_test_recall10_hybrid_rrf60": 0.0,
        "exact_misses_hybrid_top4": 0,
    }
    assert quality.broken_figures(figures) == [
        "KB one_copy holds no chunk (37 documents)",
        "paraphrase_test_recall10_hybrid_rrf60 is 0: the mode found nothing relevant for any query",
    ]


def test_a_broken_quality_run_exits_1_naming_each_figure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    quality.exit_if_broken([])
    with pytest.raises(SystemExit) as exited:
        quality.exit_if_broken(["fixtures_recall4_sparse 0.0 is below its floor 0.625"])
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        "benchmarks.quality: fixtures_recall4_sparse 0.0 is below its floor 0.625\n"
    )


def test_large_inputs_indexed_whole_are_no_problem() -> None:
    results = {"pdf_30_pages": input_figures(), "csv_10k_rows": input_figures(207, 207)}
    assert large_inputs.data_problems(results) == []


def test_large_inputs_not_indexed_whole_are_named() -> None:
    results = {
        "pdf_2_pages": input_figures(0, 1, failed="its document failed: the PDF file is damaged"),
        "pdf_30_pages": input_figures(0, 33),
        "csv_10k_rows": input_figures(206, 207),
    }
    assert large_inputs.data_problems(results) == [
        "pdf_2_pages: its document failed: the PDF file is damaged",
        "pdf_30_pages: no chunk indexed, 33 made here",
        "csv_10k_rows: 206 chunks indexed, 207 made here",
    ]


def test_a_large_inputs_run_with_no_input_is_a_problem() -> None:
    assert large_inputs.data_problems({}) == ["no input was ingested"]


def test_the_chunks_an_input_makes_are_counted_as_the_pipeline_counts_them() -> None:
    # The figures of the last full run (docs/benchmarks/results/large_inputs.json): 33 chunks
    # for the 30-page PDF, 207 for the 10,000-row CSV, as indexed by the pipeline.
    made = large_inputs.inputs([30], [10_000])
    counts = {
        label: large_inputs.chunks_made(name, build()) for label, (name, build) in made.items()
    }
    assert counts == {"pdf_30_pages": 33, "csv_10k_rows": 207}
    assert large_inputs.chunks_made("empty.pdf", b"not a pdf") == 0
