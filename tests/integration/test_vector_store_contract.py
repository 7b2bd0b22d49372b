"""One contract, two vector stores: the embedded engine and qdrant-client (Qdrant's API).

The Qdrant-server store runs against qdrant-client's local mode, which implements the server's
API in-process; the embedded store runs Qdrant's own engine on disk.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from prometheus_client import REGISTRY
from qdrant_client import AsyncQdrantClient

from core.copies import copy_signature
from core.errors import PermanentError
from core.filters import (
    Filter,
    Match,
    MatchAny,
    Range,
    SearchScope,
    chunks_of_document,
    chunks_of_kb,
    chunks_where,
)
from core.retrieval import RetrievalMode
from core.sparse import SparseEncoder, SparseVector, packed_terms, term_index, unpacked_terms
from infra.vectorstore.base import (
    ChunkPoint,
    PublishedDocument,
    Rankings,
    RankQuery,
    ScoredChunk,
    VectorQuery,
    VectorStore,
    WithdrawnDocument,
)
from infra.vectorstore.edge import EdgeVectorStore, Placement
from infra.vectorstore.qdrant_server import QdrantServerStore
from infra.vectorstore.remote import RemoteVectorStore, StoreServer
from schemas.chunks import ChunkPayload
from schemas.domain import chunk_point_id

DIM = 8

# Who may read the chunks these tests write, and who searches: the whole tenant.
EVERYONE = ("tenant",)


def _unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def _point(
    tenant: str,
    kb: str,
    doc: str,
    index: int,
    *,
    active: bool = True,
    seed: int | None = None,
    source: str = "file:a.txt",
    version: int = 1,
) -> ChunkPoint:
    return ChunkPoint(
        point_id=chunk_point_id(doc, index),
        dense=_unit(seed if seed is not None else hash((doc, index)) % 10_000),
        payload=ChunkPayload(
            tenant_id=tenant,
            kb_id=kb,
            document_id=doc,
            chunk_index=index,
            chunk_text=f"{doc} chunk {index}",
            active=active,
            readers=list(EVERYONE),
            source_key=source,
            version=version,
        ),
    )


def _published(
    doc: str, *, version: int = 1, keep: int = 100, source: str = "file:a.txt"
) -> PublishedDocument:
    return PublishedDocument(
        tenant_id="t1",
        kb_id="kb1",
        document_id=doc,
        source_key=source,
        version=version,
        keep_chunks=keep,
        readers=EVERYONE,
    )


def _query(tenant: str, kbs: tuple[str, ...], vector: np.ndarray, limit: int = 10) -> VectorQuery:
    return VectorQuery(scope=SearchScope(tenant, kbs, EVERYONE), dense=vector, limit=limit)


def _docs(hits: list[ScoredChunk]) -> set[str]:
    return {str(h.payload.document_id) for h in hits}


@pytest.fixture(params=["edge", "qdrant", "remote"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    """Each implementation, fresh; `remote` is the embedded engine served on a socket (by this
    process here, as a store process serves it)."""
    if request.param == "remote":
        server = StoreServer(
            lambda name, dimensions: EdgeVectorStore(tmp_path / name, dimensions),
            tmp_path / "store.sock",
        )
        await server.start()
        remote = RemoteVectorStore(tmp_path / "store.sock", "vectors", DIM)
        await remote.ensure_collection()
        yield remote
        await remote.close()
        await server.close()  # and the stores it opened
        return
    opened: VectorStore
    if request.param == "edge":
        opened = EdgeVectorStore(tmp_path / "vectors", DIM)
    else:
        opened = QdrantServerStore(AsyncQdrantClient(location=":memory:"), "chunks", DIM)
    await opened.ensure_collection()
    yield opened
    await opened.close()


async def test_search_returns_nearest_first_with_cosine_scores(store: VectorStore) -> None:
    await store.upsert([_point("t1", "kb1", "doc_a", i, seed=i) for i in range(5)])
    hits = await store.search(_query("t1", ("kb1",), _unit(3)))
    assert hits[0].payload.chunk_index == 3
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].point_id == chunk_point_id("doc_a", 3)


async def test_search_sees_only_its_tenant_and_kbs(store: VectorStore) -> None:
    await store.upsert(
        [
            _point("t1", "kb1", "doc_a", 0),
            _point("t1", "kb2", "doc_b", 0),
            _point("t2", "kb1", "doc_c", 0),
        ]
    )
    assert _docs(await store.search(_query("t1", ("kb1",), _unit(1)))) == {"doc_a"}
    assert _docs(await store.search(_query("t1", ("kb1", "kb2"), _unit(1)))) == {"doc_a", "doc_b"}
    assert _docs(await store.search(_query("t2", ("kb1", "kb2"), _unit(1)))) == {"doc_c"}
    assert await store.search(_query("t3", ("kb1",), _unit(1))) == []
    assert await store.search(_query("t1", (), _unit(1))) == []


async def test_inactive_chunks_are_hidden_until_published(store: VectorStore) -> None:
    await store.upsert([_point("t1", "kb1", "doc_a", i, active=False) for i in range(3)])
    assert await store.search(_query("t1", ("kb1",), _unit(1))) == []
    assert await store.count(chunks_where("t1", document_id="doc_a", active=False)) == 3
    await store.publish_document(_published("doc_a"))
    assert len(await store.search(_query("t1", ("kb1",), _unit(1)))) == 3
    assert await store.count(chunks_where("t1", document_id="doc_a", active=True)) == 3


async def test_publishing_a_version_hides_older_versions_only(store: VectorStore) -> None:
    await store.upsert(
        [_point("t1", "kb1", "doc_v1", i, version=1) for i in range(3)]
        + [_point("t1", "kb1", "doc_v2", i, version=2, active=False) for i in range(2)]
        + [_point("t1", "kb1", "doc_v3", i, version=3, active=False) for i in range(2)]
        + [_point("t1", "kb1", "doc_other", 0, source="file:b.txt")]
        + [_point("t1", "kb2", "doc_kb2", 0, version=1)]
        + [_point("t2", "kb1", "doc_t2", 0, version=1)]
    )
    await store.publish_document(_published("doc_v2", version=2))
    # Hidden, to be deleted once the new version is finished (or shown again if it fails).
    assert await store.count(chunks_where("t1", document_id="doc_v1", active=True)) == 0
    assert await store.count(chunks_where("t1", document_id="doc_v1", active=False)) == 3
    assert _docs(await store.search(_query("t1", ("kb1",), _unit(1)))) == {"doc_v2", "doc_other"}
    assert await store.count(chunks_where("t1", document_id="doc_v2", active=True)) == 2
    # A newer version still being written, other sources, KBs and tenants are untouched.
    assert await store.count(chunks_where("t1", document_id="doc_v3", active=False)) == 2
    assert await store.count(chunks_where("t1", document_id="doc_other")) == 1
    assert await store.count(chunks_where("t1", document_id="doc_kb2")) == 1
    assert await store.count(chunks_where("t2", document_id="doc_t2")) == 1


async def test_withdrawing_a_failed_version_shows_the_live_one_again(store: VectorStore) -> None:
    await store.upsert(
        [_point("t1", "kb1", "doc_v1", i, version=1) for i in range(3)]
        + [_point("t1", "kb1", "doc_v2", i, version=2, active=False) for i in range(2)]
        + [_point("t1", "kb1", "doc_other", 0, source="file:b.txt")]
    )
    await store.publish_document(_published("doc_v2", version=2))
    await store.withdraw_document(WithdrawnDocument("t1", "kb1", "doc_v2", "file:a.txt", 1))
    assert await store.count(chunks_where("t1", document_id="doc_v2")) == 0
    assert await store.count(chunks_where("t1", document_id="doc_v1", active=True)) == 3
    assert _docs(await store.search(_query("t1", ("kb1",), _unit(1)))) == {"doc_v1", "doc_other"}
    # Without a live older version, only the failed run's chunks go.
    await store.withdraw_document(WithdrawnDocument("t1", "kb1", "doc_v1", "file:a.txt", 0))
    assert _docs(await store.search(_query("t1", ("kb1",), _unit(1)))) == {"doc_other"}


async def test_publishing_is_scoped_to_the_tenant(store: VectorStore) -> None:
    await store.upsert([_point("t2", "kb1", "doc_a", 0, active=False)])
    await store.publish_document(_published("doc_a"))
    assert await store.count(chunks_where("t2", document_id="doc_a", active=True)) == 0


async def test_upserting_the_same_chunk_overwrites_it(store: VectorStore) -> None:
    await store.upsert([_point("t1", "kb1", "doc_a", 0, seed=1)])
    await store.upsert([_point("t1", "kb1", "doc_a", 0, seed=2)])
    assert await store.count(chunks_where("t1", document_id="doc_a")) == 1
    hits = await store.search(_query("t1", ("kb1",), _unit(2)))
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)


async def test_delete_document_and_points_and_kb(store: VectorStore) -> None:
    await store.upsert(
        [_point("t1", "kb1", "doc_a", i) for i in range(3)]
        + [_point("t1", "kb1", "doc_b", i) for i in range(2)]
        + [_point("t1", "kb2", "doc_c", 0)]
        + [_point("t2", "kb1", "doc_a", 0)]
    )
    await store.delete(chunks_of_document("t1", "doc_a"))
    assert await store.count(chunks_where("t1", document_id="doc_a")) == 0
    assert await store.count(chunks_where("t2", document_id="doc_a")) == 1
    await store.delete_points([chunk_point_id("doc_b", 0)])
    assert await store.count(chunks_where("t1", document_id="doc_b")) == 1
    await store.delete(chunks_of_kb("t1", "kb1"))
    assert await store.count(chunks_where("t1", kb_id="kb1")) == 0
    assert await store.count(chunks_where("t1", kb_id="kb2")) == 1


async def test_publishing_removes_the_tail_of_an_earlier_longer_run(store: VectorStore) -> None:
    await store.upsert([_point("t1", "kb1", "doc_a", i) for i in range(6)])
    await store.publish_document(_published("doc_a", keep=4))
    hits = await store.search(_query("t1", ("kb1",), _unit(0)))
    assert sorted(int(h.payload.chunk_index) for h in hits) == [0, 1, 2, 3]


async def test_score_threshold_drops_weak_matches(store: VectorStore) -> None:
    await store.upsert([_point("t1", "kb1", "doc_a", i, seed=i) for i in range(5)])
    query = VectorQuery(
        scope=SearchScope("t1", ("kb1",), EVERYONE),
        dense=_unit(3),
        limit=10,
        score_threshold=0.99,
    )
    hits = await store.search(query)
    assert [h.payload.chunk_index for h in hits] == [3]


async def test_payload_round_trips(store: VectorStore) -> None:
    point = _point("t1", "kb1", "doc_a", 0)
    cited = point.payload.model_copy(
        update={"page": 7, "heading_path": ["A", "B"], "source_name": "ü.pdf"}
    )
    await store.upsert([ChunkPoint(point.point_id, point.dense, cited)])
    hit = (await store.search(_query("t1", ("kb1",), _unit(1))))[0]
    assert hit.payload.page == 7
    assert hit.payload.heading_path == ["A", "B"]
    assert hit.payload.source_name == "ü.pdf"
    assert hit.payload.active is True


async def test_document_chunks_lists_a_documents_payloads(store: VectorStore) -> None:
    await store.upsert([_point("t1", "kb1", "doc_a", i, active=i < 300) for i in range(600)])
    await store.upsert([_point("t1", "kb1", "doc_b", 0)])
    chunks = await store.document_chunks("t1", "doc_a")
    assert [c.chunk_index for c in chunks] == list(range(600))
    assert sum(1 for c in chunks if c.active) == 300
    assert len(await store.document_chunks("t1", "doc_a", limit=10)) == 10
    assert await store.document_chunks("t3", "doc_a") == []


def _text_point(doc: str, text: str, seed: int, kb: str = "kb1", tenant: str = "t1") -> ChunkPoint:
    """A point whose sparse vector (and terms) are of `text` (its payload's text is its id)."""
    point = _point(tenant, kb, doc, 0, seed=seed)
    payload = point.payload.model_copy(update={"terms": packed_terms(text)})
    return ChunkPoint(point.point_id, point.dense, payload, SparseEncoder().document(text))


async def test_an_export_gives_back_every_point_as_written_and_upsert_restores_it(
    store: VectorStore, tmp_path: Path
) -> None:
    written = [
        _text_point(f"doc_{i}", f"error XJ-{i} means the fan failed", i, tenant=f"t{i % 2}")
        for i in range(600)
    ]
    written.append(_point("t1", "kb1", "doc_dense_only", 0, active=False))
    await store.upsert(written)

    exported = [point async for batch in store.export_points(None, batch=128) for point in batch]
    by_id = {point.point_id: point for point in written}
    assert sorted(p.point_id for p in exported) == sorted(by_id)
    for point in exported:
        original = by_id[point.point_id]
        assert point.payload == original.payload
        # The store keeps the vector normalised (cosine): equal up to float32 rounding.
        np.testing.assert_allclose(point.dense, original.dense, rtol=0, atol=1e-6)
        if original.sparse is None:
            assert point.sparse is None
        else:
            assert point.sparse is not None
            assert point.sparse.indices == original.sparse.indices
            # Weights are kept as float32 (by the embedded engine).
            np.testing.assert_array_equal(
                np.asarray(point.sparse.values, dtype=np.float32),
                np.asarray(original.sparse.values, dtype=np.float32),
            )
    tenant = [
        p async for b in store.export_points(Filter(must=(Match("tenant_id", "t0"),))) for p in b
    ]
    assert {p.payload.tenant_id for p in tenant} == {"t0"}
    assert len(tenant) == 300

    # Written back into an empty store, the points answer the same search the same way.
    query = VectorQuery(scope=SearchScope("t1", ("kb1",), EVERYONE), dense=_unit(7), limit=10)
    found = [(hit.point_id, round(hit.score, 6)) for hit in await store.search(query)]
    await store.delete(Filter(must=(Match("kb_id", "kb1"),)))
    assert await store.count(Filter(must=(Match("kb_id", "kb1"),))) == 0
    await store.upsert(exported)
    assert [(hit.point_id, round(hit.score, 6)) for hit in await store.search(query)] == found


async def test_sparse_search_ranks_by_bm25_within_scope(store: VectorStore) -> None:
    encoder = SparseEncoder()
    await store.upsert(
        [
            _text_point("doc_common", "the router restarts when the router is hot", 1),
            _text_point("doc_rare", "error XJ-4471 means the router fan failed", 2),
            _text_point("doc_other", "kayaks are returned within thirty days", 3),
            _text_point("doc_foreign", "error XJ-4471 in another tenant", 4, tenant="t2"),
        ]
    )
    query = VectorQuery(
        scope=SearchScope("t1", ("kb1",), EVERYONE),
        dense=_unit(9),
        limit=5,
        mode=RetrievalMode.SPARSE,
        sparse=encoder.query("XJ-4471 router"),
    )
    hits = await store.search(query)
    assert [h.payload.document_id for h in hits] == ["doc_rare", "doc_common"]
    assert hits[0].score > hits[1].score > 0
    empty = VectorQuery(
        scope=SearchScope("t1", ("kb1",), EVERYONE), dense=_unit(9), limit=5,
        mode=RetrievalMode.SPARSE, sparse=encoder.query("the of"),
    )  # fmt: skip
    assert await store.search(empty) == []


async def test_rank_gives_both_rankings_within_scope_in_one_call(store: VectorStore) -> None:
    encoder = SparseEncoder()
    await store.upsert(
        [
            _text_point("doc_dense", "nothing lexical in common", 7),
            _text_point("doc_lexical", "the zebrafinch manual", 8),
            _text_point("doc_neither", "completely unrelated words", 9),
            _text_point("doc_foreign", "the zebrafinch manual of another tenant", 7, tenant="t2"),
            _text_point("doc_other_kb", "a zebrafinch in another kb", 7, kb="kb2"),
        ]
    )
    scope = SearchScope("t1", ("kb1",), EVERYONE)
    ranked = await store.rank(RankQuery(scope, _unit(7), 10, sparse=encoder.query("zebrafinch")))
    ids = {chunk_point_id(doc, 0): doc for doc in ("doc_dense", "doc_lexical", "doc_neither")}
    assert ids[ranked.dense[0][0]] == "doc_dense"
    assert {ids[point] for point, _ in ranked.dense} == set(ids.values())
    assert ranked.dense[0][1] == pytest.approx(1.0, abs=1e-4)
    assert [ids[point] for point, _ in ranked.sparse] == ["doc_lexical"]
    assert ranked.sparse[0][1] > 0
    no_terms = await store.rank(RankQuery(scope, _unit(7), 10, sparse=encoder.query("the of")))
    assert no_terms.sparse == []
    assert len(no_terms.dense) == 3
    shallow = await store.rank(RankQuery(scope, _unit(7), 1))
    assert [ids[point] for point, _ in shallow.dense] == ["doc_dense"]
    nowhere = RankQuery(SearchScope("t1", (), EVERYONE), _unit(7), 10)
    assert await store.rank(nowhere) == Rankings([], [])


async def test_a_dense_ranking_keeps_the_cosines_at_its_threshold(store: VectorStore) -> None:
    await store.upsert([_text_point(f"doc_{seed}", "words", seed) for seed in range(1, 9)])
    scope = SearchScope("t1", ("kb1",), EVERYONE)
    query = _unit(3)
    threshold = sorted(float(_unit(seed) @ query) for seed in range(1, 9))[-3]
    ranked = await store.rank(
        RankQuery(scope, query, 10, RetrievalMode.DENSE, threshold=threshold - 1e-4)
    )
    assert len(ranked.dense) == 3
    assert ranked.dense[0][0] == chunk_point_id("doc_3", 0)
    assert ranked.dense[0][1] == pytest.approx(1.0, abs=1e-4)
    assert ranked.sparse == []


async def test_rank_probes_which_chunks_hold_a_term(store: VectorStore) -> None:
    encoder = SparseEncoder()
    await store.upsert(
        [
            _text_point("doc_code", "error XJ-4471 means the fan failed", 1),
            _text_point("doc_fan_1", "the fan is quiet", 2),
            _text_point("doc_fan_2", "a fan of kayaks", 3),
            _text_point("doc_fan_3", "fan speed settings", 4),
            _text_point("doc_foreign", "error XJ-4471 elsewhere", 5, tenant="t2"),
        ]
    )
    code, fan, absent = term_index("xj-4471"), term_index("fan"), term_index("zebrafinch")
    ranked = await store.rank(
        RankQuery(
            SearchScope("t1", ("kb1",), EVERYONE),
            _unit(1),
            10,
            sparse=encoder.query("XJ-4471 fan"),
            probes=(code, fan, absent),
            probe_limit=3,
        )
    )
    # Each holder with its document: rarity is counted by documents.
    holder = chunk_point_id("doc_code", 0)
    assert ranked.holding[code] == [(holder, "doc_code")]
    assert len(ranked.holding[fan]) == 3  # at most the probe limit
    assert ranked.holding[absent] == []
    assert ranked.sparse
    assert ranked.dense


async def test_a_sparse_ranking_ranks_by_bm25_alone_within_the_scope(store: VectorStore) -> None:
    encoder = SparseEncoder()
    await store.upsert(
        [
            _text_point("doc_both", "hold a package back from upgrades with apt-mark hold", 1),
            _text_point("doc_one", "a package is upgraded by apt", 2),
            _text_point("doc_none", "the kernel boots", 3),
            _text_point("doc_foreign", "hold a package back from upgrades", 4, tenant="t2"),
        ]
    )
    scope = SearchScope("t1", ("kb1",), EVERYONE)

    def sparse(text: str, where: SearchScope = scope) -> RankQuery:
        return RankQuery(where, _unit(1), 10, RetrievalMode.SPARSE, sparse=encoder.query(text))

    ranked = await store.rank(sparse("hold package upgrades"))
    ids = {chunk_point_id(doc, 0): doc for doc in ("doc_both", "doc_one", "doc_none")}
    assert [ids[point] for point, _ in ranked.sparse] == ["doc_both", "doc_one"]
    assert ranked.sparse[0][1] > ranked.sparse[1][1] > 0
    assert ranked.dense == []
    assert (await store.rank(sparse("the of"))).sparse == []
    assert (await store.rank(sparse("hold", SearchScope("t1", (), EVERYONE)))).sparse == []


async def test_sparse_scores_count_term_statistics_within_the_tenant_alone(
    store: VectorStore,
) -> None:
    """A term's IDF is counted over the searching tenant's chunks: another tenant's chunks and
    deleted ones do not move a score; the tenant's own chunks do, at once, in any of its KBs."""
    encoder = SparseEncoder()
    await store.upsert(
        [
            _text_point("doc_both", "the fan of the router failed", 1),
            _text_point("doc_router", "the router boots", 2),
            _text_point("doc_other", "kayaks are returned", 3),
        ]
    )
    scope = SearchScope("t1", ("kb1",), EVERYONE)
    terms = encoder.query("router fan")

    async def scores() -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        ranked = await store.rank(RankQuery(scope, _unit(1), 10, sparse=terms))
        query = VectorQuery(scope, _unit(1), 10, mode=RetrievalMode.SPARSE, sparse=terms)
        found = [(hit.point_id, hit.score) for hit in await store.search(query)]
        return ranked.sparse, found

    before = await scores()
    assert [point for point, _ in before[0]] == [
        chunk_point_id("doc_both", 0),
        chunk_point_id("doc_router", 0),
    ]
    assert before[1] == before[0]
    await store.upsert(
        [_text_point(f"crowd_{i}", "fan fan router", 100 + i, tenant="t2") for i in range(60)]
    )
    assert await scores() == before
    await store.delete(Filter(must=(Match("tenant_id", "t2"),)))
    assert await scores() == before

    # The tenant's other KB holds the terms too: they are less rare in the tenant, until the KB
    # is deleted.
    await store.upsert(
        [_text_point(f"kb2_{i}", "the router fan", 200 + i, kb="kb2") for i in range(20)]
    )
    shared = await scores()
    assert [point for point, _ in shared[0]] == [point for point, _ in before[0]]
    assert shared[0][0][1] < before[0][0][1]
    await store.delete(chunks_of_kb("t1", "kb2"))
    assert await scores() == before

    await store.delete_points([chunk_point_id("doc_other", 0)])
    fewer = await scores()
    assert [point for point, _ in fewer[0]] == [point for point, _ in before[0]]
    assert fewer[0][0][1] < before[0][0][1]  # one chunk fewer: each term is less rare


async def test_read_gives_the_payloads_of_the_points_in_scope_only(store: VectorStore) -> None:
    await store.upsert(
        [
            _text_point("doc_dense", "nothing lexical in common", 7),
            _text_point("doc_lexical", "the zebrafinch manual", 8),
            _text_point("doc_foreign", "the zebrafinch manual", 8, tenant="t2"),
            _text_point("doc_other_kb", "the zebrafinch manual", 8, kb="kb2"),
        ]
    )
    hidden = _point("t1", "kb1", "doc_hidden", 0, active=False, seed=7)
    await store.upsert([hidden])
    wanted = [
        chunk_point_id(doc, 0)
        for doc in ("doc_lexical", "doc_dense", "doc_foreign", "doc_other_kb", "doc_never_stored")
    ]
    scope = SearchScope("t1", ("kb1",), EVERYONE)
    read = await store.read(scope, [*wanted, hidden.point_id])
    assert {chunk.payload.document_id for chunk in read.values()} == {"doc_dense", "doc_lexical"}
    lexical = read[chunk_point_id("doc_lexical", 0)]
    assert lexical.payload.chunk_text == "doc_lexical chunk 0"
    assert lexical.payload.copy_signature == copy_signature("doc_lexical chunk 0")
    # The terms it holds (written with it); its dense vector only when asked for.
    assert term_index("zebrafinch") in unpacked_terms(lexical.payload.terms)
    assert lexical.dense is None
    both = [chunk_point_id("doc_lexical", 0), chunk_point_id("doc_dense", 0)]
    with_vectors = await store.read(scope, both, dense=both[:1])
    assert with_vectors[both[1]].dense is None
    dense = with_vectors[both[0]].dense
    assert dense is not None
    assert float(dense @ _unit(8)) / float(np.linalg.norm(dense)) == pytest.approx(1.0, abs=1e-4)
    assert await store.read(scope, []) == {}
    assert await store.read(SearchScope("t1", (), EVERYONE), wanted) == {}


async def test_embedded_store_keeps_points_across_restarts(tmp_path: Path) -> None:
    first = EdgeVectorStore(tmp_path / "v", DIM)
    await first.ensure_collection()
    await first.upsert([_point("t1", "kb1", "doc_a", i) for i in range(3)])
    await first.close()
    second = EdgeVectorStore(tmp_path / "v", DIM)
    await second.ensure_collection()
    assert await second.count(chunks_where("t1", document_id="doc_a")) == 3
    await second.close()


async def test_embedded_store_refuses_other_dimensions(tmp_path: Path) -> None:
    first = EdgeVectorStore(tmp_path / "v", DIM)
    await first.ensure_collection()
    await first.upsert([_point("t1", "kb1", "doc_a", 0)])
    await first.close()
    with pytest.raises(PermanentError, match="dimensional"):
        await EdgeVectorStore(tmp_path / "v", DIM * 2).ensure_collection()


async def test_server_store_refuses_other_dimensions() -> None:
    client = AsyncQdrantClient(location=":memory:")
    await QdrantServerStore(client, "chunks", DIM).ensure_collection()
    with pytest.raises(PermanentError, match="dimensional"):
        await QdrantServerStore(client, "chunks", DIM * 2).ensure_collection()
    await client.close()


async def test_embedded_store_optimises_when_idle(tmp_path: Path) -> None:
    store = EdgeVectorStore(tmp_path / "v", DIM, optimize_idle_s=0.2)
    await store.ensure_collection()
    await store.upsert([_point("t1", "kb1", f"doc_{i}", 0) for i in range(50)])
    await store.optimize()
    assert len(await store.search(_query("t1", ("kb1",), _unit(1), limit=50))) == 50
    await store.close()


def _segments(path: Path) -> int:
    return sum(1 for _ in (path / "segments").iterdir())


async def test_embedded_store_releases_what_optimisation_replaced(tmp_path: Path) -> None:
    """Documents written and deleted round after round, the store optimised after each: the
    segments an optimisation replaced are released (they stayed on disk and mapped in memory,
    one more each round, until the shard was closed)."""
    store = EdgeVectorStore(tmp_path / "v", DIM)
    await store.ensure_collection()
    for round_ in range(8):
        # Each round writes 300 points and deletes the 300 of four rounds ago: 1,200 stay, a
        # quarter of them deleted since the last optimisation (which then vacuums them).
        docs = [f"doc_{round_}_{n}" for n in range(100)]
        kb = f"kb{round_}"
        await store.upsert([_point("t1", kb, doc, i) for doc in docs for i in range(3)])
        if round_ >= 4:
            await store.delete(chunks_where("t1", kb_id=f"kb{round_ - 4}"))
        await store.optimize()
        assert _segments(tmp_path / "v") <= 2, round_
    assert await store.count(chunks_where("t1")) == 1200
    await store.close()


async def test_embedded_store_optimises_under_writes_that_never_pause(tmp_path: Path) -> None:
    interval = REGISTRY.get_sample_value(
        "ragline_vector_store_optimizations_total", {"trigger": "interval"}
    )
    store = EdgeVectorStore(tmp_path / "v", DIM, optimize_idle_s=60, optimize_every_s=1)
    await store.ensure_collection()
    for n in range(30):  # a write every 0.1 s for 3 s: never idle for a minute
        await store.upsert([_point("t1", "kb1", f"doc_{n}", 0)])
        await asyncio.sleep(0.1)
    after = REGISTRY.get_sample_value(
        "ragline_vector_store_optimizations_total", {"trigger": "interval"}
    )
    assert (after or 0) > (interval or 0)
    await store.close()


def _varied_points() -> list[ChunkPoint]:
    points = []
    for n in range(24):
        point = _point(
            f"t{n % 2}",
            f"kb{n % 3}",
            f"doc_{n % 5}",
            n,
            active=n % 4 != 0,
            source=f"file:{n % 2}.txt",
            version=n % 3 + 1,
        )
        headings = [["Install", "Setup"], ["Usage"], []][n % 3]
        varied = point.payload.model_copy(update={"heading_path": headings, "page": n % 7})
        points.append(ChunkPoint(point.point_id, point.dense, varied))
    return points


FILTERS = [
    Filter(),
    SearchScope("t1", ("kb0", "kb2"), EVERYONE).filter(),
    Filter(must=(Match("active", False),)),
    Filter(should=(Match("kb_id", "kb1"), Range("version", gte=3))),
    Filter(must_not=(Match("document_id", "doc_1"), Match("active", True))),
    Filter(must=(Match("heading_path", "Setup"),)),
    Filter(must=(MatchAny("heading_path", ("Usage", "Install")), Range("page", gte=2, lt=5))),
    Filter(
        must=(
            Match("tenant_id", "t0"),
            Filter(
                should=(
                    Match("source_key", "file:0.txt"),
                    Filter(must_not=(Match("kb_id", "kb0"),)),
                )
            ),
        )
    ),
    Filter(must=(Range("chunk_index", lt=10), Filter(should=(Match("version", 2),)))),
]


@pytest.mark.parametrize("selector", FILTERS, ids=range(len(FILTERS)))
async def test_the_store_selects_what_the_filter_model_matches(
    store: VectorStore, selector: Filter
) -> None:
    # One filter model, translated by each backend: the store agrees with `Filter.matches`.
    points = _varied_points()
    await store.upsert(points)
    expected = sum(1 for point in points if selector.matches(point.payload.to_store()))
    assert 0 < expected < len(points) or selector == Filter()
    assert await store.count(selector) == expected


async def test_readers_decide_what_a_search_sees_in_every_retriever(store: VectorStore) -> None:
    """Published chunks carry their document's readers; changing them needs no re-embedding
    and every retriever (dense, sparse, ranked, fetched) sees only what the caller may read."""
    sparse = SparseVector([7], [1.0])
    points = [
        ChunkPoint(
            point_id=chunk_point_id(doc, 0),
            dense=_unit(1),
            payload=ChunkPayload(
                tenant_id="t1", kb_id="kb1", document_id=doc, chunk_index=0, chunk_text=doc
            ),
            sparse=sparse,
        )
        for doc in ("doc_mine", "doc_theirs")
    ]
    await store.upsert(points)
    for doc, readers in (("doc_mine", ("user:me",)), ("doc_theirs", ("user:them",))):
        published = _published(doc, keep=1)
        await store.publish_document(PublishedDocument(**{**vars(published), "readers": readers}))
    me = SearchScope("t1", ("kb1",), ("tenant", "user:me"))

    async def seen() -> list[set[str]]:
        dense = _docs(await store.search(VectorQuery(me, _unit(1), 10)))
        lexical = _docs(
            await store.search(
                VectorQuery(me, _unit(1), 10, mode=RetrievalMode.SPARSE, sparse=sparse)
            )
        )
        rankings = await store.rank(
            RankQuery(me, _unit(1), 10, sparse=sparse, probes=(7,), probe_limit=10)
        )
        ranked = {store_id for store_id, _ in [*rankings.dense, *rankings.sparse]} | {
            point for point, _ in rankings.holding[7]
        }
        read = await store.read(me, [p.point_id for p in points])
        by_id = {p.point_id: p.payload.document_id for p in points}
        kept = {chunk.payload.document_id for chunk in read.values()}
        return [dense, lexical, {by_id[i] for i in ranked}, kept]

    assert await seen() == [{"doc_mine"}] * 4
    await store.set_readers(chunks_of_document("t1", "doc_theirs"), ["tenant"])
    assert await seen() == [{"doc_mine", "doc_theirs"}] * 4
    await store.set_readers(chunks_of_document("t1", "doc_mine"), [])
    assert await seen() == [{"doc_theirs"}] * 4
    payloads = await store.document_chunks("t1", "doc_theirs")
    assert payloads[0].readers == ["tenant"]


# Quantisation: a seeded set of clustered unit vectors (clusters as embeddings have them),
# in one KB, and queries drawn the same way.
RECALL_DIM = 64


def _clustered(count: int, seed: int) -> NDArray[np.float32]:
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(0).normal(size=(40, RECALL_DIM))
    vectors = centres[rng.integers(0, len(centres), count)] + 0.5 * rng.normal(
        size=(count, RECALL_DIM)
    )
    unit: NDArray[np.float32] = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(
        np.float32
    )
    return unit


def _recall_points(vectors: NDArray[np.float32]) -> list[ChunkPoint]:
    return [
        ChunkPoint(
            point_id=chunk_point_id(f"doc_{n}", 0),
            dense=vector,
            payload=ChunkPayload(
                tenant_id="t1",
                kb_id="kb1",
                document_id=f"doc_{n}",
                chunk_index=0,
                chunk_text=f"chunk {n}",
                active=True,
                readers=list(EVERYONE),
            ),
        )
        for n, vector in enumerate(vectors)
    ]


def _quantised_files(path: Path) -> int:
    return sum(1 for _ in path.rglob("quantized.data"))


@pytest.fixture(params=["edge", "qdrant"])
async def quantised(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    """Each implementation with int8 dense vectors; the embedded one indexes (and quantises) a
    segment from 16 KB of vectors on, so that a few thousand points are quantised."""
    opened: VectorStore
    if request.param == "edge":
        opened = EdgeVectorStore(
            tmp_path / "vectors", RECALL_DIM, quantization="int8", indexing_threshold_kb=16
        )
    else:
        opened = QdrantServerStore(AsyncQdrantClient(location=":memory:"), "chunks", RECALL_DIM)
    await opened.ensure_collection()
    yield opened
    await opened.close()


async def test_quantised_search_finds_what_exact_search_finds(
    quantised: VectorStore, tmp_path: Path
) -> None:
    """2,000 points, 50 queries: exact search is the true cosine top 10, and the quantised
    search (int8 candidates rescored with the originals) finds at least 99% of it (without
    rescoring, 95% of it). Qdrant's local mode, the server's stand-in here, always searches
    exactly (and slowly: it is asked 10 queries)."""
    vectors = _clustered(2000, seed=1)
    points = _recall_points(vectors)
    for start in range(0, len(points), 500):
        await quantised.upsert(points[start : start + 500])
    queries = _clustered(50, seed=2)
    if isinstance(quantised, EdgeVectorStore):
        await quantised.optimize()
        assert _quantised_files(tmp_path / "vectors") >= 1
    else:
        queries = queries[:10]
    scope = SearchScope("t1", ("kb1",), EVERYONE)
    found = 0
    for query in queries:
        truth = [points[n].point_id for n in np.argsort(-(vectors @ query))[:10]]
        exact = await quantised.search(VectorQuery(scope, query, 10, exact=True))
        assert [hit.point_id for hit in exact] == truth
        assert exact[0].score == pytest.approx(float(np.max(vectors @ query)), abs=1e-4)
        approximate = await quantised.search(VectorQuery(scope, query, 10))
        found += len({hit.point_id for hit in approximate} & set(truth))
        ranked = await quantised.rank(RankQuery(scope, query, 10, RetrievalMode.DENSE))
        assert [point for point, _ in ranked.dense] == [hit.point_id for hit in approximate]
    assert found / (len(queries) * 10) >= 0.99


async def test_an_unquantised_embedded_store_is_quantised_in_place(tmp_path: Path) -> None:
    """A store made before quantisation (float vectors in RAM) opens with int8 and searches as
    before; its next optimisation rebuilds its segments with int8 vectors, keeping the stored
    ones (nothing is written again)."""
    path = tmp_path / "vectors"
    vectors = _clustered(600, seed=3)
    points = _recall_points(vectors)
    old = EdgeVectorStore(path, RECALL_DIM, quantization="none", indexing_threshold_kb=16)
    await old.ensure_collection()
    await old.upsert(points)
    await old.optimize()
    await old.close()
    assert _quantised_files(path) == 0
    scope = SearchScope("t1", ("kb1",), EVERYONE)
    queries = _clustered(10, seed=4)
    expected = [
        [points[n].point_id for n in np.argsort(-(vectors @ query))[:10]] for query in queries
    ]

    store = EdgeVectorStore(path, RECALL_DIM, quantization="int8", indexing_threshold_kb=16)
    await store.ensure_collection()
    assert await store.count(chunks_where("t1")) == 600
    for query, truth in zip(queries, expected, strict=True):
        assert [h.point_id for h in await store.search(VectorQuery(scope, query, 10))] == truth
    await store.optimize()
    assert _quantised_files(path) >= 1
    assert await store.count(chunks_where("t1")) == 600
    for query, truth in zip(queries, expected, strict=True):
        assert [h.point_id for h in await store.search(VectorQuery(scope, query, 10))] == truth
        exact = await store.search(VectorQuery(scope, query, 10, exact=True))
        assert [h.point_id for h in exact] == truth
    await store.close()


async def test_a_store_keeps_in_ram_what_searches_read_up_to_a_size(tmp_path: Path) -> None:
    """By default the size decides, each time the store is opened: up to `in_ram_max_points`
    the floats (not quantised), the payloads and the sparse index are in RAM; beyond it int8
    copies are, and the floats and payloads stay on disk. Searches find the same either way."""
    path = tmp_path / "vectors"
    vectors = _clustered(600, seed=7)
    points = _recall_points(vectors)
    small = EdgeVectorStore(path, RECALL_DIM, indexing_threshold_kb=16, in_ram_max_points=1000)
    await small.ensure_collection()
    assert small.placement == Placement("none", in_ram=True)
    await small.upsert(points)
    await small.optimize()
    await small.close()
    assert _quantised_files(path) == 0
    scope = SearchScope("t1", ("kb1",), EVERYONE)
    queries = _clustered(10, seed=8)
    truths = [[points[n].point_id for n in np.argsort(-(vectors @ q))[:10]] for q in queries]
    for limit, placement in (
        (500, Placement("int8", in_ram=False)),
        (600, Placement("none", True)),
    ):
        store = EdgeVectorStore(path, RECALL_DIM, indexing_threshold_kb=16, in_ram_max_points=limit)
        await store.ensure_collection()
        assert store.placement == placement
        await store.optimize()
        assert (_quantised_files(path) >= 1) == (placement.quantization == "int8")
        for query, truth in zip(queries, truths, strict=True):
            hits = await store.search(VectorQuery(scope, query, 10))
            assert [h.point_id for h in hits] == truth
        await store.close()


async def test_an_unquantised_server_collection_opens_with_int8_and_searches() -> None:
    client = AsyncQdrantClient(location=":memory:")
    old = QdrantServerStore(client, "chunks", RECALL_DIM, quantization="none")
    await old.ensure_collection()
    vectors = _clustered(300, seed=5)
    points = _recall_points(vectors)
    await old.upsert(points)
    store = QdrantServerStore(client, "chunks", RECALL_DIM)
    await store.ensure_collection()
    query = _clustered(1, seed=6)[0]
    hits = await store.search(VectorQuery(SearchScope("t1", ("kb1",), EVERYONE), query, 10))
    assert [h.point_id for h in hits] == [
        points[n].point_id for n in np.argsort(-(vectors @ query))[:10]
    ]
    await client.close()
