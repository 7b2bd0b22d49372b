"""The search benchmark's stores: the real chunks they are made of, the vectors of those chunks
(cached on disk), the new texts the distinct store is topped up with, the keys the figures are
printed under and the goals they are judged by.

Pure apart from reading documents and the vector cache's file: no server, no model of its own
(the embedder is passed in).

Real chunks: documents are extracted and chunked by the pipeline's own code
(`workers.extract.extractors.extract`, `workers.chunk.chunking.chunk_document` with the
default chunking settings, `with_generic_context` for the prefix that is embedded with each
chunk), from

- the man-page corpus (`../shared/eval/manpages.json`), each page as the batch endpoint reads a
  record;
- the manuals of the quality benchmark's Debian packages (`make benchmark-documents`): the
  Debian Reference and the Debian Policy Manual as their HTML files, and the whole Python 3.11
  documentation as its HTML pages (indexes and the table of contents left out);
- the test fixtures' real PDFs and DOCX (`tests/fixtures`), which every clone has.

Texts that occur more than once among them are kept once.

Made chunks (the distinct store, where the real ones are too few): each is new text made of two
real chunks, A and B drawn at random: A's sentences up to a cut in its middle third, then B's
from a cut in its middle third on (sentences end at `.`, `!` or `?` before white space). Where
A or B has fewer than two sentences, A's words are shuffled and set as new sentences of 8 to
16 words instead. The made chunk's vector is the mix of its sources' real vectors, weighted by
the share of its characters each gave (A's alone for shuffled words), plus Gaussian noise of
`MADE_NOISE` per dimension, normalised; its context prefix is A's. A made text equal to any
text already in the store is drawn again, so no text is stored twice.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from benchmarks.build_paraphrase_set import POLICY_DIR, PYTHON_DIR, REFERENCE_DIR
from benchmarks.results import Goal
from infra.embedding.base import Embedder
from infra.mongo.embedding_cache import cache_key
from infra.settings.ingest import ChunkingSettings
from schemas.domain import ChunkRecord, Record
from workers.chunk.chunking import chunk_document
from workers.chunk.context import with_generic_context
from workers.extract.extractors import extract

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
# The fixtures with a text to chunk (the encrypted PDFs have none; crazyones.txt is the text of
# crazyones.pdf, and the .tex file the source of service-handbook.pdf).
FIXTURE_FILES = (
    "GeoBase_NHNC1_Data_Model_UML_EN.pdf",
    "Seige_of_Vicksburg_Sample_OCR.pdf",
    "crazyones.pdf",
    "indirect-rotation.pdf",
    "pdflatex-outline.pdf",
    "service-handbook.pdf",
    "blk-paras-and-tables.docx",
)
# Pages of the Python documentation that list other pages rather than say anything.
PYTHON_SKIPPED = re.compile(r"^(genindex.*|py-modindex|search|contents)\.html$")
MADE_NOISE = 0.01
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
EMBED_BATCH = 256
T = TypeVar("T")


@dataclass(frozen=True)
class SourceChunk:
    """A real chunk as the pipeline makes it, and the document it comes from."""

    document: str
    title: str
    record: ChunkRecord


def chunks_of(
    data: bytes, filename: str, document: str, chunking: ChunkingSettings
) -> list[SourceChunk]:
    """A document's chunks, with the generic context prefix the pipeline embeds them with."""
    extracted = extract(data, filename)
    records, _ = chunk_document(extracted, chunking.chunk_size_chars, chunking.chunk_overlap_chars)
    return [
        SourceChunk(document, extracted.title, record)
        for record in with_generic_context(extracted.title, records)
    ]


def manpage_chunks(corpus: dict[str, str], chunking: ChunkingSettings) -> list[SourceChunk]:
    """The man pages' chunks, each page read as the batch endpoint reads a record."""
    chunks: list[SourceChunk] = []
    for page, text in corpus.items():
        markdown = Record(content=text).as_markdown().encode()
        chunks += chunks_of(markdown, "page.md", f"man:{page}", chunking)
    return chunks


def manual_files() -> dict[str, list[Path]]:
    """The manuals' files this machine has, by Debian package (empty lists where it is not
    installed)."""
    policy = POLICY_DIR / "policy.html"
    return {
        "debian-reference-en": sorted(REFERENCE_DIR.glob("*.en.html")),
        "debian-policy": sorted(
            p for p in policy.glob("*.html") if p.name not in ("genindex.html", "search.html")
        ),
        "python3.11-doc": sorted(
            p
            for p in PYTHON_DIR.rglob("*.html")
            if "_sources" not in p.parts and not PYTHON_SKIPPED.match(p.name)
        ),
    }


def file_chunks(paths: Iterable[Path], chunking: ChunkingSettings) -> list[SourceChunk]:
    """The chunks of files, read as uploads."""
    chunks: list[SourceChunk] = []
    for path in paths:
        chunks += chunks_of(path.read_bytes(), path.name, str(path), chunking)
    return chunks


def distinct_texts(chunks: Iterable[SourceChunk]) -> list[SourceChunk]:
    """The chunks with each text once (the first chunk holding it)."""
    seen: set[int] = set()
    kept = []
    for chunk in chunks:
        key = text_hash(chunk.record.text)
        if key not in seen:
            seen.add(key)
            kept.append(chunk)
    return kept


def spread_sample(items: Sequence[T], limit: int | None) -> list[T]:
    """At most `limit` of the items, taken evenly across them (so every source is in a small
    sample of chunks), in their order."""
    if limit is None or limit >= len(items):
        return list(items)
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def text_hash(text: str) -> int:
    """A 64-bit hash of a text (sets of a million texts stay small)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class VectorCache:
    """Vectors of texts under one model, in one file under `directory`, keyed as the product's
    embedding cache keys them (SHA-256 of the model id and the text: `cache_key`)."""

    def __init__(self, directory: Path, model_id: str) -> None:
        safe = re.sub(r"[^\w.@-]+", "_", model_id)
        self.path = directory / f"vectors-{safe}.npz"
        self.model_id = model_id
        self._rows: dict[bytes, int] = {}
        self._vectors: list[NDArray[np.float32]] = []
        self._dirty = False
        if self.path.is_file():
            with np.load(self.path) as stored:
                keys, vectors = stored["keys"], stored["vectors"].astype(np.float32)
            # One row of 32 bytes per key (numpy's byte strings would drop trailing zeros).
            self._rows = {key.tobytes(): row for row, key in enumerate(keys)}
            self._vectors = list(vectors)

    def __len__(self) -> int:
        return len(self._rows)

    def key(self, text: str) -> bytes:
        """The cache key of a text."""
        return bytes.fromhex(cache_key(self.model_id, text))

    def get(self, text: str) -> NDArray[np.float32] | None:
        """A text's cached vector, if any."""
        row = self._rows.get(self.key(text))
        return None if row is None else self._vectors[row]

    def put(self, texts: Sequence[str], vectors: NDArray[np.float32]) -> None:
        """Keeps the texts' vectors (in memory until `save`)."""
        for text, vector in zip(texts, vectors, strict=True):
            key = self.key(text)
            if key not in self._rows:
                self._rows[key] = len(self._vectors)
                self._vectors.append(np.asarray(vector, dtype=np.float32))
                self._dirty = True

    def save(self) -> None:
        """Writes the file (atomically: a run stopped while saving keeps the last one)."""
        if not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ordered = sorted(self._rows, key=self._rows.__getitem__)
        keys = np.frombuffer(b"".join(ordered), dtype=np.uint8).reshape(len(ordered), 32)
        partial = self.path.with_name(self.path.name + ".partial.npz")
        np.savez(partial, keys=keys, vectors=np.stack(self._vectors))
        os.replace(partial, self.path)
        self._dirty = False


def embed_cached(
    texts: Sequence[str],
    cache: VectorCache,
    load: Callable[[], Embedder],
    report: Callable[[str], None] = print,
) -> NDArray[np.float32]:
    """The texts' document vectors: from the cache, the rest embedded by the embedder `load`
    makes (only if some are missing) and saved to the cache every batch, so a stopped run keeps
    what it embedded."""
    found: dict[int, NDArray[np.float32]] = {}
    missing = []
    for row, text in enumerate(texts):
        cached = cache.get(text)
        if cached is None:
            missing.append(row)
        else:
            found[row] = cached
    report(f"{len(found)} of {len(texts)} chunks' vectors found in {cache.path}")
    if missing:
        embedder = load()
        started = time.perf_counter()
        for done in range(0, len(missing), EMBED_BATCH):
            rows = missing[done : done + EMBED_BATCH]
            batch = [texts[row] for row in rows]
            vectors = embedder.embed_documents(batch)
            cache.put(batch, vectors)
            cache.save()
            found.update(zip(rows, vectors, strict=True))
            count = done + len(rows)
            rate = count / (time.perf_counter() - started)
            report(f"embedded {count} of {len(missing)} chunks ({rate:.1f} chunks/s)")
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([found[row] for row in range(len(texts))]).astype(np.float32)


def sentences(text: str) -> list[str]:
    """A text's sentences (split after `.`, `!` or `?` followed by white space)."""
    return [part for part in SENTENCE_END.split(text.strip()) if part]


def reordered(text: str, rng: random.Random) -> str:
    """The text's words, shuffled and set as new sentences of 8 to 16 words."""
    words = text.split()
    rng.shuffle(words)
    made = []
    while words:
        size = rng.randint(8, 16)
        sentence, words = words[:size], words[size:]
        first = sentence[0]
        made.append(" ".join([first[:1].upper() + first[1:], *sentence[1:]]).rstrip(".") + ".")
    return " ".join(made)


@dataclass(frozen=True)
class MadeChunk:
    """A new text of the distinct store, with its vector and the real chunks it came from."""

    text: str
    vector: NDArray[np.float32]
    first: int
    second: int | None


class TextMaker:
    """Makes new texts from real chunks (the module's docstring says how), none equal to a text
    it has seen: the real chunks' and every text it made before."""

    def __init__(
        self,
        texts: Sequence[str],
        vectors: NDArray[np.float32],
        seed: int = 11,
        noise: float = MADE_NOISE,
    ) -> None:
        if len(texts) < 2:
            raise ValueError("new texts need at least two real chunks")
        self._texts = texts
        self._sentences = [sentences(text) for text in texts]
        self._vectors = vectors
        self._seen = {text_hash(text) for text in texts}
        self._rng = random.Random(seed)
        self._noise = np.random.default_rng(seed)
        self._scale = noise
        self.redrawn = 0

    def make(self) -> MadeChunk:
        """One new text."""
        rng = self._rng
        while True:
            first, second = rng.randrange(len(self._texts)), rng.randrange(len(self._texts))
            if first == second:
                continue
            head_of, tail_of = self._sentences[first], self._sentences[second]
            made: tuple[str, NDArray[np.float32], int | None]
            if len(head_of) >= 2 and len(tail_of) >= 2:
                head = " ".join(head_of[: _middle_cut(len(head_of), rng)])
                tail = " ".join(tail_of[_middle_cut(len(tail_of), rng) :])
                text = f"{head} {tail}"
                share = len(head) / len(text)
                mix = share * self._vectors[first] + (1 - share) * self._vectors[second]
                made = (text, mix, second)
            else:
                made = (reordered(self._texts[first], rng), self._vectors[first], None)
            key = text_hash(made[0])
            if key in self._seen:
                self.redrawn += 1
                continue
            self._seen.add(key)
            noisy = made[1] + self._noise.normal(scale=self._scale, size=made[1].shape)
            vector = (noisy / np.linalg.norm(noisy)).astype(np.float32)
            return MadeChunk(made[0], vector, first, made[2])


def _middle_cut(count: int, rng: random.Random) -> int:
    """A cut between sentences in the middle third of `count` (1 .. count - 1)."""
    return rng.randint(max(1, count // 3), max(1, min(count - 1, (2 * count) // 3)))


# -- the figures' keys --------------------------------------------------------------------

DUPLICATES, DISTINCT = "duplicates", "distinct"
STORES = (DUPLICATES, DISTINCT)
REFERENCE_CHUNKS = 100_000
LARGE_CHUNKS = 1_000_000


def size_suffix(chunks: int) -> str:
    """The keys' suffix of a store size: none for 100,000 (the reference), `_1m` for a million,
    else `_<n>k`."""
    if chunks == REFERENCE_CHUNKS:
        return ""
    if chunks % LARGE_CHUNKS == 0:
        return f"_{chunks // LARGE_CHUNKS}m"
    return f"_{chunks // 1000}k"


def suffix(store: str, chunks: int) -> str:
    """The keys' suffix of one store at one size. Below a million chunks the duplicate-heavy
    store's keys carry no store name (`p95_ms_uncached_c1`) and the distinct store's end in
    `_distinct`; from a million on the distinct store is the reference (`p95_ms_uncached_c1_1m`)
    and the duplicate-heavy one's keys end in `_duplicates_1m`."""
    reference = DISTINCT if chunks >= LARGE_CHUNKS else DUPLICATES
    return ("" if store == reference else f"_{store}") + size_suffix(chunks)


def _both(key: str, bound: float, at_most: bool) -> list[Goal]:
    return [Goal(f"{key}{suffix(store, REFERENCE_CHUNKS)}", bound, at_most) for store in STORES]


# The goals: both stores at 100,000 chunks for one query at a time, under load and from the
# cache; the distinct store at a million, for one query at a time and under load.
GOALS = (
    Goal("p50_ms_uncached_c1_distinct", 10, at_most=True),
    Goal("p95_ms_uncached_c1_distinct", 15, at_most=True),
    Goal("p95_ms_uncached_c1", 15, at_most=True),
    *_both("ratio_uncached_c32_to_encoder", 0.8, at_most=False),
    *_both("p95_ms_uncached_c32", 400, at_most=True),
    *_both("p95_ms_cached_c1", 1.5, at_most=True),
    *_both("rps_cached_c32", 1000, at_most=False),
    Goal("ratio_uncached_c32_to_encoder_1m", 0.5, at_most=False),
    Goal("p95_ms_uncached_c1_1m", 35, at_most=True),
    Goal("api_peak_rss_mb_1m", 2000, at_most=True),
    Goal("recall_at_10_quantised_1m", 0.99, at_most=False),
)
# People's permission-filtered search (`--user-form`): at most a fifth slower at p95 than the
# same search without the filter, as a bot's, at the same size.
USER_FORM_GOALS = (
    Goal("ratio_p95_user_to_unfiltered_dense", 1.2, at_most=True),
    Goal("ratio_p95_user_to_unfiltered_hybrid", 1.2, at_most=True),
)
