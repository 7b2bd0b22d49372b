"""The client library's LangChain retriever (`ragline_client.langchain.RaglineRetriever`) against
the running API: LangChain's own standard retriever suite (langchain-tests), run as a person and
as a bot, then what a user of it sees: the passages and their metadata, sync and async clients
in sync and async code, a person's and a bot's token, `kb_ids`, `retrieval_mode` and
`score_threshold` (set on the retriever or for one call), and a bad token's error.

Cost: about 4 s on the session's mechanics stack (the hashed embedder, no model), 2.5 s of it
indexing the module's seven short texts once; starting that stack (about 10 s) falls to whichever
module of the session uses it first."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from ragline_client import AsyncRagline, AuthenticationError, InvalidRequestError, Ragline
from ragline_client.langchain import RaglineRetriever
from tests.conftest import RunningPipeline, unique
from tests.e2e.retriever_support import METADATA_TYPES

pytestmark = pytest.mark.e2e

WAIT_S = 120.0
# The texts that have an address, by title.
URLS = {"Rotation": "https://example.test/lighthouse/rotation"}


@dataclass(frozen=True)
class Corpus:
    """The module's knowledge: five shared texts in one KB, one in another, a person's private
    note beside the five, and the tokens that search them."""

    query: str
    kb_id: str
    kb_code: str
    other_kb_id: str
    # Document id -> its text, per group.
    shared: dict[str, str]
    other: dict[str, str]
    private_id: str
    titles: dict[str, str]
    urls: dict[str, str]
    person_token: str
    bot_token: str


@pytest.fixture(scope="module")
def corpus(stack: RunningPipeline) -> Corpus:
    """Indexes the module's texts (as the admin, and one as another person) and issues a
    person's token and a token of a bot over the first KB."""
    run = unique("lc")
    # A word no other module's texts hold (letters only, so that it is not taken for a code).
    word = "".join(chr(ord("a") + int(digit, 16)) for digit in run[3:])
    lamp = f"{word} lighthouse lamp"
    shared_texts = {
        "Lamp hours": f"The {lamp} is lit at dusk by the keeper on duty and put out at dawn.",
        "Spare bulbs": f"Spare bulbs for the {lamp} are kept in the brass cabinet by the stairs.",
        "Rotation": f"The {lamp} turns once every twelve seconds, unlike the harbour light.",
        "Lens cleaning": f"Cleaning the lens of the {lamp} takes two people and a dry cloth.",
        "Lamp failure": f"When the {lamp} fails, the keeper raises the storm flag and radios.",
    }
    with Ragline(base_url=stack.url, token=stack.admin_token) as admin:
        kb = admin.create_knowledge_base(name=f"Lighthouse {run}", code=run.replace("_", "-"))
        other_kb = admin.create_knowledge_base(name=f"Visits {run}")
        person = admin.create_token(name="mia", role="user", user_id=f"mia-{run}")
        ned = admin.create_token(name="ned", role="user", user_id=f"ned-{run}")
        shared = [
            admin.add_text(kb.id, {"title": title, "content": content, **_url(title)})
            for title, content in shared_texts.items()
        ]
        visits = f"Visitors may climb the {lamp} tower to see the lamp room on summer Sundays."
        other = admin.add_text(other_kb.id, title="Visits", content=visits)
        with Ragline(base_url=stack.url, token=ned.token) as as_ned:
            note = f"Ned's own note: the {lamp} flickered on Tuesday night."
            private = as_ned.add_text(kb.id, title="Ned's notes", content=note)
        documents = [*shared, other, private]
        for document in documents:
            final = admin.wait_until_final(document, timeout=WAIT_S, poll_interval=0.2)
            assert final.parse_status == "indexed", final
        bot = admin.create_bot(
            name=f"Keeper {run}",
            knowledge={"enabled": True, "kb_ids": [kb.id], "score_threshold": 0.0},
        )
        bot_token = admin.create_bot_token(bot.id, name="agent").token
    assert kb.code is not None
    return Corpus(
        query=lamp,
        kb_id=kb.id,
        kb_code=kb.code,
        other_kb_id=other_kb.id,
        shared={
            document.id: content
            for document, content in zip(shared, shared_texts.values(), strict=True)
        },
        other={other.id: visits},
        private_id=private.id,
        titles={document.id: document.title or "" for document in documents},
        urls={
            document.id: URLS[title]
            for document, title in zip(shared, shared_texts, strict=True)
            if title in URLS
        },
        person_token=person.token,
        bot_token=bot_token,
    )


def _url(title: str) -> dict[str, str]:
    """The text's address, for the one text that has one."""
    return {"url": URLS[title]} if title in URLS else {}


@pytest.fixture(scope="module")
def person(stack: RunningPipeline, corpus: Corpus) -> Iterator[Ragline]:
    """A sync client with the person's token."""
    with Ragline(base_url=stack.url, token=corpus.person_token) as client:
        yield client


@pytest.fixture(scope="module")
async def person_async(stack: RunningPipeline, corpus: Corpus) -> AsyncIterator[AsyncRagline]:
    """An async client with the person's token."""
    async with AsyncRagline(base_url=stack.url, token=corpus.person_token) as client:
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


class TestStandardSuiteAsPerson(RetrieversIntegrationTests):
    """LangChain's standard retriever tests: a person's sync client over the lighthouse KB."""

    corpus: Corpus
    client: Ragline

    @pytest.fixture(autouse=True)
    def _searcher(self, corpus: Corpus, person: Ragline) -> None:
        self.corpus, self.client = corpus, person

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        """The retriever under test."""
        return RaglineRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        """Its client and KB (the suite sets `k` itself)."""
        return {"client": self.client, "kb_ids": [self.corpus.kb_id]}

    @property
    def retriever_query_example(self) -> str:
        """A query that all five shared texts of the KB answer."""
        return self.corpus.query


class TestStandardSuiteAsBot(TestStandardSuiteAsPerson):
    """LangChain's standard retriever tests: a bot's sync client, which needs no `kb_ids` (a
    bot searches its own KBs)."""

    @pytest.fixture(autouse=True)
    def _searcher(self, corpus: Corpus, bot: Ragline) -> None:
        self.corpus, self.client = corpus, bot

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        """Its client only."""
        return {"client": self.client}


def ids_of(documents: list[Document]) -> set[str]:
    """The documents the passages are from."""
    return {document.metadata["document_id"] for document in documents}


def test_documents_carry_the_passage_and_where_it_is_from(corpus: Corpus, person: Ragline) -> None:
    retriever = RaglineRetriever(client=person, k=10, kb_ids=[corpus.kb_id])
    found = retriever.invoke(corpus.query)
    # The five shared texts, not the other person's private note beside them; each passage
    # holds its text (under its title).
    assert ids_of(found) == set(corpus.shared)
    for document in found:
        metadata = document.metadata
        assert corpus.shared[metadata["document_id"]] in document.page_content
        assert set(metadata) == set(METADATA_TYPES)
        for key, types in METADATA_TYPES.items():
            assert isinstance(metadata[key], types), (key, metadata[key])
        assert all(isinstance(heading, str) for heading in metadata["heading_path"])
        document_id = metadata["document_id"]
        assert document.id == f"{document_id}:{metadata['chunk_index']}"
        assert metadata["kb_id"] == corpus.kb_id
        assert metadata["title"] == corpus.titles[document_id]
        assert metadata["citation"].startswith(corpus.titles[document_id])
        assert metadata["url"] == corpus.urls.get(document_id)
        assert 0 < metadata["score"] <= 1
    scores = [document.metadata["score"] for document in found]
    assert scores == sorted(scores, reverse=True)
    # The same as the client's own search answers, hit for hit.
    results = person.search(corpus.query, kb_ids=[corpus.kb_id], top_k=10).results
    assert [(d.metadata["document_id"], d.metadata["score"]) for d in found] == [
        (hit.source, hit.score) for hit in results
    ]
    assert [d.page_content for d in found] == [hit.content for hit in results]
    assert [d.metadata["citation"] for d in found] == [hit.citation for hit in results]
    assert [d.metadata["heading_path"] for d in found] == [
        hit.heading_path or [] for hit in results
    ]


async def test_ainvoke_works_with_either_client(
    corpus: Corpus, person: Ragline, person_async: AsyncRagline
) -> None:
    expected = RaglineRetriever(client=person, k=4, kb_ids=[corpus.kb_id]).invoke(corpus.query)
    assert len(expected) == 4
    # The async client awaited, and the sync client's call in a worker thread: the same hits.
    for client in (person_async, person):
        retriever = RaglineRetriever(client=client, k=4, kb_ids=[corpus.kb_id])
        assert await retriever.ainvoke(corpus.query) == expected
        # `k` and `kb_ids` for one call, as with invoke.
        assert await retriever.ainvoke(corpus.query, k=2) == expected[:2]
        elsewhere = await retriever.ainvoke(corpus.query, kb_ids=[corpus.other_kb_id])
        assert ids_of(elsewhere) == set(corpus.other)


def test_an_async_client_refuses_sync_calls_plainly(
    corpus: Corpus, person_async: AsyncRagline
) -> None:
    retriever = RaglineRetriever(client=person_async, kb_ids=[corpus.kb_id])
    with pytest.raises(RuntimeError, match=r"AsyncRagline .*ainvoke.*Ragline \(sync\) client"):
        retriever.invoke(corpus.query)


def test_a_person_reads_what_they_may_narrowed_by_kb_ids(corpus: Corpus, person: Ragline) -> None:
    everywhere = RaglineRetriever(client=person, k=10).invoke(corpus.query)
    # Every KB of the tenant: both KBs' shared texts, never the other person's note.
    assert set(corpus.shared) | set(corpus.other) <= ids_of(everywhere)
    assert corpus.private_id not in ids_of(everywhere)
    other_only = RaglineRetriever(client=person, k=10, kb_ids=[corpus.other_kb_id])
    assert ids_of(other_only.invoke(corpus.query)) == set(corpus.other)
    # A call's kb_ids (here a KB's code) replaces the retriever's.
    by_code = other_only.invoke(corpus.query, kb_ids=[corpus.kb_code])
    assert ids_of(by_code) == set(corpus.shared)
    assert {d.metadata["kb_id"] for d in by_code} == {corpus.kb_id}


def test_retrieval_mode_and_score_threshold_are_honoured(corpus: Corpus, person: Ragline) -> None:
    # Dense retrieval with a threshold no passage reaches: nothing.
    strict = RaglineRetriever(
        client=person, k=10, kb_ids=[corpus.kb_id], retrieval_mode="dense", score_threshold=0.99
    )
    assert strict.invoke(corpus.query) == []
    # The call's threshold replaces the retriever's: every passage, scored by its cosine.
    every = strict.invoke(corpus.query, score_threshold=0.0)
    assert ids_of(every) == set(corpus.shared)
    assert all(d.metadata["retrieval_rationale"].startswith("semantic match") for d in every)
    # A threshold between two passages' scores keeps those above it.
    scores = [d.metadata["score"] for d in every]
    gaps = [(high - low, place) for place, (high, low) in enumerate(itertools.pairwise(scores))]
    gap, place = max(gaps)
    assert gap > 0.005, scores
    between = (scores[place] + scores[place + 1]) / 2
    kept = strict.invoke(corpus.query, score_threshold=between)
    assert [d.metadata["score"] for d in kept] == scores[: place + 1]
    # Keyword retrieval, asked for one call.
    keyword = strict.invoke(corpus.query, retrieval_mode="sparse", score_threshold=0.0)
    assert ids_of(keyword) == set(corpus.shared)
    assert all(d.metadata["retrieval_rationale"].startswith("keyword match") for d in keyword)


def test_a_call_with_an_unknown_argument_is_refused(corpus: Corpus, person: Ragline) -> None:
    retriever = RaglineRetriever(client=person, kb_ids=[corpus.kb_id])
    with pytest.raises(TypeError, match="top_k; a call may set k, kb_ids"):
        retriever.invoke(corpus.query, top_k=2)
    with pytest.raises(TypeError, match="not one string"):
        retriever.invoke(corpus.query, kb_ids=corpus.kb_id)
    with pytest.raises(ValueError, match="top_k"):
        RaglineRetriever(client=person, top_k=2)  # type: ignore[call-arg]


def test_a_bot_searches_only_its_own_kb(corpus: Corpus, bot: Ragline) -> None:
    retriever = RaglineRetriever(client=bot, k=10)
    found = retriever.invoke(corpus.query)
    # Its KB's shared texts: not the other KB's, not a person's private note.
    assert ids_of(found) == set(corpus.shared)
    # A KB it is not attached to is dropped, so nothing is left to search.
    assert retriever.invoke(corpus.query, kb_ids=[corpus.other_kb_id]) == []
    # A bot searches in its own mode, ten passages at most: the API says so.
    with pytest.raises(InvalidRequestError, match="retrieval_mode"):
        retriever.invoke(corpus.query, retrieval_mode="dense")
    with pytest.raises(InvalidRequestError, match="top_k"):
        retriever.invoke(corpus.query, k=11)


async def test_a_bot_searches_only_its_own_kb_async(
    corpus: Corpus, bot_async: AsyncRagline
) -> None:
    retriever = RaglineRetriever(client=bot_async, k=10)
    assert ids_of(await retriever.ainvoke(corpus.query)) == set(corpus.shared)
    assert await retriever.ainvoke(corpus.query, kb_ids=[corpus.other_kb_id]) == []


def test_a_bad_token_raises_authentication_error(stack: RunningPipeline, corpus: Corpus) -> None:
    with (
        Ragline(base_url=stack.url, token="rl_not-a-token") as client,
        pytest.raises(AuthenticationError) as refused,
    ):
        RaglineRetriever(client=client).invoke(corpus.query)
    assert refused.value.status_code == 401


async def test_a_bad_token_raises_authentication_error_async(
    stack: RunningPipeline, corpus: Corpus
) -> None:
    async with AsyncRagline(base_url=stack.url, token="rl_not-a-token") as client:
        with pytest.raises(AuthenticationError):
            await RaglineRetriever(client=client).ainvoke(corpus.query)
    with (
        Ragline(base_url=stack.url, token="rl_not-a-token") as sync_client,
        pytest.raises(AuthenticationError),
    ):
        await RaglineRetriever(client=sync_client).ainvoke(corpus.query)


def python(code: str) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a fresh interpreter of this environment, warnings as errors."""
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )


def test_the_client_loads_langchain_only_for_the_retriever() -> None:
    plain = python(
        "import sys, ragline_client; "
        "assert not [m for m in sys.modules if m.startswith('langchain')], sys.modules"
    )
    assert plain.returncode == 0, plain.stderr
    # Without LangChain installed, importing the retriever says what to install.
    missing = python(
        "import sys; sys.modules['langchain_core'] = None; import ragline_client.langchain"
    )
    assert missing.returncode == 1
    assert "ImportError" in missing.stderr
    assert "pip install 'ragline-client[langchain]'" in missing.stderr
