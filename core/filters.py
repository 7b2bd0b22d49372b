"""Which chunks an operation may touch, said once for every vector store.

A `Filter` is a store-neutral condition over chunk payloads. Each vector-store backend
translates it in exactly one function (`infra.vectorstore.edge.edge_filter`,
`infra.vectorstore.qdrant_server.qdrant_filter`), and `Filter.matches` reads it the same way in
Python for points fetched by id, as qdrant-client's local mode interprets the server's filter.

The semantics are Qdrant's: every `must` condition holds, at least one `should` condition holds
(when there are any), no `must_not` condition holds; a match on a list-valued field holds when
any element matches, and a condition on a missing field does not hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Scalar = str | int | bool


@dataclass(frozen=True)
class Match:
    """`key` equals `value` (or, for a list, holds it)."""

    key: str
    value: Scalar

    def holds(self, payload: Mapping[str, Any]) -> bool:
        """Whether the payload satisfies this condition."""
        found = payload.get(self.key)
        if isinstance(found, list):
            return any(_equal(item, self.value) for item in found)
        return found is not None and _equal(found, self.value)


@dataclass(frozen=True)
class MatchAny:
    """`key` equals one of `values` (or, for a list, holds one of them)."""

    key: str
    values: tuple[str, ...]

    def holds(self, payload: Mapping[str, Any]) -> bool:
        """Whether the payload satisfies this condition."""
        found = payload.get(self.key)
        if isinstance(found, list):
            return any(item in self.values for item in found)
        return found in self.values


@dataclass(frozen=True)
class Range:
    """`key` is a number with `gte <= value < lt` (either bound optional)."""

    key: str
    gte: int | None = None
    lt: int | None = None

    def holds(self, payload: Mapping[str, Any]) -> bool:
        """Whether the payload satisfies this condition."""
        found = payload.get(self.key)
        if isinstance(found, bool) or not isinstance(found, int | float):
            return False
        return (self.gte is None or found >= self.gte) and (self.lt is None or found < self.lt)


@dataclass(frozen=True)
class Filter:
    """Conditions combined as Qdrant combines them; a `Filter` may nest in another."""

    must: tuple[Condition, ...] = ()
    should: tuple[Condition, ...] = ()
    must_not: tuple[Condition, ...] = ()

    def holds(self, payload: Mapping[str, Any]) -> bool:
        """Whether the payload satisfies this filter (as a nested condition)."""
        return self.matches(payload)

    def matches(self, payload: Mapping[str, Any]) -> bool:
        """Whether a chunk with this payload is one the filter selects."""
        return (
            all(condition.holds(payload) for condition in self.must)
            and (not self.should or any(condition.holds(payload) for condition in self.should))
            and not any(condition.holds(payload) for condition in self.must_not)
        )


Condition = Match | MatchAny | Range | Filter


def _equal(found: object, wanted: Scalar) -> bool:
    # A stored boolean never equals a number, nor a number a boolean (as in Qdrant).
    return isinstance(found, bool) == isinstance(wanted, bool) and found == wanted


# --- the selections Ragline makes -----------------------------------------------------------


@dataclass(frozen=True)
class SearchScope:
    """What a search may see: active chunks of these KBs of this tenant that one of the
    caller's principals may read (`core.governance`), and nothing else."""

    tenant_id: str
    kb_ids: tuple[str, ...]
    readers: tuple[str, ...]

    def filter(self) -> Filter:
        """The chunks in scope."""
        return Filter(
            must=(
                Match("tenant_id", self.tenant_id),
                MatchAny("kb_id", self.kb_ids),
                Match("active", True),
                MatchAny("readers", self.readers),
            )
        )

    def admits(self, payload: Mapping[str, Any]) -> bool:
        """Whether a chunk with this payload is in scope (for points fetched by id)."""
        return self.filter().matches(payload)

    def term_corpus(self) -> Filter:
        """The chunks a keyword search counts its terms' document frequencies over (its IDF
        corpus): every chunk its tenant holds now. Another tenant's chunks and deleted ones never
        count. The engine counts them by walking the corpus's points for each search, so the
        corpus is one indexed condition: with the whole scope's four (KBs, `active`, readers) the
        walk cost 63 ms at a million chunks, against 11.5 ms for the tenant alone."""
        return Filter(must=(Match("tenant_id", self.tenant_id),))


def chunks_of_document(tenant_id: str, document_id: str) -> Filter:
    """Every chunk of a document, active or not."""
    return Filter(must=(Match("tenant_id", tenant_id), Match("document_id", document_id)))


def chunks_of_kb(tenant_id: str, kb_id: str) -> Filter:
    """Every chunk of a knowledge base."""
    return Filter(must=(Match("tenant_id", tenant_id), Match("kb_id", kb_id)))


def older_versions(tenant_id: str, kb_id: str, source_key: str, version: int) -> Filter:
    """The chunks of a source's versions older than `version`."""
    return Filter(
        must=(
            Match("tenant_id", tenant_id),
            Match("kb_id", kb_id),
            Match("source_key", source_key),
            Range("version", lt=version),
        )
    )


def version_of(tenant_id: str, kb_id: str, source_key: str, version: int) -> Filter:
    """The chunks of one version of a source."""
    return Filter(
        must=(
            Match("tenant_id", tenant_id),
            Match("kb_id", kb_id),
            Match("source_key", source_key),
            Match("version", version),
        )
    )


def chunks_from(tenant_id: str, document_id: str, first_index: int) -> Filter:
    """A document's chunks numbered `first_index` or above."""
    return Filter(
        must=(
            *chunks_of_document(tenant_id, document_id).must,
            Range("chunk_index", gte=first_index),
        )
    )


def chunks_where(
    tenant_id: str,
    *,
    kb_id: str | None = None,
    document_id: str | None = None,
    active: bool | None = None,
) -> Filter:
    """The tenant's chunks, narrowed by whichever of the fields are given."""
    must: list[Condition] = [Match("tenant_id", tenant_id)]
    if kb_id is not None:
        must.append(Match("kb_id", kb_id))
    if document_id is not None:
        must.append(Match("document_id", document_id))
    if active is not None:
        must.append(Match("active", active))
    return Filter(must=tuple(must))
