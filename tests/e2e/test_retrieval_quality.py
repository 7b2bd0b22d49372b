"""Answer quality on messy knowledge bases: copies in several formats, codes in tables."""

from __future__ import annotations

import io
import itertools
import random
import re
from typing import Any

import docx
import pytest

from tests.conftest import FIXTURES, RunningPipeline
from tests.e2e.client import Api
from workers.extract.extractors import extract

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(running_pipeline: RunningPipeline) -> RunningPipeline:
    """The session's stack with the packaged model: which passage ranks first is the
    model's doing."""
    return running_pipeline


TWIN_QUERIES = (
    "What does the National Hydro Network data model describe?",
    "revision history of the data model drafts",
    "How are waterbodies and watercourses represented?",
)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _shared(first: str, second: str, size: int = 5) -> float:
    """Word 5-grams the two texts share, over those of the shorter one."""
    a, b = (
        {tuple(words[i : i + size]) for i in range(max(1, len(words) - size + 1))}
        for words in (_words(first), _words(second))
    )
    return len(a & b) / max(1, min(len(a), len(b)))


def _docx(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, values in zip(grid.rows, table, strict=True):
            for cell, value in zip(row.cells, values, strict=True):
                cell.text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


async def _bot(api: Api, kb_ids: list[str], **knowledge: Any) -> str:
    response = await api.http.post(
        "/api/v1/bots",
        json={"name": "quality", "knowledge": {"enabled": True, "kb_ids": kb_ids, **knowledge}},
        headers=api.auth,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _search(api: Api, body: dict[str, Any]) -> list[dict[str, Any]]:
    if "bot_id" in body:
        body = {"session_id": "s", **body}
    return await api.internal_search(body)


async def test_a_pdf_and_its_docx_twin_give_four_distinct_passages(api: Api) -> None:
    pdf = (FIXTURES / "GeoBase_NHNC1_Data_Model_UML_EN.pdf").read_bytes()
    # The DOCX twin: the same text, a paragraph per line, as someone would retype it.
    lines = [line for s in extract(pdf, "model.pdf").segments for line in s.text.splitlines()]
    twin = _docx([line for line in lines if line.strip()])
    first_kb, second_kb = await api.create_kb("Hydro"), await api.create_kb("Hydro copy")
    pdf_doc = await api.upload(first_kb["id"], "hydro-model.pdf", pdf)
    docx_doc = await api.upload(first_kb["id"], "hydro-model.docx", twin)
    # The same PDF in a second KB: copies across KBs fold too.
    copy_doc = await api.upload(second_kb["id"], "hydro-model.pdf", pdf)
    for kb, doc in ((first_kb, pdf_doc), (first_kb, docx_doc), (second_kb, copy_doc)):
        assert (await api.wait_final(kb["id"], doc["id"]))["parse_status"] == "indexed"
    kbs = [first_kb["id"], second_kb["id"]]
    twins = {pdf_doc["id"], docx_doc["id"], copy_doc["id"]}
    searches = [
        {"bot_id": await _bot(api, kbs, retrieval_mode=mode, top_k=4, score_threshold=0.0)}
        for mode in ("hybrid", "dense")
    ] + [{"tenant_id": "default", "kb_ids": kbs, "retrieval_mode": "sparse", "top_k": 4}]
    folded = 0
    for search, query in itertools.product(searches, TWIN_QUERIES):
        hits = await _search(api, {**search, "query": query})
        assert len(hits) == 4, (search, query)
        for first, second in itertools.combinations(hits, 2):
            assert _shared(first["chunk_text"], second["chunk_text"]) < 0.5, (
                search,
                query,
                [
                    (
                        h["document_id"],
                        h["chunk_index"],
                        h["retrieval_rationale"],
                        [(c["document_id"], c["chunk_index"]) for c in h["also_in"]],
                    )
                    for h in hits
                ],
            )
        for hit in hits:
            copies = {copy["document_id"] for copy in hit["also_in"]}
            assert copies <= twins - {hit["document_id"]}
            folded += bool(copies)
            for copy in hit["also_in"]:
                assert copy["document_title"]
                assert copy["kb_id"] in kbs
    # The copies were there to fold: most passages list their twins.
    assert folded >= len(searches) * len(TWIN_QUERIES) * 2


def _catalogue(rng: random.Random, codes: list[str]) -> bytes:
    parts = ["pump", "valve", "gasket", "flange", "hose", "filter", "bearing", "seal"]
    rows = [["Part number", "Description", "Price"]]
    for code in codes:
        rows.append([code, f"{rng.choice(parts)} {rng.choice(parts)} assembly", "EUR 12.40"])
    return _docx(
        ["Spare parts catalogue", "Prices include delivery to any depot in the region."],
        rows,
    )


# 200 DOCX files through the pipeline with the packaged model: about a minute alone, more than
# the suite's default bound of three minutes on a loaded machine.
@pytest.mark.timeout(600)
async def test_a_rare_code_in_a_docx_table_is_the_first_hybrid_hit(api: Api) -> None:
    rng = random.Random(7)
    kb = await api.create_kb("Parts")
    target = "QX-7781-B"
    # 200 similar catalogues whose codes share every part of the target's: QX, 7781, B.
    decoys = [f"QX-{n}-{suffix}" for n in range(7700, 7800) for suffix in "AC"]
    rng.shuffle(decoys)
    uploads = []
    for n in range(200):
        codes = decoys[n : n + 6]
        if n == 117:
            codes = [*codes[:3], target, *codes[3:]]
        uploads.append(
            await api.upload(kb["id"], f"catalogue-{n:03d}.docx", _catalogue(rng, codes))
        )
    for uploaded in uploads:
        assert (await api.wait_final(kb["id"], uploaded["id"]))["parse_status"] == "indexed"
    bot = await _bot(api, [kb["id"]], retrieval_mode="hybrid", top_k=4)
    for query in (target, f"What does part {target} cost?", "qx-7781-b price"):
        hits = await _search(api, {"bot_id": bot, "query": query})
        assert hits, query
        assert hits[0]["document_id"] == uploads[117]["id"], query
        assert target in hits[0]["chunk_text"]
