"""How the quality benchmark judges an answer's hits (no stack: hits as the API returns them)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.judging import known_item, ndcg_at, recall_at
from benchmarks.quality import (
    exact_cases,
    fusion_modes,
    judged,
    manpage_cases,
    multiformat_cases,
    shown,
    trec_check,
)


def _hit(document: str, text: str = "", chunk: int = 0) -> dict[str, Any]:
    return {
        "document_id": document,
        "chunk_text": text,
        "chunk_index": chunk,
        "score": 0.5,
        "source_name": "",
        "retrieval_rationale": "",
    }


def test_man_pages_are_ranked_by_their_best_passage() -> None:
    data = {"queries": {"q_ls.1": "list directory contents"}, "qrels": {"q_ls.1": {"ls.1": 1}}}
    pages = {"doc_a": "cp.1", "doc_b": "ls.1"}
    (case,) = manpage_cases(data, pages)
    hits = [_hit("doc_a", chunk=0), _hit("doc_a", chunk=3), _hit("doc_b")]
    per_page, per_hit = judged(case, hits)
    assert per_page == [False, True]  # the second hit of cp.1 does not push ls.1 down
    assert per_hit == [False, False, True]
    assert ndcg_at(known_item(per_page), 10) == pytest.approx(0.6309298)


def test_a_section_is_found_in_any_format() -> None:
    section = (
        "Maintainers should preserve the modification times of the upstream source files in "
        "a package, as far as is reasonably possible. The source package may contain "
        "directories that are empty."
    )
    data = {
        "sections": {"policy/ch-source.html#4.7": {"text": section}},
        "queries": {"mf-001": {"text": "Time Stamps", "section": "policy/ch-source.html#4.7"}},
    }
    (case,) = multiformat_cases(data)
    glued = section.replace("upstream source files in a package", "upstreamsourcefilesinapackage")
    flags, _ = judged(case, [_hit("html", "Unrelated text about shells."), _hit("pdf", glued)])
    assert flags == [False, True]


def test_an_identifier_counts_in_its_own_page_only() -> None:
    data = {
        "identifiers": {"id-001": {"identifier": "--no-clobber", "kind": "option", "page": "cp.1"}},
        "queries": {
            "id-001-bare": {"text": "--no-clobber", "identifier": "id-001", "style": "bare"}
        },
    }
    pages = {"doc_cp": "cp.1", "doc_mv": "mv.1"}
    (case,) = exact_cases(data, pages)
    flags, _ = judged(
        case,
        [
            _hit("doc_mv", "use --no-clobber here"),  # not its page
            _hit("doc_cp", "copy files"),  # its page, another chunk
            _hit("doc_cp", "-n, --no-clobber do not overwrite"),
        ],
    )
    assert flags == [False, False, True]


def test_trec_eval_cross_check_matches_the_known_item_metrics() -> None:
    rankings = {
        "a": [False, True, True],
        "b": [True],
        "c": [False] * 10,
        "d": [],
    }
    check = trec_check(rankings)
    ours = [known_item(flags) for flags in rankings.values()]
    assert check["ndcg10"] == pytest.approx(sum(ndcg_at(f, 10) for f in ours) / 4)
    assert check["recall10"] == pytest.approx(sum(recall_at(f, 10) for f in ours) / 4)
    assert check["recall10"] == 0.5


def test_the_dump_marks_copies_of_a_better_hit_from_another_document() -> None:
    text = "Every package must specify the dependency information about other packages. " * 3
    hits = [_hit("pdf", text), _hit("pdf", text, chunk=1), _hit("html", text), _hit("x", "other")]
    entries = shown(hits, [False] * 4, {})
    assert [entry.get("copy_of") for entry in entries] == [None, None, 1, None]
    assert entries[0]["text"] == text[:200]
    assert "text" not in shown(hits, [False] * 4, {}, text=False)[0]


def test_fusions_name_extra_hybrid_modes_beside_the_three() -> None:
    modes = fusion_modes(["convex:0.6", "rrf:20", "dbsf", "zscore:0.7", "gated"])
    hybrid = {"retrieval_mode": "hybrid"}
    assert modes == {
        "dense": {"retrieval_mode": "dense"},
        "sparse": {"retrieval_mode": "sparse"},
        "hybrid": hybrid,
        "hybrid_convex0.6": {**hybrid, "fusion": "convex", "dense_weight": 0.6},
        "hybrid_rrf20": {**hybrid, "fusion": "rrf", "rrf_k": 20},
        # A method alone: the dense weight chosen per query.
        "hybrid_dbsf": {**hybrid, "fusion": "dbsf"},
        "hybrid_zscore0.7": {**hybrid, "fusion": "zscore", "dense_weight": 0.7},
        "hybrid_gated": {**hybrid, "fusion": "gated"},
    }
    for wrong in ("borda:1", "dbsf:x", "convex:"):
        with pytest.raises(SystemExit):
            fusion_modes([wrong])
