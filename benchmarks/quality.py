"""Retrieval quality: recall@4, recall@10, MRR@10 and nDCG@10 of dense, sparse and hybrid search.

    .venv/bin/python -m benchmarks.quality [--sets manpages multiformat exact paraphrase]
                                           [--eval ../shared/eval/manpages.json]
                                           [--dump rankings.json]
                                           [--fusions convex:0.6 rrf:60 ...]
    .venv/bin/python -m benchmarks.quality --tiny     # the `fixtures` set alone (`make test`)

Starts its own local stack, ingests through the real API and asks every query through the real
tenant search endpoint (`score_threshold` 0) in each retrieval mode. Four sets by default, and
a fifth for a quick run:

- `manpages`: `../shared/eval/manpages.json`, 1,481 man pages (records, through the batch
  endpoint) and 800 queries, each a page's one-line description; relevant: that page. Pages
  are ranked by their best passage.
- `multiformat` (`benchmarks/eval/multiformat.json`): two Debian manuals, each as HTML, plain
  text and PDF (uploads), and 150 section titles; relevant: a hit of any format that overlaps
  the section's text (`benchmarks/judging.py`). Asked in two KBs: every format (`all_formats`,
  each passage three times) and the HTML files alone (`one_copy`).
- `exact` (`benchmarks/eval/exact_terms.json`): 100 identifiers (option flags, paths, variable
  and configuration names) that occur in exactly one man page, asked bare and inside a generic
  question, in the man-page KB; relevant: the hit of that page holding the identifier.
- `paraphrase` (`benchmarks/eval/paraphrase.json`): 411 questions written the way users ask
  (none shares a run of three content words with its answer) over six real corpora in one KB:
  the Debian Reference and the Debian Policy Manual (HTML, text, PDF), the Python tutorial and
  FAQ (HTML, reStructuredText), the Bash manual (HTML, PDF), Git's guides (HTML, AsciiDoc text)
  and SQLite's articles (HTML); relevant: a hit overlapping any of the question's quoted answer
  passages. Split by corpus: the first three are the tuning part (`paraphrase_tune_*`), on which
  the search constants are chosen, Bash, Git and SQLite the test part (`paraphrase_test_*`),
  which is what is reported; each corpus's figures too (`paraphrase_<corpus>_*`).
- `fixtures` (`benchmarks/fixture_set.py`): 8 questions over four files of `tests/fixtures`
  (which every clone has), judged as the paraphrase set is; keys `fixtures_*`. Not in the
  default run: `--tiny` (the same as `--sets fixtures`) is what `make test` runs, in well under
  a minute, to check that the benchmark works and that no retrieval mode is broken (its floors,
  `FIXTURE_FLOORS`, are far below what each mode measures there), not to compare
  configurations.
`benchmarks/build_eval_sets.py` says how the multi-format and exact sets were built,
`benchmarks/build_paraphrase_set.py` how the paraphrase set was. The Debian documents come from
their packages: `make benchmark-documents` installs them.

The benchmark's stack takes its own load (`STACK_SETTINGS`: the per-tenant upload and search
rates lifted); it prints them. It runs the stages its sets need (the records worker only for
the man pages, which come through the batch endpoint).

Every query asks for one known item; only the first relevant hit of a ranking counts (copies of
the same passage in other formats add nothing). The search service's candidate depth depends
on `top_k`, so a figure at cutoff k is measured on the answer a caller asking for k hits gets:
each query is asked with `top_k` 10 (recall@10, MRR@10, nDCG@10) and with `top_k` 4
(recall@4). `--dump` writes every ranking (document ids, chunk indexes, scores, the first 200
characters, the service's rationale, relevant or not, and which hits copy a better one from
another document), and asks each query once more with `top_k` 50 to show where the relevant
passage was.

The last line printed is one JSON object: the man-page figures keep their keys
(`ndcg10_dense`, `recall10_hybrid`, and `recall4_*`, `mrr10_*`), the sets' figures are
prefixed (`multiformat_recall4_hybrid`, `multiformat_one_copy_*`, `exact_*`,
`paraphrase_test_recall4_hybrid`), and `goals` says
which of the issue's goals are met.

After its JSON line (and its results file), a run whose figures only a broken retriever makes
names them on stderr and exits 1 (`broken_figures`): a KB that holds no chunk, a mode that
finds nothing relevant for any query of a set, and on the fixture set a mode below its floor
or hybrid trailing the better single mode by more than `HYBRID_MARGIN`. Missed goals do not
change the exit status: they are what the figures are measured for.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytrec_eval

from benchmarks.fixture_set import QUESTIONS as FIXTURE_QUESTIONS
from benchmarks.fixture_set import documents as fixture_documents
from benchmarks.fusion_choice import best_variant, cross_validated
from benchmarks.ingest import SECRET, TOKEN
from benchmarks.judging import (
    PASSAGE_THRESHOLD,
    Fingerprint,
    Passage,
    contains_identifier,
    first_relevant,
    known_item,
    mean,
    ndcg_at,
    recall_at,
    reciprocal_rank,
)
from benchmarks.results import add_results_option, publish
from benchmarks.stack import FILE_STAGES, RECORD_STAGES, announce, bench_stack
from core.paired import bootstrap_interval, compare

MODES = ("dense", "sparse", "hybrid")
# With `--fusions`, more hybrid configurations are asked beside the three modes, each under a
# name of its own (`hybrid_convex0.6`, `hybrid_rrf60`, `hybrid_dbsf`): how fusion is chosen.
# `METHOD:VALUE` is a dense weight (an RRF k for `rrf`); a method alone takes the weight per
# query (k 60 for `rrf`).
FUSION_NAME = re.compile(r"^(convex|rrf|dbsf|zscore|gated)(?::(\d+(?:\.\d+)?))?$")
SETS = ("manpages", "multiformat", "exact", "paraphrase")
# Sets that can be asked for, beside the default ones.
ALL_SETS = (*SETS, "fixtures")
# The benchmark's own stack takes its load: ~1,500 records in a few batches, and searches back
# to back (the service's per-tenant defaults would refuse both).
STACK_SETTINGS = {
    "RAGLINE_LIMITS__UPLOADS_PER_MINUTE": "1000000",
    "RAGLINE_LIMITS__SEARCHES_PER_SECOND": "1000000",
}
EVAL_DIR = Path(__file__).parent / "eval"
BATCH = 100
# Tries of a batch or an upload the API answers 503 (its writes took too long on a busy machine).
POST_TRIES = 5
IN_PROGRESS = ("queued", "extracting", "chunking", "embedding", "indexing")
DEEP = 50
RETRIES = 10
RETRY_S = 3.0
TEXT_CHARS = 200

Hit = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One query of a set: its text, what is relevant, and how a hit is judged."""

    qid: str
    text: str
    relevant: str
    judge: Callable[[Hit], bool]
    # Ranks pages rather than hits (the man-page set): hits of one page count once.
    unit: Callable[[Hit], str] | None = None


@dataclass(frozen=True)
class Run:
    """One set asked in one KB."""

    name: str
    kb: str
    cases: list[Case]


METRICS = ("recall4", "recall10", "mrr10", "ndcg10")
# The fixture set's floors, for each of the three modes: a tiny run (`--tiny`) with a mode
# below one exits 1. Measured by `--tiny` at commit b19020d (8 questions, 4 documents, 28
# chunks): recall@4 0.875 in every mode (7 questions of 8); MRR@10 dense 0.889, sparse 0.8125,
# hybrid 0.875; nDCG@10 dense 0.913, sparse 0.829, hybrid 0.875. A floor lets two questions
# more than today drop out of the top 4 (5 of 8) and MRR@10 and nDCG@10 lose about a quarter;
# a mode that returns nothing scores 0, one that ranks the 28 chunks at random under 0.2.
FIXTURE_FLOORS = {"recall4": 0.625, "mrr10": 0.6, "ndcg10": 0.6}
# How far hybrid may trail the better of dense and sparse on each floored figure of the fixture
# set: less than one question of 8 (0.125). Measured at the same run: at most 0.038 (nDCG@10,
# behind dense); recall@4 even, MRR@10 0.014 behind dense.
HYBRID_MARGIN = 0.1
# A set's recall@10 in one mode, as `keyed` names it: `recall10_dense` (the man pages),
# `fixtures_recall10_sparse`, `paraphrase_test_recall10_hybrid_rrf60`.
RECALL10_KEY = re.compile(r"^(?:[a-z0-9]+_)*?recall10_(?:dense|sparse|hybrid\S*)$")


@dataclass
class Figures:
    """What a run measured, per retrieval mode."""

    means: dict[str, dict[str, float]]
    # The queries with no relevant hit in the top 4.
    misses4: dict[str, list[str]]
    # Every query's figures, per mode.
    per_query: dict[str, dict[str, dict[str, float]]]

    def subset(self, qids: set[str]) -> Figures:
        """The same figures over some of the queries."""
        per_query = {
            mode: {qid: s for qid, s in scores.items() if qid in qids}
            for mode, scores in self.per_query.items()
        }
        return Figures(
            {
                mode: {m: mean([s[m] for s in scores.values()]) for m in METRICS}
                for mode, scores in per_query.items()
            },
            {mode: [q for q in missed if q in qids] for mode, missed in self.misses4.items()},
            per_query,
        )


def broken_figures(results: Mapping[str, Any]) -> list[str]:
    """What in a run's figures only a broken retriever or ingestion makes: a KB that holds no
    chunk, a mode that found nothing relevant for any query of a set (recall@10 0), and the
    fixture set's `fixture_problems`."""
    problems = [
        f"KB {name} holds no chunk ({size['documents']} documents)"
        for name, size in (results.get("kbs") or {}).items()
        if not size["chunks"]
    ]
    problems += [
        f"{key} is 0: the mode found nothing relevant for any query"
        for key, value in results.items()
        if RECALL10_KEY.match(key) and value == 0
    ]
    if "fixtures_queries" in results:
        problems += fixture_problems(results)
    return problems


def fixture_problems(results: Mapping[str, Any]) -> list[str]:
    """The fixture set's figures below their floors (`FIXTURE_FLOORS`), in any mode, and hybrid
    trailing the better single mode by more than `HYBRID_MARGIN`."""
    problems = []
    for mode in MODES:
        for metric, floor in FIXTURE_FLOORS.items():
            key = f"fixtures_{metric}_{mode}"
            if results[key] < floor:
                problems.append(f"{key} {results[key]} is below its floor {floor}")
    for metric in FIXTURE_FLOORS:
        best = max(("dense", "sparse"), key=lambda mode: results[f"fixtures_{metric}_{mode}"])
        lead, hybrid = results[f"fixtures_{metric}_{best}"], results[f"fixtures_{metric}_hybrid"]
        if hybrid < lead - HYBRID_MARGIN:
            problems.append(
                f"fixtures_{metric}_hybrid {hybrid} trails fixtures_{metric}_{best} {lead} by "
                f"more than {HYBRID_MARGIN}"
            )
    return problems


def exit_if_broken(problems: list[str]) -> None:
    """The very end of a run (after its JSON line and its results): figures only a broken
    retriever makes are named on stderr, and the run exits 1."""
    if problems:
        for problem in problems:
            print(f"benchmarks.quality: {problem}", file=sys.stderr)
        raise SystemExit(1)


def fail(message: str) -> None:
    """Stops the benchmark with a message."""
    sys.exit(f"benchmarks.quality: {message}")


def sha256(data: bytes) -> str:
    """SHA-256, hex."""
    return hashlib.sha256(data).hexdigest()


def read_document(path: Path) -> bytes:
    """A document's bytes as uploaded (`.gz` files decompressed)."""
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def load_documents_set(path: Path) -> dict[str, Any]:
    """A set over Debian documents (multi-format, paraphrase), after checking its documents
    are this machine's."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    missing = [d["path"] for d in data["documents"] if not Path(d["path"]).is_file()]
    if missing:
        fail(
            f"{len(missing)} Debian document(s) of {path.name} are missing (first: "
            f"{missing[0]}); install them with `make benchmark-documents` "
            f"(`apt-get install {' '.join(data['packages'])}`)"
        )
    changed = [
        d["path"] for d in data["documents"] if sha256(Path(d["path"]).read_bytes()) != d["sha256"]
    ]
    if changed:
        fail(
            f"{len(changed)} document(s) differ from those the set was built from (first: "
            f"{changed[0]}; built from {data['packages']}); rebuild the set"
        )
    return data


def manpage_cases(data: dict[str, Any], pages: dict[str, str]) -> list[Case]:
    """The man-page queries: relevant is the page the description belongs to."""

    def page_of(hit: Hit) -> str:
        document = str(hit["document_id"])
        return pages.get(document, document)

    def is_page(page: str) -> Callable[[Hit], bool]:
        return lambda hit: page_of(hit) == page

    cases = []
    for qid, text in data["queries"].items():
        (page,) = data["qrels"][qid]
        cases.append(Case(qid, text, page, is_page(page), page_of))
    return cases


def multiformat_cases(data: dict[str, Any]) -> list[Case]:
    """The section-title queries: relevant is a hit overlapping the section's text."""

    def overlaps(passage: Passage) -> Callable[[Hit], bool]:
        return lambda hit: passage.judges_relevant(str(hit["chunk_text"]))

    passages = {key: Passage(section["text"]) for key, section in data["sections"].items()}
    return [
        Case(qid, query["text"], query["section"], overlaps(passages[query["section"]]))
        for qid, query in data["queries"].items()
    ]


def paraphrase_cases(data: dict[str, Any]) -> list[Case]:
    """The paraphrased questions: relevant is a hit overlapping any of the answer passages."""

    def overlaps(passages: list[Passage]) -> Callable[[Hit], bool]:
        return lambda hit: any(p.judges_relevant(str(hit["chunk_text"])) for p in passages)

    return [
        Case(
            qid,
            question["text"],
            " | ".join(a["text"][:80] for a in question["answers"]),
            overlaps([Passage(answer["text"]) for answer in question["answers"]]),
        )
        for qid, question in data["questions"].items()
    ]


def fixture_cases() -> list[Case]:
    """The fixtures' questions: relevant is a hit overlapping the question's quote."""

    def overlaps(passage: Passage) -> Callable[[Hit], bool]:
        return lambda hit: passage.judges_relevant(str(hit["chunk_text"]))

    return [
        Case(qid, question, quote[:80], overlaps(Passage(quote)))
        for qid, (question, quote) in FIXTURE_QUESTIONS.items()
    ]


def exact_cases(data: dict[str, Any], pages: dict[str, str]) -> list[Case]:
    """The identifier queries: relevant is the hit of its page that holds the identifier."""
    cases = []
    for qid, query in data["queries"].items():
        item = data["identifiers"][query["identifier"]]

        def judge(hit: Hit, item: dict[str, str] = item) -> bool:
            return pages.get(hit["document_id"]) == item["page"] and contains_identifier(
                hit["chunk_text"], item["identifier"]
            )

        cases.append(Case(qid, query["text"], f"{item['page']}: {item['identifier']}", judge))
    return cases


def create_kb(admin: httpx.Client, name: str) -> str:
    """A new knowledge base; its id."""
    response = admin.post("/api/v1/knowledge-bases", json={"name": name})
    response.raise_for_status()
    return str(response.json()["id"])


def _post(admin: httpx.Client, path: str, **kwargs: Any) -> httpx.Response:
    """A POST of records or a file (`call`), again after the `Retry-After` of a 503 (its MongoDB
    writes past their time limit on a busy machine): records are upserted by external id and a
    file sent again with the same bytes is the same version, so what is sent twice is stored
    once."""
    for attempt in range(1, POST_TRIES + 1):
        response = call(admin, "POST", path, timeout=300, **kwargs)
        if response.status_code != 503 or attempt == POST_TRIES:
            break
        time.sleep(float(response.headers.get("Retry-After", "5")))
    response.raise_for_status()
    return response


def submit_records(admin: httpx.Client, kb: str, corpus: dict[str, str]) -> dict[str, str]:
    """Upserts the corpus as records; returns document id -> page id."""
    pages: dict[str, str] = {}
    items = list(corpus.items())
    for start in range(0, len(items), BATCH):
        records = [
            {"external_id": page, "content": text} for page, text in items[start : start + BATCH]
        ]
        path = f"/api/v1/knowledge-bases/{kb}/documents/batch"
        response = _post(admin, path, json={"records": records})
        for result in response.json()["results"]:
            pages[result["document_id"]] = result["external_id"]
    return pages


def submit_files(admin: httpx.Client, kb: str, files: list[tuple[Path, str]]) -> None:
    """Uploads each file (`.gz` ones decompressed) under the name given."""
    for path, name in files:
        document = (name, read_document(path))
        _post(admin, f"/api/v1/knowledge-bases/{kb}/documents", files={"file": document})


def named(paths: list[str] | list[Path]) -> list[tuple[Path, str]]:
    """Files to upload under their own names, without `.gz`."""
    return [(Path(path), Path(path).name.removesuffix(".gz")) for path in paths]


def call(client: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """A request, tried again while the API cannot be reached (the stack's supervisor restarts
    an API that stops answering, which a long run on a loaded machine can see once)."""
    for attempt in range(1, RETRIES + 1):
        try:
            return client.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            if attempt == RETRIES:
                raise
            print(f"{method} {url}: {exc!r}; trying again in {RETRY_S} s")
            time.sleep(RETRY_S)
    raise AssertionError("unreachable")


def wait_indexed(admin: httpx.Client, kb: str) -> dict[str, int]:
    """Waits until nothing in the KB is in progress; raises if a document failed."""
    deadline = time.monotonic() + 3600
    documents = f"/api/v1/knowledge-bases/{kb}/documents"
    while time.monotonic() < deadline:
        busy = sum(
            len(call(admin, "GET", documents, params={"status": s, "limit": 1}).json()["items"])
            for s in IN_PROGRESS
        )
        if not busy:
            failed = call(admin, "GET", documents, params={"status": "failed"}).json()["items"]
            if failed:
                raise RuntimeError(
                    f"{len(failed)} document(s) failed: {failed[0]['filename']}: "
                    f"{failed[0]['parse_error']}"
                )
            body = call(admin, "GET", f"/api/v1/knowledge-bases/{kb}").json()
            return {"documents": int(body["document_count"]), "chunks": int(body["chunk_count"])}
        time.sleep(2)
    raise TimeoutError("the KB was not indexed within an hour")


def fusion_modes(specs: list[str]) -> dict[str, dict[str, Any]]:
    """The modes asked: the three retrieval modes with the service's defaults, then a hybrid
    one per `--fusions` entry (`METHOD[:VALUE]`, `FUSION_NAME`), by name."""
    modes: dict[str, dict[str, Any]] = {mode: {"retrieval_mode": mode} for mode in MODES}
    for spec in specs:
        match = FUSION_NAME.match(spec)
        if match is None:
            fail(
                f"--fusions {spec!r}: expected convex, dbsf, zscore or gated, each with an "
                "optional :<dense weight>, or rrf with an optional :<k>"
            )
            continue
        method, value = match.groups()
        knob: dict[str, Any] = {}
        if value is not None:
            knob = {"rrf_k": int(value)} if method == "rrf" else {"dense_weight": float(value)}
        modes[f"hybrid_{method}{value or ''}"] = {
            "retrieval_mode": "hybrid",
            "fusion": method,
            **knob,
        }
    return modes


def search(
    client: httpx.Client, kb: str, query: str, mode: dict[str, Any], top_k: int
) -> list[Hit]:
    """The hits of one tenant search in a mode (`fusion_modes`)."""
    response = call(
        client,
        "POST",
        "/api/v1/internal/knowledge/search",
        json={
            "tenant_id": "default",
            "kb_ids": [kb],
            "query": query,
            "top_k": top_k,
            "score_threshold": 0.0,
            **mode,
        },
    )
    response.raise_for_status()
    hits: list[Hit] = response.json()["hits"]
    return hits


def judged(case: Case, hits: list[Hit]) -> tuple[list[bool], list[bool]]:
    """Per ranked unit, whether it is relevant; and per hit."""
    per_hit = [case.judge(hit) for hit in hits]
    if case.unit is None:
        return per_hit, per_hit
    units: dict[str, bool] = {}
    for hit, flag in zip(hits, per_hit, strict=True):
        unit = case.unit(hit)
        units[unit] = units.get(unit, False) or flag
    return list(units.values()), per_hit


def trec_check(flags: dict[str, list[bool]]) -> dict[str, float]:
    """nDCG@10 and recall@10 of known-item rankings by trec_eval (a cross-check)."""
    qrels = {qid: {"relevant": 1} for qid in flags}
    run = {
        qid: {
            ("relevant" if flag else f"other-{rank}"): float(len(ranking) - rank)
            for rank, flag in enumerate(known_item(ranking))
        }
        for qid, ranking in flags.items()
    }
    scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10"}).evaluate(run)
    return {
        "ndcg10": sum(s["ndcg_cut_10"] for s in scores.values()) / len(flags),
        "recall10": sum(s["recall_10"] for s in scores.values()) / len(flags),
    }


def shown(
    hits: list[Hit], flags: list[bool], pages: dict[str, str], text: bool = True
) -> list[dict[str, Any]]:
    """An answer's hits as the dump keeps them. With `text`: the first characters, the
    service's rationale, and `copy_of`, the rank of a better hit of another document whose
    text is near-identical (the judge's similarity reaches its threshold)."""
    prints = [Fingerprint.of(hit["chunk_text"]) for hit in hits] if text else []
    kept = []
    for rank, (hit, relevant) in enumerate(zip(hits, flags, strict=True)):
        entry: dict[str, Any] = {
            "document_id": hit["document_id"],
            "source": pages.get(hit["document_id"], hit["source_name"]),
            "chunk_index": hit["chunk_index"],
            "score": hit["score"],
            "relevant": relevant,
        }
        if text:
            entry["text"] = hit["chunk_text"][:TEXT_CHARS]
            entry["rationale"] = hit["retrieval_rationale"]
            copy_of = next(
                (
                    better + 1
                    for better in range(rank)
                    if hits[better]["document_id"] != hit["document_id"]
                    and prints[rank].similarity(prints[better]) >= PASSAGE_THRESHOLD
                ),
                None,
            )
            if copy_of:
                entry["copy_of"] = copy_of
        kept.append(entry)
    return kept


def evaluate(
    client: httpx.Client,
    run: Run,
    pages: dict[str, str],
    dump: list[dict[str, Any]] | None,
    modes: dict[str, dict[str, Any]],
) -> Figures:
    """Asks every query of a run in every mode; returns the means and the misses."""
    figures = Figures({}, {}, {})
    for mode, body in modes.items():
        started = time.perf_counter()
        per_query: dict[str, dict[str, float]] = {}
        rankings: dict[str, list[bool]] = {}
        for case in run.cases:
            answers = {k: search(client, run.kb, case.text, body, k) for k in (10, 4)}
            flags10, hit_flags10 = judged(case, answers[10])
            flags4, hit_flags4 = judged(case, answers[4])
            rankings[case.qid] = flags10
            top10, top4 = known_item(flags10), known_item(flags4)
            per_query[case.qid] = {
                "recall4": recall_at(top4, 4),
                "recall10": recall_at(top10, 10),
                "mrr10": reciprocal_rank(top10, 10),
                "ndcg10": ndcg_at(top10, 10),
            }
            if dump is not None:
                deep = search(client, run.kb, case.text, body, DEEP)
                deep_flags = [case.judge(hit) for hit in deep]
                dump.append(
                    {
                        "set": run.name,
                        "kb": run.kb,
                        "qid": case.qid,
                        "query": case.text,
                        "relevant": case.relevant,
                        "mode": mode,
                        "first_relevant": {
                            "4": first_relevant(flags4),
                            "10": first_relevant(flags10),
                            str(DEEP): first_relevant(deep_flags),
                        },
                        "hits4": shown(answers[4], hit_flags4, pages),
                        "hits10": shown(answers[10], hit_flags10, pages),
                        f"hits{DEEP}": shown(deep, deep_flags, pages, text=False),
                    }
                )
        means = {
            metric: mean([scores[metric] for scores in per_query.values()]) for metric in METRICS
        }
        for metric, value in trec_check(rankings).items():
            if abs(value - means[metric]) > 1e-9:
                raise AssertionError(f"{run.name} {mode} {metric}: {means[metric]} vs {value}")
        took = (time.perf_counter() - started) / len(run.cases) * 1000
        figures.means[mode] = means
        figures.per_query[mode] = per_query
        figures.misses4[mode] = [qid for qid, scores in per_query.items() if not scores["recall4"]]
        print(
            f"{run.name} [{mode}]: recall@4 {means['recall4']:.4f}, "
            f"recall@10 {means['recall10']:.4f}, MRR@10 {means['mrr10']:.4f}, "
            f"nDCG@10 {means['ndcg10']:.4f} ({len(run.cases)} queries, {took:.0f} ms/query)"
        )
    return figures


def spread(name: str, figures: Figures) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """How sure a set's figures are: each mode's 95% bootstrap interval per metric
    (`<set>/<mode>/<metric>`), and each mode against dense, and each `--fusions` variant
    against the default hybrid, paired question by question (`<set>: <a> vs <b>`)."""
    intervals: dict[str, list[float]] = {}
    for mode, scores in figures.per_query.items():
        for metric in METRICS:
            low, high = bootstrap_interval([s[metric] for s in scores.values()])
            intervals[f"{name}/{mode}/{metric}"] = [round(low, 4), round(high, 4)]
    pairs = [(mode, "dense") for mode in figures.per_query if mode != "dense"]
    pairs += [(mode, "hybrid") for mode in figures.per_query if mode.startswith("hybrid_")]
    paired: dict[str, Any] = {}
    for a, b in pairs:
        if b not in figures.per_query:
            continue
        paired[f"{name}: {a} vs {b}"] = {
            metric: compare(
                {q: s[metric] for q, s in figures.per_query[a].items()},
                {q: s[metric] for q, s in figures.per_query[b].items()},
            ).as_json()
            for metric in METRICS
        }
    return intervals, paired


def described(prefix: str, figures: Figures, results: dict[str, Any]) -> None:
    """Adds a set's means, intervals and paired comparisons to the results."""
    results.update(keyed(prefix, figures))
    intervals, paired = spread(prefix.rstrip("_") or "manpages", figures)
    results.setdefault("intervals", {}).update(intervals)
    results.setdefault("paired", {}).update(paired)
    for comparison, metrics in paired.items():
        print(
            f"{comparison}: "
            + ", ".join(
                f"{metric} {p['difference']:+.4f} ({p['wins']} won, {p['losses']} lost, "
                f"p={p['p_value']:.3f}{', significant' if p['significant'] else ''})"
                for metric, p in metrics.items()
            )
        )


def keyed(prefix: str, figures: Figures) -> dict[str, float]:
    """The figures as flat JSON keys: `{prefix}{metric}_{mode}`."""
    return {
        f"{prefix}{metric}_{mode}": round(means[metric], 4)
        for mode, means in figures.means.items()
        for metric in METRICS
    }


def main() -> None:
    """Runs the benchmark and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality")
    parser.add_argument("--sets", nargs="+", choices=ALL_SETS, default=list(SETS))
    parser.add_argument(
        "--tiny", action="store_true", help="the fixtures set alone (what `make test` runs)"
    )
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval/manpages.json"))
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument("--dump", type=Path, help="write every ranking to this JSON file")
    parser.add_argument(
        "--fusions",
        nargs="*",
        default=[],
        metavar="METHOD:VALUE",
        help="more hybrid configurations to compare: convex, dbsf, zscore, gated (each with an "
        "optional :<dense weight>; alone, the weight per query), rrf (optional :<k>)",
    )
    add_results_option(parser)
    args = parser.parse_args()
    modes = fusion_modes(args.fusions)
    sets = {"fixtures"} if args.tiny else set(args.sets)
    begun = time.time()

    manpages: dict[str, Any] = {}
    if sets & {"manpages", "exact"}:
        if not args.eval.is_file():
            fail(f"{args.eval} not found (the man-page corpus, ../shared/eval/manpages.json)")
        manpages = json.loads(args.eval.read_text())
    multiformat = (
        load_documents_set(args.eval_dir / "multiformat.json") if "multiformat" in sets else {}
    )
    paraphrase = (
        load_documents_set(args.eval_dir / "paraphrase.json") if "paraphrase" in sets else {}
    )
    exact: dict[str, Any] = {}
    if "exact" in sets:
        exact = json.loads((args.eval_dir / "exact_terms.json").read_text(encoding="utf-8"))
        if sha256(args.eval.read_bytes()) != exact["corpus"]["sha256"]:
            fail(f"{args.eval} is not the corpus the exact-term set was built from; rebuild it")

    results: dict[str, Any] = {}
    dump: list[dict[str, Any]] | None = [] if args.dump else None
    # The man pages come in as records, through the records worker.
    stages = RECORD_STAGES if manpages else FILE_STAGES
    announce(STACK_SETTINGS)
    with (
        tempfile.TemporaryDirectory(prefix="ragline-quality-") as tmp,
        bench_stack(Path(tmp), TOKEN, SECRET, STACK_SETTINGS, stages) as (_, pipeline),
    ):
        admin = httpx.Client(
            base_url=pipeline.api_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        )
        client = httpx.Client(
            base_url=pipeline.api_url, headers={"X-Internal-Secret": SECRET}, timeout=60
        )
        kbs: dict[str, str] = {}
        pages: dict[str, str] = {}
        started = time.time()
        # The man pages and every format go in together; the single copy follows, so that its
        # chunks find their vectors in the embedding cache.
        if manpages:
            kbs["manpages"] = create_kb(admin, "man pages")
            pages = submit_records(admin, kbs["manpages"], manpages["corpus"])
        if "fixtures" in sets:
            kbs["fixtures"] = create_kb(admin, "fixtures")
            submit_files(admin, kbs["fixtures"], named(fixture_documents()))
        if multiformat:
            kbs["all_formats"] = create_kb(admin, "multi-format: all_formats")
            submit_files(admin, kbs["all_formats"], named(multiformat["kbs"]["all_formats"]))
        sizes = {name: wait_indexed(admin, kb) for name, kb in kbs.items()}
        # These share documents with the every-format KB, whose vectors are cached by now.
        later: dict[str, list[tuple[Path, str]]] = {}
        if multiformat:
            later["one_copy"] = named(multiformat["kbs"]["one_copy"])
        if paraphrase:
            later["paraphrase"] = [
                (Path(d["path"]), d["upload_name"]) for d in paraphrase["documents"]
            ]
        for name, files in later.items():
            kbs.setdefault(name, create_kb(admin, f"quality: {name}"))
            submit_files(admin, kbs[name], files)
        for name in later:
            sizes[name] = wait_indexed(admin, kbs[name])
        ingest_s = time.time() - started
        for name, size in sizes.items():
            print(f"KB {name}: {size['documents']} documents, {size['chunks']} chunks")
        print(f"ingested in {ingest_s:.0f} s")
        results["ingest_s"] = round(ingest_s)
        results["kbs"] = sizes

        if "manpages" in sets:
            run = Run("manpages", kbs["manpages"], manpage_cases(manpages, pages))
            described("", evaluate(client, run, pages, dump, modes), results)
        if "fixtures" in sets:
            run = Run("fixtures", kbs["fixtures"], fixture_cases())
            described("fixtures_", evaluate(client, run, pages, dump, modes), results)
            results["fixtures_queries"] = len(run.cases)
        if "multiformat" in sets:
            cases = multiformat_cases(multiformat)
            for name, prefix in (
                ("all_formats", "multiformat_"),
                ("one_copy", "multiformat_one_copy_"),
            ):
                run = Run(f"multiformat/{name}", kbs[name], cases)
                described(prefix, evaluate(client, run, pages, dump, modes), results)
            results["multiformat_queries"] = len(cases)
        if "exact" in sets:
            run = Run("exact", kbs["manpages"], exact_cases(exact, pages))
            figures = evaluate(client, run, pages, dump, modes)
            described("exact_", figures, results)
            missed = figures.misses4["hybrid"]
            results["exact_queries"] = len(run.cases)
            results["exact_misses_hybrid_top4"] = len(missed)
            for style in ("bare", "words"):
                results[f"exact_misses_hybrid_top4_{style}"] = sum(
                    1 for qid in missed if exact["queries"][qid]["style"] == style
                )
        if "paraphrase" in sets:
            run = Run("paraphrase", kbs["paraphrase"], paraphrase_cases(paraphrase))
            figures = evaluate(client, run, pages, dump, modes)
            described("paraphrase_", figures, results)
            questions = paraphrase["questions"]
            corpus_of = {qid: q["corpus"] for qid, q in questions.items()}
            parts = {
                **{split: {q for q, v in questions.items() if v["split"] == split}
                   for split in ("tune", "test")},
                **{corpus: {q for q, c in corpus_of.items() if c == corpus}
                   for corpus in sorted(set(corpus_of.values()))},
            }  # fmt: skip
            for name, chosen in parts.items():
                part = figures.subset(chosen)
                for mode, means in part.means.items():
                    print(
                        f"paraphrase/{name} [{mode}]: recall@4 {means['recall4']:.4f}, "
                        f"recall@10 {means['recall10']:.4f}, MRR@10 {means['mrr10']:.4f}, "
                        f"nDCG@10 {means['ndcg10']:.4f}"
                    )
                described(f"paraphrase_{name}_", part, results)
                if name in ("tune", "test"):
                    results[f"paraphrase_{name}_misses4_hybrid"] = part.misses4["hybrid"]
            results["paraphrase_queries"] = len(questions)
            results["fusion_choice"] = fusion_choice(figures, corpus_of, parts["tune"])
    results["goals"] = goals(results, sets)
    results["total_s"] = round(time.time() - begun)
    for goal, met in results["goals"].items():
        print(f"goal {goal}: {'met' if met else 'NOT met'}")
    if dump is not None:
        args.dump.write_text(json.dumps(dump, ensure_ascii=False))
        print(f"rankings written to {args.dump}")
    print(json.dumps(results))
    # The fixtures set alone is the tiny run, however it was asked for.
    publish("quality", results, tiny=sets == {"fixtures"}, results_dir=args.results_dir)
    exit_if_broken(broken_figures(results))


def fusion_choice(figures: Figures, corpus_of: dict[str, str], tune: set[str]) -> dict[str, Any]:
    """Which hybrid configuration the paraphrase set chooses (`benchmarks.fusion_choice`):
    cross-validated across its corpora, each held out in turn, and on the tuning part alone,
    the choice the test part reports."""
    variants = [mode for mode in figures.per_query if mode.startswith("hybrid")]
    folds = cross_validated(figures.per_query, variants, corpus_of, list(METRICS))
    chosen = best_variant(figures.per_query, variants, tune)
    for fold in folds:
        print(
            f"fusion, {fold.held_out} held out: {fold.chosen} chosen on the others, "
            f"nDCG@10 {fold.figures['ndcg10']:.4f} (dense {fold.dense['ndcg10']:.4f})"
        )
    print(f"fusion chosen on the tuning part: {chosen}")
    return {
        "variants": variants,
        "chosen_on_tune": chosen,
        "cross_validated": [fold.as_json() for fold in folds],
    }


def goals(results: dict[str, Any], sets: set[str]) -> dict[str, bool]:
    """The issue's retrieval goals this run can judge, and whether each is met."""
    met: dict[str, bool] = {}
    if "manpages" in sets:
        met["manpages: ndcg10_hybrid >= 0.86"] = results["ndcg10_hybrid"] >= 0.86
    if "multiformat" in sets:
        hybrid = results["multiformat_recall4_hybrid"]
        met["multiformat: hybrid recall@4 with duplicates >= one copy alone"] = (
            hybrid >= results["multiformat_one_copy_recall4_hybrid"]
        )
        met["multiformat: hybrid recall@4 >= 0.98"] = hybrid >= 0.98
        met["multiformat: hybrid recall@4 with duplicates >= dense and sparse"] = hybrid >= max(
            results["multiformat_recall4_dense"], results["multiformat_recall4_sparse"]
        )
    if "paraphrase" in sets:
        hybrid = results["paraphrase_test_recall4_hybrid"]
        met["paraphrase: test hybrid recall@4 >= 0.80"] = hybrid >= 0.80
        met["paraphrase: test hybrid recall@4 >= dense + 0.03"] = (
            hybrid >= results["paraphrase_test_recall4_dense"] + 0.03
        )
        for metric in METRICS:
            met[f"paraphrase: test hybrid {metric} >= dense"] = (
                results[f"paraphrase_test_{metric}_hybrid"]
                >= results[f"paraphrase_test_{metric}_dense"]
            )
        against = results["paired"]["paraphrase_test: hybrid vs dense"]
        met["paraphrase: test hybrid has no significant loss to dense"] = not any(
            p["significant"] and p["difference"] < 0 for p in against.values()
        )
    if "exact" in sets:
        met["exact: hybrid MRR@10 >= sparse MRR@10"] = (
            results["exact_mrr10_hybrid"] >= results["exact_mrr10_sparse"]
        )
        met["exact: every identifier's chunk in the hybrid top 4"] = (
            results["exact_misses_hybrid_top4"] == 0
        )
        met["exact: hybrid MRR@10 = 1.0"] = results["exact_mrr10_hybrid"] >= 1.0
    return met


if __name__ == "__main__":
    main()
