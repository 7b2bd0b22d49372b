"""The client library (`ragline_client`) against the running API, as an agent developer uses
it: knowledge bases by id and code, documents of every kind through to indexed, listings page
by page, bots and tokens, each search contract, governance, operations' listings, backups,
and every refusal as its typed error.

Cost: about 30 s on the session's mechanics stack (hashed embedder, no model); a few dozen
small documents.
"""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from ragline_client import (
    APIConnectionError,
    AsyncRagline,
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    Ragline,
    UnsupportedMediaTypeError,
    WaitTimeout,
)
from ragline_client.models import DocumentOut, KeyedRecord, KnowledgeBaseCreate
from schemas.domain import Role
from tests.conftest import FIXTURES, RunningPipeline, unique

pytestmark = pytest.mark.e2e

WAIT_S = 120


@pytest.fixture
def admin(stack: RunningPipeline) -> Iterator[Ragline]:
    """The sync client as the tenant's admin."""
    with Ragline(base_url=stack.url, token=stack.admin_token) as client:
        yield client


def _indexed(client: Ragline, document: DocumentOut) -> DocumentOut:
    final = client.wait_until_final(document, timeout=WAIT_S)
    assert final.parse_status == "indexed", final.parse_error
    return final


def test_a_knowledge_base_fills_from_every_kind_of_document_and_answers_by_code(
    admin: Ragline, tmp_path: Path
) -> None:
    code = unique("kb").replace("_", "-")[:32]
    kb = admin.create_knowledge_base(KnowledgeBaseCreate(name="Handbook", code=code))
    assert admin.get_knowledge_base(code).id == kb.id
    assert kb.id in {k.id for k in admin.list_knowledge_bases()}
    assert admin.update_knowledge_base(code, description="How we work").description == (
        "How we work"
    )

    pdf = admin.upload_file(code, FIXTURES / "crazyones.pdf")
    assert pdf.parse_status == "queued"
    again = admin.upload_file(code, (FIXTURES / "crazyones.pdf").read_bytes(), filename="c.pdf")
    text_file = io.BytesIO(b"The ferry to Vashon leaves at 7:40 from pier 52.")
    text_file.name = "ferry.txt"
    ferry = admin.upload_file(code, text_file, governance={"tags": ["travel", "ferry"]})
    note = admin.add_text(code, title="Refunds", content="Refunds take 14 days to arrive.")
    for document in (pdf, again, ferry, note):
        _indexed(admin, document)
    assert admin.get_document(code, ferry.id).tags == ["travel", "ferry"]

    records = admin.add_records(
        code,
        records=[
            KeyedRecord(external_id=f"faq-{n}", title=f"FAQ {n}", content=f"Answer number {n}.")
            for n in range(5)
        ],
    )
    assert [r.outcome for r in records.results] == ["created"] * 5
    faq = {r.external_id: r.document_id for r in records.results}
    for result in records.results:
        _indexed(admin, admin.get_document(code, result.document_id))
    replaced = admin.replace_record(code, faq["faq-0"], content="A better answer.")
    _indexed(admin, replaced)
    assert admin.get_document_content(code, replaced.id).content.strip() == "A better answer."
    assert admin.list_document_chunks(code, replaced.id).items

    # Listing walks every page: 2 at a time over the KB's documents.
    listed = list(admin.list_documents(code, page_size=2))
    assert len({d.id for d in listed}) == len(listed)
    assert {note.id, ferry.id, replaced.id} <= {d.id for d in listed}
    assert [d.id for d in admin.list_documents(code, external_id="faq-1")] == [faq["faq-1"]]

    synced = admin.sync_source(
        code,
        source="wiki-export",
        records=[{"external_id": "w1", "title": "Wiki", "content": "Synced page."}],
    )
    assert synced.results[0].outcome == "created"

    found = admin.search("When does the ferry leave?", kb_ids=[code], top_k=3)
    assert found.results[0].source == ferry.id
    assert found.results[0].kb_id == kb.id

    archived = admin.update_document(code, ferry.id, archived=True)
    assert archived.archived_at is not None
    admin.delete_document(code, note.id)
    with pytest.raises(NotFoundError):
        admin.get_document(code, note.id)
    disabled = admin.delete_knowledge_base(code)
    assert disabled is not None
    assert disabled.status == "disabled"
    assert admin.search("When does the ferry leave?", kb_ids=[code]).results == []
    assert admin.delete_knowledge_base(code, hard=True) is None
    with pytest.raises(NotFoundError):
        admin.get_knowledge_base(code)


def test_bots_tokens_and_each_search_contract(stack: RunningPipeline, admin: Ragline) -> None:
    kb = admin.create_knowledge_base(name="Ops")
    other = admin.create_knowledge_base(name="Elsewhere")
    shared = admin.add_text(kb.id, title="Generator", content="The generator starts at dawn.")
    hidden = admin.add_text(other.id, title="Generator too", content="The generator is blue.")
    _indexed(admin, shared)
    _indexed(admin, hidden)
    bot = admin.create_bot(name=unique("bot"), knowledge={"enabled": True, "kb_ids": [kb.id]})
    assert admin.get_bot(bot.id).name == bot.name
    assert bot.id in {b.id for b in admin.list_bots()}
    assert admin.update_bot(bot.id, name="Renamed").name == "Renamed"
    assert admin.get_bot_tools(bot.id).openai
    issued = admin.create_bot_token(bot.id, name="agent")
    assert [t.id for t in admin.list_bot_tokens(bot.id)] == [issued.id]

    # The bot's token searches as the bot: its KB only.
    with Ragline(base_url=stack.url, token=issued.token) as as_bot:
        hits = as_bot.search("generator", top_k=10).results
        assert [h.source for h in hits] == [shared.id]
        with pytest.raises(PermissionDeniedError):
            as_bot.list_knowledge_bases()
        with pytest.raises(InvalidRequestError) as refused:
            as_bot.search("generator", top_k=11)
        assert refused.value.detail.startswith("top_k")
    # The playground and the internal contract find the same.
    assert [h.document_id for h in admin.search_as_bot(bot.id, query="generator").hits] == [
        shared.id
    ]
    with Ragline(base_url=stack.url, internal_secret=stack.internal_secret) as runtime:
        answer = runtime.internal_search(bot_id=bot.id, session_id="call-1", query="generator")
        assert [h.document_id for h in answer.hits] == [shared.id]
        assert answer.metrics is not None
        assert answer.metrics.total_ms is not None

    admin.revoke_bot_token(bot.id, issued.id)
    with (
        Ragline(base_url=stack.url, token=issued.token) as revoked,
        pytest.raises(AuthenticationError),
    ):
        revoked.search("generator")

    person = admin.create_token(name="p", role="user", user_id=unique("mia"))
    assert person.id in {t.id for t in admin.list_tokens()}
    with Ragline(base_url=stack.url, token=person.token) as mia:
        # A person reads the tenant's shared items in every KB (other modules share this
        # tenant: the question is asked of this test's two KBs).
        found = mia.search("generator", kb_ids=[kb.id, other.id], top_k=10).results
        assert {h.source for h in found} == {shared.id, hidden.id}
        with pytest.raises(PermissionDeniedError):
            mia.create_bot(name="nope")
    admin.revoke_token(person.id)
    admin.delete_bot(bot.id)
    with pytest.raises(NotFoundError):
        admin.get_bot(bot.id)


def test_people_audiences_wiki_and_operations(stack: RunningPipeline, admin: Ragline) -> None:
    kb = admin.create_knowledge_base(name="People")
    user_id = unique("ned")
    assert admin.put_user(user_id, display_name="Ned").display_name == "Ned"
    assert user_id in {u.user_id for u in admin.list_users()}
    tag = unique("ops").replace("_", "-")
    admin.put_audience(tag, description="On call")
    members = admin.put_audience_members(tag, user_ids=[user_id])
    assert members.members == [user_id]
    assert tag in {a.tag for a in admin.list_audiences()}
    admin.delete_audience(tag)

    topic = unique("runbook").replace("_", "-")
    page = admin.write_wiki_page(kb_id=kb.id, topic=topic, title="Runbook", content="# Runbook")
    assert page.version == 1
    assert admin.read_wiki_page(topic).title == "Runbook"
    assert topic in {p.topic for p in admin.list_wiki_pages().items}
    admin.delete_wiki_page(topic)

    entries = list(admin.list_audit_entries(page_size=5))
    assert len(entries) > 5
    assert entries == sorted(entries, key=lambda e: e.at, reverse=True)
    assert list(admin.list_dead_letters(stage="extract")) is not None
    assert admin.redrive_dead_letters(stage="extract").items is not None
    with pytest.raises(NotFoundError):
        admin.redrive_dead_letter("no-such-letter")
    with pytest.raises(NotFoundError):
        admin.get_crawl_job("no-such-job")
    assert admin.list_crawl_jobs(kb.id) == []
    assert admin.health().status == "ok"
    assert admin.readiness().status in {"ready", "not ready", "starting"}
    assert "ragline_" in admin.metrics()


async def test_a_tenant_backup_is_written_to_a_file_and_restores(
    stack: RunningPipeline, tmp_path: Path
) -> None:
    # A tenant of its own: a snapshot is restored only into a tenant with no data.
    mongo = connect(stack.settings().mongo)
    _, token = await TokenRepository(mongo[stack.database], "", "default").issue(
        unique("tenant"), Role.ADMIN, "backup admin"
    )
    await mongo.close()
    async with AsyncRagline(base_url=stack.url, token=token) as admin:
        kb = await admin.create_knowledge_base(name="Kept")
        kept = await admin.add_text(kb.id, title="Kept", content="Something worth keeping.")
        assert (await admin.wait_until_final(kept, timeout=WAIT_S)).parse_status == "indexed"
        archive = await admin.create_backup(tmp_path / "tenant.tar")
        assert archive.stat().st_size > 0
        await admin.delete_knowledge_base(kb.id, hard=True)
        restored = await admin.restore_backup(archive)
        assert restored.records
        back = await admin.get_document(kb.id, kept.id)
        assert back.parse_status == "indexed"
        found = await admin.search("worth keeping", kb_ids=[kb.id])
        assert [hit.source for hit in found.results] == [kept.id]


def test_every_refusal_is_its_typed_error(stack: RunningPipeline, admin: Ragline) -> None:
    kb = admin.create_knowledge_base(name="Refusals")
    with pytest.raises(NotFoundError) as missing:
        admin.get_knowledge_base("no-such-kb")
    assert missing.value.status_code == 404
    with pytest.raises(InvalidRequestError) as invalid:
        admin.create_knowledge_base(name="")
    assert [problem.field for problem in invalid.value.field_errors] == ["name"]
    with pytest.raises(UnsupportedMediaTypeError) as unsupported:
        admin.upload_file(kb.id, b"MZ\x90\x00", filename="tool.exe")
    assert ".pdf" in unsupported.value.detail
    with pytest.raises(PayloadTooLargeError):  # the suite's stacks take 2 MB
        admin.upload_file(kb.id, b"x" * (3 * 1024 * 1024), filename="big.txt")
    code = unique("taken").replace("_", "-")[:32]
    admin.update_knowledge_base(kb.id, code=code)
    with pytest.raises(ConflictError):
        admin.create_knowledge_base(name="Twin", code=code)
    with (
        Ragline(base_url=stack.url, token="not-a-token") as stranger,
        pytest.raises(AuthenticationError),
    ):
        stranger.list_knowledge_bases()
    queued = admin.add_text(kb.id, title="Soon", content="Not yet indexed, surely.")
    with pytest.raises(WaitTimeout):
        admin.wait_until_final(queued, timeout=0)


def test_no_server_is_a_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        Ragline(base_url=f"http://127.0.0.1:{port}", token="t", max_retries=1) as nowhere,
        pytest.raises(APIConnectionError, match="cannot reach the API"),
    ):
        nowhere.health()


async def test_the_async_client_does_the_same(stack: RunningPipeline) -> None:
    async with AsyncRagline(base_url=stack.url, token=stack.admin_token) as admin:
        kb = await admin.create_knowledge_base(name="Async")
        documents = [
            await admin.add_text(kb.id, title=f"Note {n}", content=f"Async note number {n}.")
            for n in range(3)
        ]
        for document in documents:
            final = await admin.wait_until_final(document, timeout=WAIT_S)
            assert final.parse_status == "indexed"
        listed = [d.id async for d in admin.list_documents(kb.id, page_size=1)]
        assert sorted(listed) == sorted(d.id for d in documents)
        found = await admin.search("async note number 2", kb_ids=[kb.id], top_k=1)
        assert found.results[0].source == documents[2].id
        with pytest.raises(NotFoundError):
            await admin.get_document(kb.id, "missing")
