"""Chunk contexts: the short prefix each chunk is embedded and sparse-indexed with.

Every chunk gets the generic prefix, made without a model from the document title, the chunk's
heading path and its page: `Debian Policy Manual > 4. Source packages > 4.9 Main building
script (page 12)`. With a context provider configured, a model's one or two sentences that
situate the chunk follow it on a second line. A call that fails or times out leaves the chunk
with the generic prefix alone, and the document is indexed as usual. Answers are cached by
chunk (`infra.mongo.context_cache`), so re-ingesting unchanged content, or replaying a batch, asks
the model nothing and gives the same contexts.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from infra.context.base import (
    ContextProvider,
    ContextRefused,
    ContextRequest,
    ContextTimedOut,
    build_prompt,
    context_key,
)
from infra.process.metrics import CONTEXT_REQUESTS, CONTEXT_TOKENS
from infra.settings.ingest import ContextualSettings
from schemas.domain import ChunkRecord

log = logging.getLogger(__name__)

# The generic prefix stays short: all-MiniLM-L6-v2 reads 256 tokens, and a chunk alone nearly
# fills them. 160 characters are about 35 tokens.
GENERIC_MAX_CHARS = 160
# One title or heading within it.
PART_MAX_CHARS = 80
PATH_SEPARATOR = " > "
ELISION = "…"
# Between the generic prefix and a model's sentences.
ANSWER_SEPARATOR = "\n"

_SPACE = re.compile(r"\s+")
_BLANK_LINES = re.compile(r"\n{3,}")


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at a word where one lies past the middle."""
    if len(text) <= limit:
        return text
    cut = text[: limit - len(ELISION)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.->") + ELISION


def generic_context(title: str, heading_path: Sequence[str], page: int | None = None) -> str:
    """The prefix made without a model: title and heading path, then the page; empty parts
    left out, a heading that repeats the one above it dropped, at most `GENERIC_MAX_CHARS`."""
    parts: list[str] = []
    for raw in (title, *heading_path):
        part = shorten(_SPACE.sub(" ", raw).strip(), PART_MAX_CHARS)
        if part and not (parts and part.casefold() == parts[-1].casefold()):
            parts.append(part)
    page_note = f"(page {page})" if page is not None else ""
    budget = GENERIC_MAX_CHARS - (len(page_note) + 1 if page_note else 0)
    path = PATH_SEPARATOR.join(parts)
    # Too long: the middle headings go first, keeping the title and the innermost heading.
    dropped = 0
    while len(path) > budget and len(parts) - dropped > 2:
        dropped += 1
        path = PATH_SEPARATOR.join([parts[0], ELISION, *parts[1 + dropped :]])
    path = shorten(path, budget)
    return " ".join(p for p in (path, page_note) if p)


def surroundings(chunks: Sequence[ChunkRecord], limit: int) -> list[tuple[str, str]]:
    """For each chunk, up to `limit` characters of the text before and after it, from the
    consecutive chunks given (their offsets place them in the document's text)."""
    if not chunks or limit <= 0:
        return [("", "") for _ in chunks]
    base = chunks[0].start
    pieces: list[str] = []
    cursor = base
    for chunk in chunks:
        if chunk.end <= cursor:
            continue
        if chunk.start >= cursor:
            # What lies between two chunks is whitespace the chunker trimmed.
            pieces.append("\n" * (chunk.start - cursor))
            pieces.append(chunk.text)
        else:
            pieces.append(chunk.text[cursor - chunk.start :])
        cursor = chunk.end
    text = "".join(pieces)
    out = []
    for chunk in chunks:
        start, end = chunk.start - base, chunk.end - base
        before = text[max(0, start - limit) : max(0, start)]
        after = text[max(0, end) : max(0, end) + limit]
        out.append((_tidy(before), _tidy(after)))
    return out


def _tidy(text: str) -> str:
    return _BLANK_LINES.sub("\n\n", text).strip()


def clean_answer(text: str, limit: int) -> str:
    """A model's answer on one line, without wrapping quotes, cut to `limit` characters (at a
    sentence end where one lies past the middle, else at a word)."""
    text = text.encode("utf-8", "ignore").decode("utf-8")
    text = _SPACE.sub(" ", text).strip().strip("\"'`“”").strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    sentence = cut.rfind(". ")
    if sentence > limit // 2:
        return cut[: sentence + 1]
    return shorten(text, limit)


def combine(generic: str, answer: str) -> str:
    """The context of a chunk: the generic prefix, then the model's sentences if any."""
    return ANSWER_SEPARATOR.join(part for part in (generic, answer) if part)


def with_generic_context(title: str, chunks: Sequence[ChunkRecord]) -> list[ChunkRecord]:
    """The chunks with their generic prefix (what the pipeline embeds with no provider)."""
    return [
        chunk.model_copy(update={"context": generic_context(title, chunk.heading_path, chunk.page)})
        for chunk in chunks
    ]


class ContextStore(Protocol):
    """Earlier model answers by key (`infra.mongo.context_cache.ContextCache`)."""

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """Cached answers by key."""
        ...

    async def put_many(self, contexts: Mapping[str, str]) -> None:
        """Stores answers; never raises."""
        ...


class Contextualizer:
    """Gives chunks their context: the generic prefix, plus a model's sentences if configured."""

    def __init__(
        self,
        settings: ContextualSettings,
        provider: ContextProvider | None = None,
        cache: ContextStore | None = None,
    ) -> None:
        if provider is not None and cache is None:
            raise ValueError("a context provider needs a cache")
        self._settings = settings
        self._provider = provider
        self._cache = cache

    async def contextualize(
        self,
        title: str,
        chunks: Sequence[ChunkRecord],
        following: Sequence[ChunkRecord] = (),
    ) -> list[ChunkRecord]:
        """The chunks with their context set. `following` are the chunks after them that are
        already known (text the model may see after the last chunk); they are not returned."""
        generic = with_generic_context(title, chunks)
        if self._provider is None or self._cache is None or not chunks:
            return generic
        provider = self._provider
        keys = [
            context_key(provider.name, provider.model, title, c.heading_path, c.text)
            for c in chunks
        ]
        # A failure to read the cache is retryable (Mongo is needed by the stage anyway), and
        # better than paying for every call again.
        answers = await self._cache.get_many(keys)
        CONTEXT_REQUESTS.labels(provider.name, "cached").inc(sum(k in answers for k in keys))
        around = surroundings([*chunks, *following], self._settings.around_chars)
        requests: dict[str, ContextRequest] = {}
        for i, (chunk, key) in enumerate(zip(chunks, keys, strict=True)):
            if key not in answers and key not in requests:
                before, after = around[i]
                requests[key] = ContextRequest(title, chunk.heading_path, chunk.text, before, after)
        if requests:
            gate = asyncio.Semaphore(self._settings.concurrency)
            results = await asyncio.gather(
                *(self._ask(provider, request, gate) for request in requests.values())
            )
            fresh = {key: text for key, text in zip(requests, results, strict=True) if text}
            failed = len(requests) - len(fresh)
            if failed:
                log.warning(
                    "%d of %d chunk contexts from %s fell back to the generic prefix",
                    failed, len(requests), provider.name,
                )  # fmt: skip
            await self._cache.put_many(fresh)
            answers.update(fresh)
        return [
            chunk.model_copy(update={"context": combine(chunk.context, answers.get(key, ""))})
            for chunk, key in zip(generic, keys, strict=True)
        ]

    async def _ask(
        self, provider: ContextProvider, request: ContextRequest, gate: asyncio.Semaphore
    ) -> str:
        """One call; an empty string when it failed (the chunk keeps the generic prefix)."""
        async with gate:
            try:
                async with asyncio.timeout(self._settings.timeout_s):
                    completion = await provider.complete(build_prompt(request))
                CONTEXT_TOKENS.labels(provider.name, "prompt").inc(completion.prompt_tokens)
                CONTEXT_TOKENS.labels(provider.name, "completion").inc(completion.completion_tokens)
                answer = clean_answer(completion.text, self._settings.max_answer_chars)
                if not answer:
                    raise ContextRefused(provider.name, "empty answer")
            except (TimeoutError, ContextTimedOut) as exc:
                log.info("context call to %s timed out: %s", provider.name, exc)
                CONTEXT_REQUESTS.labels(provider.name, "timeout").inc()
                return ""
            except Exception as exc:
                # Whatever goes wrong with the provider (refused, down, malformed, a client
                # library error), the chunk gets the generic prefix: it never fails the document.
                log.info("context call to %s failed: %s", provider.name, exc)
                CONTEXT_REQUESTS.labels(provider.name, "failed").inc()
                return ""
        CONTEXT_REQUESTS.labels(provider.name, "ok").inc()
        return answer
