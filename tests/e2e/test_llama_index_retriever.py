"""The client library's LlamaIndex retriever (`ragline_client.llama_index.RaglineRetriever`)
against the running API: the passage found as a scored text node with its metadata, what each
token may find (a person's own private note and not another's; a bot's own KB only; `kb_ids`
narrowing), sync and async clients in sync and async code, and a bad token's error. LlamaIndex
runs offline here (the suite sets `HF_HUB_OFFLINE`, and the machine has no internet): the
retriever needs none of its downloads.

Cost: about 4 s on the session's mechanics stack (the hashed embedder, no model), 2.5 s of it
indexing the module's six short texts once; starting that stack (about 10 s) falls to whichever
module of the session uses it first."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from ragline_client import AsyncRagline, AuthenticationError, Ragline
from ragline_client.llama_index import RaglineRetriever
from tests.conftest import RunningPipeline, unique
from tests.e2e.retriever_support import METADATA_TYPES

pytestmark = pytest.mark.e2e

WAIT_S = 120.0
TIDES = "https://example.test/harbour/tides"


@dataclass(frozen=True)
class Corpus:
    """The module's knowledge: three shared texts in one KB, one in another, two people's
    private notes beside the three, and the tokens that search them."""

    query: str
    kb_id: str
    kb_code: str
    other_kb_id: str
    # Document id -> its text, per group.
    shared: dict[str, str]
    other: dict[str, str]
    mia_note: str
    ned_note: str
    tides_id: str
    mia_token: str
    ned_token: str
    bot_token: str


@pytest.fixture(scope="module")
def corpus(stack: RunningPipeline) -> Corpus:
    """Indexes the module's texts (as the admin, and a private note each as two people) and
    issues the people's tokens and a token of a bot over the first KB."""
    run = unique("li")
    # A word no other module's texts hold (letters only, so that it is not taken for a code).
    word = "".join(chr(ord("a") + int(digit, 16)) for digit in run[3:])
    crane = f"{word} harbour crane"
    texts = {
        "Crane hours": f"The {crane} lifts containers from six in the morning until ten at night.",
        "Crane limits": f"The {crane} may not lift more than forty tonnes when the wind is up.",
        "Tides": f"Ships wait for high tide before the {crane} unloads them at the deep berth.",
    }
    with Ragline(base_url=stack.url, token=stack.admin_token) as admin:
        kb = admin.create_knowledge_base(name=f"Harbour {run}", code=run.replace("_", "-"))
        other_kb = admin.create_knowledge_base(name=f"Tours {run}")
        mia = admin.create_token(name="mia", role="user", user_id=f"mia-{run}")
        ned = admin.create_token(name="ned", role="user", user_id=f"ned-{run}")
        shared = [
            admin.add_text(
                kb.id,
                {"title": title, "content": text, **({"url": TIDES} if title == "Tides" else {})},
            )
            for title, text in texts.items()
        ]
        tour = f"Harbour tours pass under the {crane} on Saturday afternoons."
        other = admin.add_text(other_kb.id, title="Tours", content=tour)
        notes = []
        for person in (mia, ned):
            with Ragline(base_url=stack.url, token=person.token) as as_person:
                note = f"{person.name}'s note: the {crane} squeaked at noon."
                notes.append(as_person.add_text(kb.id, title="Notes", content=note))
        for document in [*shared, other, *notes]:
            final = admin.wait_until_final(document, timeout=WAIT_S, poll_interval=0.2)
            assert final.parse_status == "indexed", final
        bot = admin.create_bot(
            name=f"Harbour master {run}",
            knowledge={"enabled": True, "kb_ids": [kb.id], "score_threshold": 0.0},
        )
        bot_token = admin.create_bot_token(bot.id, name="agent").token
    assert kb.code is not None
    return Corpus(
        query=crane,
        kb_id=kb.id,
        kb_code=kb.code,
        other_kb_id=other_kb.id,
        shared={document.id: text for document, text in zip(shared, texts.values(), strict=True)},
        other={other.id: tour},
        mia_note=notes[0].id,
        ned_note=notes[1].id,
        tides_id=shared[2].id,
        mia_token=mia.token,
        ned_token=ned.token,
        bot_token=bot_token,
    )


@pytest.fixture(scope="module")
def mia(stack: RunningPipeline, corpus: Corpus) -> Iterator[Ragline]:
    """A sync client with Mia's token."""
    with Ragline(base_url=stack.url, token=corpus.mia_token) as client:
        yield client


@pytest.fixture(scope="module")
async def mia_async(stack: RunningPipeline, corpus: Corpus) -> AsyncIterator[AsyncRagline]:
    """An async client with Mia's token."""
    async with AsyncRagline(base_url=stack.url, token=corpus.mia_token) as client:
        yield client


@pytest.fixture(scope="module")
def bot(stack: RunningPipeline, corpus: Corpus) -> Iterator[Ragline]:
    """A sync client with the bot's token."""
    with Ragline(base_url=stack.url, token=corpus.bot_token) as client:
        yield client


@pytest.fixture(scope="module")
async def bot_async(stack: RunningPipeline, corpus: Corpus) -> AsyncIterator[AsyncRagline]:
    """An async client with the bot's token."""
    async with AsyncRagline(base_url=stack.url, token=corpus.bot_token) as client:
        yield client


def ids_of(found: list[NodeWithScore]) -> set[str]:
    """The documents the passages are from."""
    return {result.node.metadata["document_id"] for result in found}


def test_the_passage_comes_back_as_a_scored_node(corpus: Corpus, mia: Ragline) -> None:
    found = RaglineRetriever(client=mia, k=10, kb_ids=[corpus.kb_id]).retrieve(corpus.query)
    # The three shared texts and Mia's own note, not Ned's.
    assert ids_of(found) == {*corpus.shared, corpus.mia_note}
    results = mia.search(corpus.query, kb_ids=[corpus.kb_id], top_k=10).results
    assert [(r.node.metadata["document_id"], r.score) for r in found] == [
        (hit.source, hit.score) for hit in results
    ]
    for result, hit in zip(found, results, strict=True):
        node = result.node
        assert isinstance(node, TextNode)
        assert node.text == hit.content
        metadata = node.metadata
        assert set(metadata) == set(METADATA_TYPES)
        for key, types in METADATA_TYPES.items():
            assert isinstance(metadata[key], types), (key, metadata[key])
        document_id = metadata["document_id"]
        if document_id in corpus.shared:
            assert corpus.shared[document_id] in node.text
        assert node.node_id == f"{document_id}:{metadata['chunk_index']}"
        assert node.ref_doc_id == document_id
        assert metadata["kb_id"] == corpus.kb_id
        assert metadata["citation"] == hit.citation
        assert metadata["url"] == (TIDES if document_id == corpus.tides_id else None)
        assert result.score == metadata["score"]
        assert result.score is not None
        assert 0 < result.score <= 1
    scores = [result.get_score() for result in found]
    assert scores == sorted(scores, reverse=True)
    # What a model is shown with a passage: its citation (and address), not ids nor scores.
    tides = next(r.node for r in found if r.node.metadata["document_id"] == corpus.tides_id)
    shown = tides.get_content(metadata_mode=MetadataMode.LLM)
    assert tides.metadata["citation"] in shown
    assert TIDES in shown
    assert corpus.shared[corpus.tides_id] in shown
    assert corpus.tides_id not in shown
    assert "retrieval_rationale" not in shown


def test_a_person_does_not_find_another_persons_private_note(
    stack: RunningPipeline, corpus: Corpus, mia: Ragline
) -> None:
    as_mia = ids_of(RaglineRetriever(client=mia, k=10).retrieve(corpus.query))
    assert corpus.mia_note in as_mia
    assert corpus.ned_note not in as_mia
    with Ragline(base_url=stack.url, token=corpus.ned_token) as ned:
        as_ned = ids_of(RaglineRetriever(client=ned, k=10).retrieve(corpus.query))
    assert corpus.ned_note in as_ned
    assert corpus.mia_note not in as_ned


def test_kb_ids_narrow_the_search(corpus: Corpus, mia: Ragline) -> None:
    everywhere = ids_of(RaglineRetriever(client=mia, k=10).retrieve(corpus.query))
    assert {*corpus.shared, *corpus.other} <= everywhere
    other_only = RaglineRetriever(client=mia, k=10, kb_ids=[corpus.other_kb_id])
    assert ids_of(other_only.retrieve(corpus.query)) == set(corpus.other)
    by_code = RaglineRetriever(client=mia, k=10, kb_ids=[corpus.kb_code])
    assert ids_of(by_code.retrieve(corpus.query)) == {*corpus.shared, corpus.mia_note}
    # `k` bounds the passages.
    assert len(RaglineRetriever(client=mia, k=2, kb_ids=[corpus.kb_id]).retrieve(corpus.query)) == 2


def test_a_bot_finds_only_its_own_kb(corpus: Corpus, bot: Ragline) -> None:
    # Its KB's shared texts: not the other KB's, nor anyone's private note.
    assert ids_of(RaglineRetriever(client=bot, k=10).retrieve(corpus.query)) == set(corpus.shared)
    # A KB it is not attached to is dropped, so nothing is left to search.
    elsewhere = RaglineRetriever(client=bot, k=10, kb_ids=[corpus.other_kb_id])
    assert elsewhere.retrieve(corpus.query) == []


async def test_a_bot_finds_only_its_own_kb_async(corpus: Corpus, bot_async: AsyncRagline) -> None:
    found = await RaglineRetriever(client=bot_async, k=10).aretrieve(corpus.query)
    assert ids_of(found) == set(corpus.shared)


async def test_aretrieve_works_with_either_client(
    corpus: Corpus, mia: Ragline, mia_async: AsyncRagline
) -> None:
    expected = RaglineRetriever(client=mia, k=3, kb_ids=[corpus.kb_id]).retrieve(corpus.query)
    # The async client awaited, and the sync client's call in a worker thread: the same hits.
    for client in (mia_async, mia):
        retriever = RaglineRetriever(client=client, k=3, kb_ids=[corpus.kb_id])
        found = await retriever.aretrieve(corpus.query)
        assert [(r.node.node_id, r.score) for r in found] == [
            (r.node.node_id, r.score) for r in expected
        ]


def test_an_async_client_refuses_sync_calls_plainly(
    corpus: Corpus, mia_async: AsyncRagline
) -> None:
    retriever = RaglineRetriever(client=mia_async, kb_ids=[corpus.kb_id])
    with pytest.raises(RuntimeError, match=r"AsyncRagline .*aretrieve.*Ragline \(sync\) client"):
        retriever.retrieve(corpus.query)


def test_a_bad_token_raises_authentication_error(stack: RunningPipeline, corpus: Corpus) -> None:
    with (
        Ragline(base_url=stack.url, token="rl_not-a-token") as client,
        pytest.raises(AuthenticationError) as refused,
    ):
        RaglineRetriever(client=client).retrieve(corpus.query)
    assert refused.value.status_code == 401


async def test_a_bad_token_raises_authentication_error_async(
    stack: RunningPipeline, corpus: Corpus
) -> None:
    async with AsyncRagline(base_url=stack.url, token="rl_not-a-token") as client:
        with pytest.raises(AuthenticationError):
            await RaglineRetriever(client=client).aretrieve(corpus.query)


def test_wrong_settings_are_refused_at_construction(mia: Ragline) -> None:
    with pytest.raises(TypeError, match="Ragline or an AsyncRagline"):
        RaglineRetriever(client="http://127.0.0.1:8000")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be"):
        RaglineRetriever(client=mia, k=0)
    with pytest.raises(TypeError, match="not one string"):
        RaglineRetriever(client=mia, kb_ids="handbook")
    with pytest.raises(ValueError, match="retrieval_mode"):
        RaglineRetriever(client=mia, retrieval_mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="score_threshold"):
        RaglineRetriever(client=mia, score_threshold=1.5)


def python(code: str) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a fresh interpreter of this environment, warnings as errors."""
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )


def test_the_client_loads_llama_index_only_for_the_retriever() -> None:
    plain = python(
        "import sys, ragline_client; "
        "assert not [m for m in sys.modules if m.startswith('llama_index')], sys.modules"
    )
    assert plain.returncode == 0, plain.stderr
    # The retriever, imported and used by this module's tests, loaded no tokenizer nor NLTK
    # (whose data LlamaIndex would download); its import warned of nothing, or this module's
    # collection would have failed (the suite's warnings are errors).
    assert not [name for name in sys.modules if name.startswith(("nltk", "tiktoken"))]
    # Without LlamaIndex installed, importing the retriever says what to install.
    missing = python(
        "import sys; sys.modules['llama_index'] = None; import ragline_client.llama_index"
    )
    assert missing.returncode == 1
    assert "ImportError" in missing.stderr
    assert "pip install 'ragline-client[llama-index]'" in missing.stderr
