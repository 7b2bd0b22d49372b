"""Backup and restore through the CLI, as an operator recovering from a lost disk.

A deployment with a mixed KB (PDFs, a DOCX, notes, connector records, two versions of a
file, a failed upload), people's permissions, a wiki page, a crawled site and a dead letter is
backed up with `ragline backup --deployment` while uploads go on into another KB. Its data
directory is then wiped, and the snapshot restored with `ragline restore --deployment` into a
fresh stack: every record is back as it was (documents, versions, permissions, hashed tokens,
dead letters, crawl state), 50 searches give the same passages as before (see `_differences`
for how exactly), the tokens issued before work, and every upload the snapshot caught is
indexed exactly once. A snapshot with one byte
changed is refused with nothing written; a second restore into the now full deployment is
refused. A tenant's own snapshot is restored into that tenant on the new deployment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.mongo.client import DOCUMENTS, KNOWLEDGE_BASES, connect
from infra.mongo.snapshot import COLLECTIONS, MongoSnapshot
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Record, Role
from schemas.events import RecordPublished
from tests.conftest import RunningPipeline, own_stack, unique
from tests.crawl_site import CrawlSite
from tests.e2e.client import CLIENT_LIMITS, Api, publish_record

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

# The crawl fetches the test's own site on 127.0.0.1.
CRAWL_LOCAL = {
    "RAGLINE_CRAWL__ALLOW_PRIVATE_NETWORKS": "true",
    "RAGLINE_CRAWL__PER_HOST_DELAY_S": "0.02",
}
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NOTES = {
    "Parking": "Staff park in the north lot; visitors use the bays by the main entrance.",
    "Expenses": "Claims for travel are filed within thirty days with the receipts attached.",
    "Laptops": "A lost laptop is reported to the service desk at once so it can be locked.",
    "Holidays": "Annual leave is booked two weeks ahead through the team calendar.",
    "Security": "Visitors sign in at reception and wear a badge while in the building.",
    "Printing": "The third-floor printer takes badge release; toner is kept in the store room.",
    "Kitchen": "The kitchen is cleaned on Fridays; label food left in the fridge.",
    "Mail": "Parcels arrive at the loading dock and are logged before delivery to desks.",
}
QUESTIONS = [
    "where do I leave my car",
    "how long do I have to claim travel costs",
    "my notebook computer was stolen what now",
    "how early must vacation be requested",
    "what do guests do when they arrive",
    "how do I collect a print job",
    "when is the fridge emptied",
    "where are packages delivered",
    "who are the crazy ones",
    "the misfits and the rebels",
    "how do you change the world",
    "service handbook escalation",
    "what is the response time for an urgent request",
    "table of contents",
    "paragraphs and tables",
    "shift handover notes",
    "night crew meeting time",
    "rollback the deployment",
    "previous release tag",
    "who may read the finance plan",
]


def _cli(stack: RunningPipeline, token: str, *args: str) -> tuple[int, str]:
    env = {**os.environ, "RAGLINE_URL": stack.url, "RAGLINE_TOKEN": token, "NO_COLOR": "1"}
    env["XDG_CONFIG_HOME"] = str(stack.run_dir / "cli-config")
    done = subprocess.run(
        [sys.executable, "-m", "ragline_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


@contextlib.asynccontextmanager
async def _admin(stack: RunningPipeline, token: str | None = None) -> AsyncIterator[Api]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=60, limits=CLIENT_LIMITS) as http:
        yield Api(http, stack, token or stack.admin_token)


async def _call(api: Api, method: str, path: str, token: str | None = None, **kw: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else api.auth
    response = await api.http.request(method, path, headers=headers, **kw)
    assert response.status_code < 300, (path, response.status_code, response.text)
    return response.json() if response.content else None


async def _indexed(api: Api, kb_id: str, document_id: str, status: str = "indexed") -> None:
    final = await api.wait_final(kb_id, document_id)
    assert final["parse_status"] == status, final


async def _settled_kb(api: Api, run: str) -> dict[str, Any]:
    """The mixed KB, its bot, a person with private and shared items, a wiki page."""
    kb_id = (await api.create_kb(f"Handbook {run}"))["id"]
    uploads = [
        await api.upload(kb_id, name, (FIXTURES / name).read_bytes())
        for name in ("service-handbook.pdf", "crazyones.pdf", "blk-paras-and-tables.docx")
    ]
    uploads.append(
        await api.upload(
            kb_id, "encrypted-file.pdf", (FIXTURES / "encrypted-file.pdf").read_bytes()
        )
    )
    for title, content in NOTES.items():
        uploads.append(await api.text(kb_id, {"title": title, "content": content}))
    records = [
        {
            "external_id": f"rec-{i}",
            "title": f"Shift {i}",
            "content": f"Shift {i} handover notes: the night crew meets at {i + 8} pm.",
        }
        for i in range(4)
    ]
    uploads += [{"id": r["document_id"]} for r in await api.batch(kb_id, records)]
    # Two versions of one file: the second replaces the first in search.
    first = await api.upload(kb_id, "policy.txt", b"The finance plan is read by the board only.")
    await _indexed(api, kb_id, first["id"])
    uploads.append(
        await api.upload(kb_id, "policy.txt", b"The finance plan is read by the finance team.")
    )
    # People: an audience, a person in it, a private upload of theirs and a wiki page.
    user_id = f"alice-{run}"
    await _call(api, "PUT", f"/api/v1/users/{user_id}", json={"display_name": "Alice"})
    await _call(api, "PUT", f"/api/v1/audiences/finance-{run}", json={"description": "Finance"})
    await _call(
        api, "PUT", f"/api/v1/audiences/finance-{run}/members", json={"user_ids": [user_id]}
    )
    alice = (
        await _call(
            api,
            "POST",
            "/api/v1/tokens",
            json={"name": "alice", "role": "user", "user_id": user_id},
        )
    )["token"]
    private = await _call(
        api,
        "POST",
        f"/api/v1/knowledge-bases/{kb_id}/documents",
        token=alice,
        files={
            "file": ("alice.txt", b"Alice keeps the rollback runbook for the previous release tag.")
        },
    )
    page = await _call(
        api,
        "POST",
        "/api/v1/knowledge/wiki",
        token=alice,
        json={
            "kb_id": kb_id,
            "topic": f"runbook-{run}".lower().replace("_", "-"),
            "title": "Runbook",
            "content": "# Runbook\n\n## Rollback\n\nRoll back with the previous release tag.",
        },
    )
    uploads += [private, {"id": page["document_id"]}]
    for item in uploads:
        status = "failed" if item.get("filename") == "encrypted-file.pdf" else "indexed"
        await _indexed(api, kb_id, item["id"], status)
    bots = {}
    for mode in ("hybrid", "dense"):
        knowledge = {"enabled": True, "kb_ids": [kb_id], "score_threshold": 0.0, "strict": False}
        body = {"name": f"Desk bot ({mode})", "knowledge": {**knowledge, "retrieval_mode": mode}}
        bots[mode] = (await _call(api, "POST", "/api/v1/bots", json=body))["id"]
    return {"kb_id": kb_id, "bots": bots, "alice": alice}


async def _dead_letter(api: Api, kb_id: str) -> None:
    """A connector's record for an audience nobody made: the records stage gives up on it."""
    event = RecordPublished(
        tenant_id="default",
        kb_id=kb_id,
        record=Record(external_id="orphan", title="Orphan", content="For nobody yet."),
        governance={"visibility_mode": "shared", "audience_tags": ["nobody-yet"]},
    )
    await publish_record(api.running, event)
    async with asyncio.timeout(60):
        while not (await _call(api, "GET", "/api/v1/dead-letters"))["items"]:
            await asyncio.sleep(0.3)


async def _crawl(api: Api, site: CrawlSite) -> str:
    kb_id = (await api.create_kb("Docs site"))["id"]
    job = await _call(
        api,
        "POST",
        f"/api/v1/knowledge-bases/{kb_id}/crawl-jobs",
        json={"urls": [site.url("/docs/")], "max_depth": 1, "max_pages": 5},
    )
    async with asyncio.timeout(180):
        while (ended := await _call(api, "GET", f"/api/v1/crawl-jobs/{job['job_id']}"))[
            "state"
        ] not in ("completed", "failed"):
            await asyncio.sleep(0.3)
    assert ended["state"] == "completed", ended
    items = (await api.documents(kb_id, limit=200))["items"]
    assert items, ended
    for item in items:
        await _indexed(api, kb_id, item["id"])
    return str(kb_id)


def _kind(i: int) -> str:
    """Which search the i-th question goes to: a person's, a hybrid bot's or a dense one's."""
    return ("hybrid", "dense", "hybrid", "dense", "person")[i % 5]


async def _answers(api: Api, settled: dict[str, Any], chunk_queries: list[str]) -> list[Any]:
    """50 searches: bots' (hybrid and dense) and a person's, in the user's words and in the
    documents'. Each answer: its passages (document, chunk, text) and their scores."""
    answers: list[Any] = []
    for i, query in enumerate([*QUESTIONS, *chunk_queries]):
        if _kind(i) == "person":
            body = {"query": query, "score_threshold": 0.0, "kb_ids": [settled["kb_id"]]}
            found = await _call(
                api, "POST", "/api/v1/knowledge/search", token=settled["alice"], json=body
            )
            hits = [
                (r["source"], r["chunk_index"], r["content"], r["score"]) for r in found["results"]
            ]
        else:
            body = {"bot_id": settled["bots"][_kind(i)], "session_id": f"q{i}", "query": query}
            found = await api.internal_search(body)
            hits = [
                (h["document_id"], h["chunk_index"], h["chunk_text"], h["score"]) for h in found
            ]
        answers.append(hits)
    assert len(answers) == 50
    assert sum(1 for hits in answers if hits) >= 45, answers
    return answers


def _differences(before: list[Any], after: list[Any]) -> list[Any]:
    """The answers that changed. A dense answer must be the same passages in the same order
    with the same scores. A hybrid one must be the same passages, each scored within 0.05 of
    before (so two nearly tied may swap): BM25's IDF is counted over the whole store, other
    KBs' points included, and deleted points too, which the engine keeps counting, so the
    restored store (holding the uploads the snapshot caught, and no deleted point) weighs
    terms a little differently."""
    changed = []
    for i, (was, now) in enumerate(zip(before, after, strict=True)):
        if _kind(i) == "dense":
            same = [(*h[:3], round(h[3], 5)) for h in was] == [
                (*h[:3], round(h[3], 5)) for h in now
            ]
        else:
            scores = {hit[:3]: hit[3] for hit in was}
            same = len(was) == len(now) and all(
                hit[:3] in scores and abs(scores[hit[:3]] - hit[3]) <= 0.05 for hit in now
            )
        if not same:
            changed.append(
                (i, _kind(i), [(h[0], h[1], h[3]) for h in was], [(h[0], h[1], h[3]) for h in now])
            )
    return changed


async def _state(stack: RunningPipeline, skip_kbs: set[str]) -> dict[str, list[Any]]:
    """Every backed-up collection's records, but those of the KBs being written to."""
    client = connect(stack.settings().mongo)
    db = client[stack.database]
    skipped_docs = {d["_id"] async for d in db[DOCUMENTS].find({"kb_id": {"$in": list(skip_kbs)}})}
    state: dict[str, list[Any]] = {}
    for collection in COLLECTIONS:
        if collection.name == "audit_log":
            continue
        records = []
        async for record in db[collection.name].find({}):
            if record.get("kb_id") in skip_kbs or record["_id"] in skip_kbs | skipped_docs:
                continue
            if (record.get("metadata") or {}).get("document_id") in skipped_docs:
                continue
            records.append(record)
        state[collection.name] = sorted(records, key=lambda r: str(r["_id"]))
    await client.close()
    # Stored files' chunks are compared through their files' checksums.
    state.pop("originals.chunks"), state.pop("extracted.chunks")
    return state


async def _uploads_during(api: Api, kb_id: str, accepted: list[str], stop: asyncio.Event) -> None:
    i = 0
    while not stop.is_set():
        doc = await api.text(
            kb_id,
            {"title": f"Log {i}", "content": f"Entry {i}: the generator ran for {i} minutes."},
        )
        accepted.append(doc["id"])
        i += 1
        await asyncio.sleep(0.1)


async def _until_accepted(accepted: list[str], count: int, writer: asyncio.Task[None]) -> None:
    """Waits (a minute at most) until the writer has had `count` uploads accepted; a writer
    that stopped raises its error here."""
    async with asyncio.timeout(60):
        while len(accepted) < count:
            if writer.done():
                await writer
                raise AssertionError(f"the uploads stopped after {len(accepted)}")
            await asyncio.sleep(0.1)


async def test_a_deployment_is_backed_up_during_uploads_and_restored_into_a_fresh_stack(
    tmp_path: Path,
) -> None:
    run = unique("bk")
    snapshot, tenant_snapshot = tmp_path / "snapshot", tmp_path / "tenant-snapshot"
    # Stacks of their own: the first one's data directory is wiped, the second starts empty.
    with CrawlSite(slow_seconds=0.0) as site, own_stack(tmp_path / "a", CRAWL_LOCAL) as a:
        async with _admin(a) as api:
            settled = await _settled_kb(api, run)
            await _dead_letter(api, settled["kb_id"])
            crawled = await _crawl(api, site)
            chunks = [
                c["chunk_text"]
                for d in (await api.documents(settled["kb_id"], limit=200))["items"]
                if d["parse_status"] == "indexed"
                for c in await api.chunks(settled["kb_id"], d["id"])
            ]
            # Runs of eight words from every chunk, in the documents' own words: 30 of them.
            runs = list(dict.fromkeys(
                " ".join(words[start : start + 8])
                for words in (text.split() for text in chunks)
                for start in range(0, max(1, len(words) - 4), 8)
            ))  # fmt: skip
            assert len(runs) >= 30, runs
            chunk_queries = runs[:: len(runs) // 30][:30]
            before = await _answers(api, settled, chunk_queries)
            busy = (await api.create_kb("Logs"))["id"]
            state = await _state(a, {busy})

            accepted: list[str] = []
            stop = asyncio.Event()
            writer = asyncio.create_task(_uploads_during(api, busy, accepted, stop))
            await _until_accepted(accepted, 5, writer)
            code, out = await asyncio.to_thread(
                _cli, a, a.admin_token, "backup", str(snapshot), "--deployment"
            )
            assert code == 0, out
            accepted_before_end = len(accepted)
            await _until_accepted(accepted, accepted_before_end + 3, writer)
            stop.set()
            await writer

            # A tenant of its own, backed up as that tenant's admin.
            acme = unique("acme")
            client = connect(a.settings().mongo)
            _, acme_token = await TokenRepository(client[a.database], "", "default").issue(
                acme, Role.ADMIN, "acme admin"
            )
            await client.close()
            async with _admin(a, acme_token) as acme_api:
                acme_kb = (await acme_api.create_kb("Acme notes"))["id"]
                acme_doc = await acme_api.text(
                    acme_kb, {"title": "Acme", "content": "Acme ships anvils on Tuesdays."}
                )
                await _indexed(acme_api, acme_kb, acme_doc["id"])
                acme_hits = await acme_api.search(
                    [acme_kb], "when are anvils shipped", tenant_id=acme
                )
                assert [hit["document_id"] for hit in acme_hits] == [acme_doc["id"]], acme_hits
            code, out = await asyncio.to_thread(_cli, a, acme_token, "backup", str(tenant_snapshot))
            assert code == 0, out
    assert "knowledge_bases" in out
    shutil.rmtree(tmp_path / "a")  # the lost disk

    with own_stack(tmp_path / "b", CRAWL_LOCAL) as b:
        async with _admin(b) as api:
            client = connect(b.settings().mongo)
            target = MongoSnapshot(client, client[b.database])
            # One changed byte: refused, nothing written.
            damaged = tmp_path / "damaged"
            shutil.copytree(snapshot, damaged)
            victim = damaged / "mongo" / f"{DOCUMENTS}.jsonl.gz"
            data = bytearray(victim.read_bytes())
            data[len(data) // 2] ^= 0xFF
            victim.write_bytes(bytes(data))
            code, out = await asyncio.to_thread(
                _cli, b, b.admin_token, "restore", str(damaged), "--deployment"
            )
            assert code == 4, out
            assert "does not match its checksum" in out, out
            assert await target.holds(None) is None
            # Only the deployment's own admin token restores the whole deployment.
            alice_on_b = settled["alice"]
            code, out = await asyncio.to_thread(
                _cli, b, alice_on_b, "restore", str(snapshot), "--deployment"
            )
            assert code == 5, out

            code, out = await asyncio.to_thread(
                _cli, b, b.admin_token, "restore", str(snapshot), "--deployment"
            )
            assert code == 0, out
            restored = await _state(b, {busy})
            assert restored.keys() == state.keys()
            for name in state:
                assert restored[name] == state[name], name
            for name in (KNOWLEDGE_BASES, "api_tokens", "dead_letters", "users", "audiences"):
                assert state[name], f"nothing in {name}: the test checked nothing there"
            for name in (
                "crawl_jobs",
                "crawl_frontier",
                "document_sources",
                "bots",
                "originals.files",
            ):
                assert state[name], f"nothing in {name}: the test checked nothing there"

            # The uploads the snapshot caught are all indexed, each exactly once.
            in_b = [d["id"] for d in (await api.documents(busy, limit=200))["items"]]
            assert set(accepted[:5]) <= set(in_b) <= set(accepted)
            for document_id in in_b:
                await _indexed(api, busy, document_id)
                document = await api.document(busy, document_id)
                indexes = sorted(c["chunk_index"] for c in await api.chunks(busy, document_id))
                assert indexes == list(range(document["chunk_count"])), document
            kb = await api.kb(busy)
            assert kb["document_count"] == len(in_b)

            after = await _answers(api, settled, chunk_queries)
            assert _differences(before, after) == []
            assert (await api.documents(crawled, limit=200))["items"]

            code, out = await asyncio.to_thread(
                _cli, b, b.admin_token, "restore", str(snapshot), "--deployment"
            )
            assert code == 4, out
            assert "already holds data" in out, out

            # The tenant's own snapshot, into that tenant (its admin's token made anew).
            _, acme_on_b = await TokenRepository(client[b.database], "", "default").issue(
                acme, Role.ADMIN, "acme admin"
            )
            await client.close()
            code, out = await asyncio.to_thread(_cli, b, acme_on_b, "restore", str(tenant_snapshot))
            assert code == 0, out
            async with _admin(b, acme_on_b) as acme_api:
                assert (
                    await acme_api.search([acme_kb], "when are anvils shipped", tenant_id=acme)
                    == acme_hits
                )
