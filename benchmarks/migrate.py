"""Changing the embedding model on a store of real chunks: how fast the new generation is built,
against the embed stage's own rate with the same model, and what it costs searches meanwhile.

Starts its own stack (the API, which holds the embedded store and builds the new generation,
with the relay, records, extract, chunk and embed workers) on the hashed embedder, fills it
with `--records` connector records, each a different man page (`../shared/eval/manpages.json`;
where it is absent, the paraphrase set's answers), then:

1. **Before**: searches at `--search-rate` a second for `--before-s`, each twelve words of one
   record that no other record holds, with its number, whose answer's first three passages
   must hold that record. Each probe is asked once first, and only those the live model
   answers right are kept (`probes`; `probes_wrong_before` counts the others): a wrong answer
   later is the migration's, not the model's.
2. **During**: the same load while a migration to `--target` (the packaged local model by
   default: the realistic cost) builds the new generation, until searches switch to it. Each
   answer says which generation answered (`metrics.generation`); each must be right.
3. **The embed stage with the new model**, now live: as many records again (other texts of
   the corpus), after one that has the embed worker load the model; its rate is the chunks
   indexed a second from the batch's post to the last one indexed (the embed stage bounds it).
4. **The model alone**: the first chunks embedded by the target model in this process, in
   the embed stage's batch size, after the stack has stopped.

It reports `copy_chunks_per_s` (the build's copy: chunks embedded and written a second, from
the generation's own progress), `embed_stage_chunks_per_s`, `migration_ratio_to_embed` (the
first over the second), `model_alone_chunks_per_s`, `migration_ratio_to_model` (the copy
over the model alone), `hours_per_million_chunks` (the copy's time for a million chunks at
that rate, on this machine), `seconds_to_switch` (the whole build, its checks included),
`search_p50_ms_before`, `search_p95_ms_before`, `search_p50_ms_during`,
`search_p95_ms_during`, `search_p95_during_migration` (during over before), `searches`,
`wrong_answers` (a search whose record was not among its first three passages; by the
generation that answered, with samples), `mixed_generations` (an API answer from the old
generation after one from the new), `chunks_missing` (live chunks the new generation lacks at
the switch), `api_rss_mb_before` and `api_peak_rss_mb` (the API process, which holds both
models while it builds), `goals`. A run with a wrong answer, a mixed generation or a missing
chunk exits non-zero.

Run it alone (nothing else on the machine):

    .venv/bin/python -m benchmarks.migrate [--records 1400] [--search-rate 4] [--before-s 60]
    .venv/bin/python -m benchmarks.migrate --tiny   # 40 records, to the hashed embedder at 256

The tiny run (`make test`) migrates from the hashed embedder to the hashed embedder at another
vector size: it checks the mechanics; its figures say nothing of a model.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bulk import made_chunks, passages
from benchmarks.ingest import SECRET, TOKEN, model_alone, peak_rss_mb
from benchmarks.memory import process_tree_rss_mb
from benchmarks.results import add_results_option, report
from benchmarks.stack import RECORD_STAGES, TINY_SETTINGS, announce, bench_stack
from devstack.launcher import Pipeline
from infra.embedding.factory import build_embedder
from infra.settings.embedding import EmbeddingSettings
from schemas.domain import Record
from schemas.index_generations import ModelIdentity

# The live generation's model: the hashed embedder fills the store fast; the target's model
# is what the build costs.
# Its records come in batches, and its probes are first tried four at a time, far above a
# tenant's default rates of documents and searches (which would answer 429).
STACK_SETTINGS = {
    **TINY_SETTINGS,
    "RAGLINE_LIMITS__UPLOADS_PER_MINUTE": "1000000",
    "RAGLINE_LIMITS__SEARCHES_PER_SECOND": "1000000",
}
TARGET = ModelIdentity(provider="local", dimensions=384)
TINY_TARGET = ModelIdentity(provider="hashed", dimensions=256)
TINY = {"records": 40, "before_s": 5.0, "search_rate": 4.0}
GOALS = {"migration_ratio_to_embed": (">=", 0.9), "search_p95_during_migration": ("<=", 1.5)}
SEARCH_TIMEOUT_S = 30.0


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile by the nearest-rank method; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * q / 100) - 1)]


class Load:
    """Searches at a fixed rate, each for one record's sentence; every answer is kept."""

    def __init__(self, http: httpx.AsyncClient, kb_id: str, probes: list[tuple[str, str]]) -> None:
        self._http = http
        self._kb_id = kb_id
        self._probes = probes
        self.answers: list[
            tuple[float, float, int | None, bool]
        ] = []  # sent, ms, generation, right
        self.wrong: list[dict[str, Any]] = []  # a few wrong answers, for the report

    async def run(self, rate: float, stop: asyncio.Event) -> None:
        """Sends a search every 1/rate s until `stop`, never waiting for one to answer."""
        tasks: set[asyncio.Task[bool]] = set()
        started, n = time.monotonic(), 0
        while not stop.is_set():
            task = asyncio.create_task(self.search(self._probes[n % len(self._probes)]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            n += 1
            await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
        await asyncio.gather(*tasks)

    async def search(self, probe: tuple[str, str]) -> bool:
        """One search for the probe's sentence; whether its record was answered."""
        document_id, sentence = probe
        sent = time.monotonic()
        response = await self._http.post(
            "/api/v1/internal/knowledge/search",
            json={"tenant_id": "default", "kb_ids": [self._kb_id], "query": sentence, "top_k": 3},
            headers={"X-Internal-Secret": SECRET},
            timeout=SEARCH_TIMEOUT_S,
        )
        ms = (time.monotonic() - sent) * 1000
        body = response.json() if response.status_code == 200 else {"hits": [], "metrics": {}}
        right = document_id in {hit["document_id"] for hit in body["hits"]}
        self.answers.append((sent, ms, body["metrics"].get("generation"), right))
        if not right and len(self.wrong) < 5:
            self.wrong.append(
                {
                    "status": response.status_code,
                    "generation": body["metrics"].get("generation"),
                    "query": sentence,
                    "expected": document_id,
                    "got": [hit["document_id"] for hit in body["hits"]],
                }
            )
        return right


def latencies(answers: list[tuple[float, float, int | None, bool]]) -> dict[str, float | None]:
    """p50 and p95 of the answers' milliseconds."""
    ms = [a[1] for a in answers]
    return {"p50": percentile(ms, 50), "p95": percentile(ms, 95)}


def mixed(answers: list[tuple[float, float, int | None, bool]]) -> int:
    """Answers from an older generation sent after one from a newer one had been received."""
    newest, count = 0, 0
    for _, _, generation, _ in sorted(answers, key=lambda a: a[0] + a[1] / 1000):
        if generation is None:
            continue
        if generation < newest:
            count += 1
        newest = max(newest, generation)
    return count


async def fill(
    http: httpx.AsyncClient, records: int, seed: int, texts: list[str], name: str = "migration"
) -> tuple[str, list[tuple[str, str]], list[str]]:
    """A KB of `records` records of the texts; returns its id, per record one of its
    sentences (a search for it must find that record first), and the chunks' texts as the
    pipeline makes them."""
    kb = (await http.post("/api/v1/knowledge-bases", json={"name": name})).json()["id"]
    rng = random.Random(seed)
    if records > len(texts):
        raise SystemExit(f"--records {records}: the corpus holds {len(texts)} distinct texts")
    # Distinct texts: a record's sentence is in no other record.
    chosen = rng.sample(texts, records)
    made = [
        Record(external_id=f"rec-{n}", title=f"Record {n}", content=f"{text}\n\nRecord {n}.")
        for n, text in enumerate(chosen)
    ]
    body = [record.model_dump(mode="json", exclude_none=True) for record in made]
    for start in range(0, len(body), 500):
        answer = await http.post(
            f"/api/v1/knowledge-bases/{kb}/documents/batch",
            json={"records": body[start : start + 500]},
            timeout=300,
        )
        answer.raise_for_status()
    async with asyncio.timeout(3600):
        while True:
            listed = await _documents(http, kb)
            if len(listed) >= records and all(
                d["parse_status"] in ("indexed", "failed") for d in listed
            ):
                break
            await asyncio.sleep(1.0)
    ids = {d["external_id"]: d["id"] for d in listed if d["parse_status"] == "indexed"}
    probes = []
    for n, text in enumerate(chosen):
        document_id = ids.get(f"rec-{n}")
        window = distinct_window(text, [t for m, t in enumerate(chosen) if m != n], rng)
        if document_id and window:
            # The record's own number too, to tell apart records whose passages differ little.
            probes.append((document_id, f"{window} record {n}"))
    return kb, probes, [chunk for record in made for chunk in made_chunks(record)]


def distinct_window(text: str, others: list[str], rng: random.Random, tries: int = 20) -> str:
    """Twelve words in a row of `text` that no other text holds ("" if none is found in
    `tries`): man pages share boilerplate (licences, "read standard input"), and a sentence
    of it is no record's own."""
    words = text.split()
    if len(words) < 12:
        return ""
    for _ in range(tries):
        at = rng.randrange(0, len(words) - 11)
        window = " ".join(words[at : at + 12])
        if not any(window in other for other in others):
            return window
    return ""


async def _documents(http: httpx.AsyncClient, kb: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": 200, **({"cursor": cursor} if cursor else {})}
        page = (await http.get(f"/api/v1/knowledge-bases/{kb}/documents", params=params)).json()
        found.extend(page["items"])
        cursor = page.get("next_cursor")
        if not cursor:
            return found


async def drive(
    pipeline: Pipeline, args: argparse.Namespace, target: ModelIdentity
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=16)
    async with httpx.AsyncClient(
        base_url=pipeline.api_url, headers=headers, timeout=120, limits=limits
    ) as http:
        kb, probes, chunk_texts = await fill(http, args.records, args.seed, passages(args.eval))
        chunks = (await http.get(f"/api/v1/knowledge-bases/{kb}")).json()["chunk_count"]
        print(f"filled: {args.records} records, {chunks} chunks", flush=True)
        (api,) = [p for p in pipeline.processes if p.name == "api"]
        trial = Load(http, kb, probes)
        few = asyncio.Semaphore(4)

        async def tried(probe: tuple[str, str]) -> bool:
            async with few:
                return await trial.search(probe)

        verdicts = await asyncio.gather(*(tried(probe) for probe in probes))
        kept_probes = [probe for probe, right in zip(probes, verdicts, strict=True) if right]
        print(f"probes: {len(kept_probes)} of {len(probes)} answered right before", flush=True)
        load = Load(http, kb, kept_probes)
        stop = asyncio.Event()
        searching = asyncio.create_task(load.run(args.search_rate, stop))
        await asyncio.sleep(args.before_s)
        rss_before = process_tree_rss_mb(api.pid)
        begun = time.monotonic()
        started = await http.post("/api/v1/generations", json=target.model_dump())
        if started.status_code != 202:
            raise SystemExit(f"the migration was not started: {started.status_code} {started.text}")
        number = started.json()["generation"]["number"]
        while True:
            generation = (await http.get(f"/api/v1/generations/{number}")).json()["generation"]
            if generation["state"] != "building":
                break
            await asyncio.sleep(0.5)
        switched = time.monotonic()
        await asyncio.sleep(2.0)  # searches go on against the new generation a little
        stop.set()
        await searching
        api_peak = peak_rss_mb(api.pid)
        kept = (await http.get(f"/api/v1/knowledge-bases/{kb}")).json()["chunk_count"]
        stage_rate = await embed_stage_rate(http, args)
    before = [a for a in load.answers if a[0] + a[1] / 1000 < begun]
    during = [a for a in load.answers if a[0] >= begun and a[0] + a[1] / 1000 <= switched]
    progress = generation["progress"]
    return {
        "state": generation["state"],
        "chunks": chunks,
        "copied": progress["done"],
        "copy_chunks_per_s": progress["rate_per_s"],
        "seconds_to_switch": round(switched - begun, 1),
        "check_passes": progress["check_pass"],
        "probes": len(kept_probes),
        "probes_wrong_before": len(probes) - len(kept_probes),
        "searches": len(load.answers),
        "searches_before": len(before),
        "searches_during": len(during),
        "wrong_answers": sum(not a[3] for a in load.answers),
        "wrong_answers_by_generation": dict(Counter(str(a[2]) for a in load.answers if not a[3])),
        "wrong_answer_samples": load.wrong,
        "mixed_generations": mixed(load.answers),
        "chunks_missing": max(0, chunks - kept),
        "before": latencies(before),
        "during": latencies(during),
        "api_rss_mb_before": round(rss_before, 1),
        "api_peak_rss_mb": api_peak,
        "embed_stage_chunks_per_s": stage_rate,
        "chunk_texts": chunk_texts,
    }


async def embed_stage_rate(http: httpx.AsyncClient, args: argparse.Namespace) -> float | None:
    """The embed stage's own rate with the new model, now live: as many records again (other
    texts of the corpus) through the pipeline, after one record has had the embed worker load
    the model; chunks indexed a second from the batch's post until the last is indexed. The
    embed stage is what bounds it (the other stages take milliseconds a record)."""
    texts = passages(args.eval)
    await fill(http, 1, args.seed + 1, texts, name="embed stage warm-up")
    began = time.monotonic()
    kb, _, _ = await fill(http, args.records, args.seed + 2, texts, name="embed stage")
    seconds = time.monotonic() - began
    chunks = (await http.get(f"/api/v1/knowledge-bases/{kb}")).json()["chunk_count"]
    print(f"embed stage: {chunks} chunks indexed in {seconds:.1f} s", flush=True)
    return round(chunks / seconds, 1) if seconds > 0 else None


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    target = TINY_TARGET if args.tiny else TARGET
    announce(STACK_SETTINGS)
    with bench_stack(work, TOKEN, SECRET, STACK_SETTINGS, RECORD_STAGES) as (_, pipeline):
        figures = asyncio.run(drive(pipeline, args, target))
    texts = figures.pop("chunk_texts")
    settings = EmbeddingSettings(
        provider=target.provider, model=target.model, dimensions=target.dimensions
    )
    embedder = build_embedder(settings)
    seconds = model_alone(texts, settings, embedder)
    embedder.close()
    alone = round(len(texts) / seconds, 1) if seconds else None
    before, during = figures.pop("before"), figures.pop("during")
    stage = figures["embed_stage_chunks_per_s"]
    ratio = round(figures["copy_chunks_per_s"] / stage, 3) if stage else None
    to_model = round(figures["copy_chunks_per_s"] / alone, 3) if alone else None
    slowdown = round(during["p95"] / before["p95"], 3) if before["p95"] and during["p95"] else None
    result = {
        **figures,
        "target": target.label,
        "model_alone_chunks_per_s": alone,
        "migration_ratio_to_embed": ratio,
        "migration_ratio_to_model": to_model,
        "hours_per_million_chunks": (
            round(1_000_000 / figures["copy_chunks_per_s"] / 3600, 2)
            if figures["copy_chunks_per_s"]
            else None
        ),
        "search_p50_ms_before": _ms(before["p50"]),
        "search_p95_ms_before": _ms(before["p95"]),
        "search_p50_ms_during": _ms(during["p50"]),
        "search_p95_ms_during": _ms(during["p95"]),
        "search_p95_during_migration": slowdown,
    }
    result["goals"] = {
        key: {
            "goal": f"{sign} {bound}",
            "figure": result[key],
            "met": _met(result[key], sign, bound),
        }
        for key, (sign, bound) in GOALS.items()
    }
    return result


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _met(figure: float | None, sign: str, bound: float) -> bool | None:
    if figure is None:
        return None
    return figure >= bound if sign == ">=" else figure <= bound


def data_problems(result: dict[str, Any]) -> list[str]:
    """What only a broken migration makes."""
    problems = []
    if result["state"] != "live":
        problems.append(f"the new generation ended {result['state']}, not live")
    for key in ("wrong_answers", "mixed_generations", "chunks_missing"):
        if result[key]:
            problems.append(f"{key}: {result[key]}")
    return problems


def main() -> None:
    """Runs the benchmark and prints its figures; the last line is JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.migrate")
    parser.add_argument("--records", type=int, default=1400)
    parser.add_argument("--search-rate", type=float, default=4.0, help="searches a second")
    parser.add_argument("--before-s", type=float, default=60.0, help="seconds of searches first")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--eval", type=Path, default=Path("../shared/eval/manpages.json"))
    parser.add_argument("--tiny", action="store_true", help="40 records: what `make test` runs")
    add_results_option(parser)
    args = parser.parse_args()
    if args.tiny:
        vars(args).update(TINY)
    with tempfile.TemporaryDirectory(prefix="ragline-migrate-") as tmp:
        result = run(args, Path(tmp))
    report("migrate", result, args, data_problems(result))


if __name__ == "__main__":
    main()
