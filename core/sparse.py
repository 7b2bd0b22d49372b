"""BM25-style sparse vectors for hybrid retrieval. Pure: no I/O.

Qdrant scores sparse vectors by dot product and, with the `idf` modifier on the collection,
multiplies each query term by its inverse document frequency. So a document's vector holds
BM25's term-frequency part (saturated, length-normalised) and a query's vector holds 1 for each
of its terms: the product is BM25. The frequencies are counted over the searching tenant's
chunks (the stores pass `SearchScope.term_corpus` as the IDF corpus), never over the whole
store: another tenant's chunks and deleted ones do not weigh on a search.

Tokens: text is NFKC-normalised and lower-cased; English words lose their stop words and are
stemmed (Snowball); Chinese, Japanese and Korean runs, written without spaces, become character
bigrams (one token per sentence would match nothing); codes such as `XJ-4471` or `pstore.conf`
are kept whole as well as in parts. Terms are hashed to 31-bit indices.
"""

from __future__ import annotations

import array
import base64
import itertools
import re
import sys
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import Stemmer

from core.packing import pack, unpack


@dataclass(frozen=True)
class SparseVector:
    """Term weights keyed by term index (sorted, unique indices)."""

    indices: list[int]
    values: list[float]


# Letters and digits of any script, as one run each.
_WORD = re.compile(r"\w+", re.UNICODE)
# Codes: alphanumeric parts joined by - _ . / (XJ-4471, pstore.conf, v2.4.1).
_CODE = re.compile(r"[0-9a-z]+(?:[-_./][0-9a-z]+)+")
# Identifiers a user may search for verbatim: option flags (--no-hardlinks), tokens holding a
# digit (XJ-4471, SHA384, ipv6) and names joined by _ . / (pam_faillock, pstore.conf, etc/group).
_IDENTIFIER = re.compile(r"(?<![\w-])(?:--?[^\W_][\w.-]*|[\w./-]*\d[\w./-]*|\w+(?:[_./]\w+)+)")
_LETTER = re.compile(r"[^\W\d_]")
_CJK = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\u31f0-\u31ff]+"
)

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves""".split()
)


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def term_index(term: str) -> int:
    """The sparse-vector index of a term (a stable 31-bit hash)."""
    return zlib.crc32(term.encode()) & 0x7FFFFFFF


def tokens(text: str) -> list[str]:
    """The terms of a text, in order (repeats kept: they are term frequencies)."""
    terms, _ = _analyse(text)
    return terms


def term_set(text: str) -> frozenset[int]:
    """The sparse-vector indices of a text's terms (its word pairs left out): what a chunk
    holds, for telling whether it contains every term of a query."""
    return frozenset(term_index(term) for term in tokens(text))


def packed_terms(text: str) -> str:
    """A text's `term_set`, packed as a chunk's payload stores it (`core.packing`)."""
    return pack(term_set(text), 4)


def unpacked_terms(stored: str) -> frozenset[int]:
    """A chunk's terms as its payload stores them."""
    return frozenset(unpack(stored, 4))


def holds_every(stored: str, terms: Iterable[int]) -> bool:
    """Whether a chunk's terms, as its payload stores them, include all of `terms` (looked up
    in the packed values: a search asks this of up to a hundred chunks)."""
    held = array.array("I")
    held.frombytes(base64.b64decode(stored))
    if sys.byteorder != "little":
        held.byteswap()
    return all(term in held for term in terms)


def identifier_terms(text: str) -> list[str]:
    """The terms of the identifiers in a text (an identifier's whole code and its words), in
    order, without repeats; identifiers need a letter (a bare number is not one)."""
    found: list[str] = []
    for match in _IDENTIFIER.finditer(unicodedata.normalize("NFKC", text)):
        if _LETTER.search(match.group(0)):
            found.extend(tokens(match.group(0)))
    return list(dict.fromkeys(found))


def content_words(text: str) -> list[str]:
    """The text's words without stop words, stemmed, in reading order (CJK runs left out)."""
    _, words = _analyse(text)
    return words


def phrases(text: str) -> list[str]:
    """Pairs of consecutive words (stop words left out): a little of BM25's missing
    proximity, so "configuration file" scores above a page with the two words apart."""
    return [f"{first} {second}" for first, second in itertools.pairwise(content_words(text))]


def _analyse(text: str) -> tuple[list[str], list[str]]:
    """All terms, and the stemmed words alone in reading order."""
    text = unicodedata.normalize("NFKC", text).lower()
    cjk: list[str] = []
    plain: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group(0)
        if _CJK.search(word):
            cjk.extend(_cjk_terms(word))
        elif word not in STOP_WORDS:
            plain.append(word)
    words = _stemmer().stemWords(plain)
    codes = [match.group(0) for match in _CODE.finditer(text)]
    return [*cjk, *words, *codes], words


def _cjk_terms(run: str) -> list[str]:
    """Bigrams of the CJK characters in a run (a lone character stays a unigram); other
    characters of the run are a word of their own."""
    out: list[str] = []
    last = 0
    for block in _CJK.finditer(run):
        if block.start() > last:
            out.append(run[last : block.start()])
        chars = block.group(0)
        if len(chars) == 1:
            out.append(chars)
        else:
            out.extend(chars[i : i + 2] for i in range(len(chars) - 1))
        last = block.end()
    if last < len(run):
        out.append(run[last:])
    return out


class SparseEncoder:
    """Turns documents and queries into BM25-style sparse vectors.

    Besides single terms, pairs of consecutive words count, at `phrase_weight` of a term's
    weight (measured on the man-page benchmark: BM25 alone 0.761 -> 0.792 nDCG@10).
    """

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        average_length: float = 180.0,
        phrase_weight: float = 0.3,
    ) -> None:
        self._k1 = k1
        self._b = b
        self._average_length = average_length
        self._phrase_weight = phrase_weight

    def document(self, text: str) -> SparseVector:
        """Saturated, length-normalised term (and phrase) frequencies of a chunk."""
        terms, words = _analyse(text)
        if not terms:
            return SparseVector(indices=[], values=[])
        norm = self._k1 * (1 - self._b + self._b * len(terms) / self._average_length)
        weights: dict[int, float] = {}
        pairs = [f"{a} {b}" for a, b in itertools.pairwise(words)]
        for bag, scale in ((terms, 1.0), (pairs, self._phrase_weight)):
            for term, count in Counter(bag).items():
                index = term_index(term)
                weight = scale * count * (self._k1 + 1) / (count + norm)
                weights[index] = weights.get(index, 0.0) + weight
        return _vector(weights)

    def query(self, text: str) -> SparseVector:
        """One for each distinct term and word pair of a query."""
        terms = [*tokens(text), *phrases(text)]
        return _vector(dict.fromkeys((term_index(t) for t in terms), 1.0))


def with_feedback(
    query: SparseVector, feedback: Sequence[frozenset[int]], weight: float, min_chunks: int
) -> SparseVector:
    """The query with pseudo-relevance feedback: each term (or word pair) held by at least
    `min_chunks` of the feedback chunks (the best semantic matches) joins it at `weight` times
    the share of them holding it. The store's IDF keeps common words from counting for much;
    the asker's own terms keep their full weight (and gain the same share)."""
    weights = dict(zip(query.indices, query.values, strict=True))
    if not feedback:
        return query
    for term, held in Counter(term for terms in feedback for term in terms).items():
        if held >= min_chunks:
            weights[term] = weights.get(term, 0.0) + weight * held / len(feedback)
    return _vector(weights)


def _vector(weights: dict[int, float]) -> SparseVector:
    indices = sorted(weights)
    return SparseVector(indices=indices, values=[round(weights[i], 6) for i in indices])
