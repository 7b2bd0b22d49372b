"""Changing the embedding model of a running deployment (`schemas.index_generations`), through
the API and the `ragline` command, on a stack with servers of its own (a migration is the whole
deployment's: it cannot share a stack).

1. Who may: only the deployment's admin token; a model that does not load is refused; so is
   the live one's own model (and, after the swap below, a model that makes vectors of another
   size than it is said to).
2. A change of vector size with the API process SIGKILLed while it copies: the restarted one
   resumes from where the copy stopped; uploads, deletes and changes of who may read made
   during the build are all there after the switch; the settings now name another model than
   the live one, and `/readyz` says so while the process serves on.
3. A swap to the packaged model at the same vector size as the hashed embedder's, under a
   steady load of searches: every answer is right, each says which generation answered, and
   no process goes back to the old one once it has the new.

Cost (measured alone on two idle cores): the stack's start (servers of its own), about 15 s;
the size change with its restart, about 25 s; the swap loads the packaged model in the API and
the embed worker and embeds the few chunks left with it, about 30 s."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from ragline_cli import app
from tests.conftest import RunningPipeline, own_stack
from tests.e2e.client import Api

pytestmark = pytest.mark.e2e

RECORDS = 200


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """A stack of this module's own, on the hashed embedder at 384 dimensions, whose
    migrations copy two chunks at a time (a copy to interrupt) and settle fast. Documents
    are called stalled after a minute, as on the shared stacks, not the 3 s of other own
    stacks: this module publishes 200 records at once, and on a busy machine the last of them
    waited longer than that behind the others and ran out of restarts (seen in a full run)."""
    env = {
        "RAGLINE_INGEST__STALL_AFTER_S": "60",
        "RAGLINE_GENERATIONS__COPY_BATCH": "2",
        "RAGLINE_GENERATIONS__REFRESH_S": "0.5",
        "RAGLINE_GENERATIONS__VALID_S": "1",
        "RAGLINE_GENERATIONS__LEASE_S": "3",
    }
    with own_stack(tmp_path_factory.mktemp("model-change"), env) as running:
        yield running


@pytest.fixture
async def api(stack: RunningPipeline) -> AsyncIterator[Api]:
    """The deployment's admin."""
    async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:
        yield Api(http, stack, stack.admin_token)


def ragline(stack: RunningPipeline, *args: str) -> Any:
    """`ragline <args> --json` with the deployment's admin token; what it printed, parsed."""
    env = {"RAGLINE_URL": stack.url, "RAGLINE_TOKEN": stack.admin_token, "NO_COLOR": "1"}
    result = CliRunner().invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout)


async def generation(api: Api, number: int) -> dict[str, Any]:
    response = await api.http.get(f"/api/v1/generations/{number}", headers=api.auth)
    assert response.status_code == 200, response.text
    return dict(response.json()["generation"])


async def live_number(api: Api) -> int:
    response = await api.http.get("/api/v1/generations", headers=api.auth)
    assert response.status_code == 200, response.text
    (live,) = [
        g["generation"] for g in response.json()["items"] if g["generation"]["state"] == "live"
    ]
    return int(live["number"])


async def until_live(api: Api, number: int, timeout_s: float = 120.0) -> dict[str, Any]:
    async with asyncio.timeout(timeout_s):
        while True:
            try:
                found = await generation(api, number)
            except httpx.TransportError:
                found = {"state": "unanswered"}
            if found["state"] == "live":
                return found
            assert found["state"] in ("building", "unanswered"), found
            await asyncio.sleep(0.2)


async def test_only_the_deployments_admin_changes_the_model_and_only_to_one_that_works(
    api: Api, stack: RunningPipeline
) -> None:
    start = "/api/v1/generations"
    tenant_admin = await api.http.post(
        "/api/v1/tokens", json={"name": "ops", "role": "admin"}, headers=api.auth
    )
    assert tenant_admin.status_code == 201, tenant_admin.text
    other = {"Authorization": f"Bearer {tenant_admin.json()['token']}"}
    hashed_256 = {"provider": "hashed", "dimensions": 256}
    refused = await api.http.post(start, json=hashed_256, headers=other)
    assert refused.status_code == 403, refused.text
    assert "deployment's admin token" in refused.json()["detail"]
    same = await api.http.post(
        start, json={"provider": "hashed", "dimensions": 384}, headers=api.auth
    )
    assert same.status_code == 409, same.text
    missing = await api.http.post(
        start,
        json={"provider": "local", "model": "/no/such/model", "dimensions": 384},
        headers=api.auth,
    )
    assert missing.status_code == 422, missing.text
    assert "local:/no/such/model/384" in missing.json()["detail"]
    assert await live_number(api) == 1


@pytest.mark.timeout(300)
async def test_a_size_change_survives_a_killed_api_and_keeps_every_change_made_meanwhile(
    api: Api, stack: RunningPipeline
) -> None:
    kb = await api.create_kb("Parts")
    records = [
        {
            "external_id": f"part-{n}",
            "title": f"Part {n}",
            "content": f"Part {n} fits model {n % 7}.",
        }
        for n in range(RECORDS)
    ]
    results = await api.batch(kb["id"], records)
    ids = [r["document_id"] for r in results]
    for document_id in (ids[0], ids[-1]):
        assert (await api.wait_final(kb["id"], document_id))["parse_status"] == "indexed"
    await _all_indexed(api, kb["id"], RECORDS)

    started = ragline(
        stack,
        "generations",
        "migrate",
        "--provider",
        "hashed",
        "--dimensions",
        "256",
        "--no-follow",
    )
    number = started["generation"]["number"]
    second = await api.http.post(
        "/api/v1/generations", json={"provider": "hashed", "dimensions": 128}, headers=api.auth
    )
    assert second.status_code == 409, second.text  # one build at a time
    async with asyncio.timeout(60):
        while (progress := (await generation(api, number))["progress"])["done"] == 0:
            await asyncio.sleep(0.05)
    assert not progress["copied"], "the copy ended before the kill: nothing to resume"
    (api_process,) = [p for p in stack.pipeline.processes if p.name == "api"]
    api_process.kill()
    api_process.start()
    async with asyncio.timeout(120):
        while not stack.pipeline.api_ready():
            await asyncio.sleep(0.2)
    resumed = (await generation(api, number))["progress"]
    assert resumed["done"] >= progress["done"]  # from where it stopped, not from the start

    # Changes while it builds: an upload, a delete, a record replaced.
    added = await api.text(
        kb["id"], {"title": "Gasket", "content": "The gasket kit suits model 42."}
    )
    await api.delete(kb["id"], ids[1])
    await api.batch(
        kb["id"],
        [{"external_id": "part-2", "title": "Part 2", "content": "Part 2 is withdrawn from sale."}],
    )
    await api.wait_final(kb["id"], added["id"])

    live = await until_live(api, number)
    assert live["progress"]["done"] >= RECORDS - 1
    hits = await api.search([kb["id"]], "gasket kit model 42", top_k=3)
    assert hits[0]["document_id"] == added["id"]
    gone = await api.search([kb["id"]], "Part 1 fits model 1", top_k=10)
    assert ids[1] not in {h["document_id"] for h in gone}
    replaced = await api.search([kb["id"]], "Part 2 withdrawn from sale", top_k=3)
    assert "withdrawn" in replaced[0]["chunk_text"]
    # The settings still name the first model: the process says so, and serves on.
    said = await _model_said_by_readyz(api)
    assert "hashed/384" in said
    assert "hashed/256" in said


async def _model_said_by_readyz(api: Api) -> str:
    """`/readyz`'s `embedding_model` check once it is not "ok" (the API's view of the
    generations follows a switch within its refresh); it stays ready (200) throughout."""
    async with asyncio.timeout(30):
        while True:
            ready = await api.http.get("/readyz")
            assert ready.status_code == 200, ready.text
            said = str(ready.json()["checks"]["embedding_model"])
            if said != "ok":
                return said
            await asyncio.sleep(0.1)


async def _all_indexed(api: Api, kb_id: str, chunks: int) -> None:
    """Waits until the KB holds `chunks` indexed chunks."""
    async with asyncio.timeout(180):
        while (await api.kb(kb_id))["chunk_count"] < chunks:
            await asyncio.sleep(0.5)


async def _answering_from(api: Api, stack: RunningPipeline, kb_id: str, number: int) -> None:
    """Wait until searches are answered by generation `number`: a process sees a switch within
    its view's refresh (`generations.refresh_s`), not at the instant it is made."""
    async with asyncio.timeout(30):
        while True:
            response = await api.http.post(
                "/api/v1/internal/knowledge/search",
                json={"tenant_id": "default", "kb_ids": [kb_id], "query": "ferry", "top_k": 1},
                headers={"X-Internal-Secret": stack.internal_secret},
            )
            assert response.status_code == 200, response.text
            if response.json()["metrics"]["generation"] == number:
                return
            await asyncio.sleep(0.1)


FACTS = [
    "The night ferry to the island leaves from pier nine at eleven.",
    "Sourdough starter must be fed with rye flour twice a day.",
    "The museum's mineral hall holds a meteorite found in Namibia.",
    "Replace the bicycle chain after about three thousand kilometres.",
    "Our dentist closes early on Fridays for staff training.",
    "The choir rehearses Handel's Messiah every Tuesday evening.",
    "A tortoise hibernates in a cool box from November to March.",
    "The glacier retreated four hundred metres in a single decade.",
    "Chess club members play a blitz tournament on the first Sunday.",
    "The lighthouse keeper logged every passing ship by hand.",
]


@pytest.mark.timeout(300)
async def test_a_swap_at_the_same_size_answers_every_search_right_and_never_mixes_models(
    api: Api, stack: RunningPipeline
) -> None:
    # On the hashed embedder's 384 dimensions again.
    kb = await api.create_kb("Notes")
    for fact in FACTS:
        await api.text(kb["id"], {"title": fact[:20], "content": fact})
    await _all_indexed(api, kb["id"], len(FACTS))
    back = await api.http.post(
        "/api/v1/generations", json={"provider": "hashed", "dimensions": 384}, headers=api.auth
    )
    if back.status_code == 202:  # the module's earlier test left another size live
        await until_live(api, back.json()["generation"]["number"])
    before = await live_number(api)
    await _answering_from(api, stack, kb["id"], before)  # the API's view has caught up

    answered: list[tuple[int, bool]] = []
    wrong: list[tuple[str, Any]] = []
    stop = asyncio.Event()

    async def load() -> None:
        n = 0
        while not stop.is_set():
            fact = FACTS[n % len(FACTS)]
            response = await api.http.post(
                "/api/v1/internal/knowledge/search",
                json={"tenant_id": "default", "kb_ids": [kb["id"]], "query": fact, "top_k": 1},
                headers={"X-Internal-Secret": stack.internal_secret},
            )
            assert response.status_code == 200, response.text
            body = response.json()
            right = bool(body["hits"]) and fact in body["hits"][0]["chunk_text"]
            answered.append((body["metrics"]["generation"], right))
            if not right:
                wrong.append((fact, body["hits"]))
            n += 1
            await asyncio.sleep(0.05)

    searching = asyncio.create_task(load())
    started = await api.http.post(
        "/api/v1/generations", json={"provider": "local", "dimensions": 384}, headers=api.auth
    )
    assert started.status_code == 202, started.text
    number = started.json()["generation"]["number"]
    await until_live(api, number, timeout_s=240)
    seen_new = len(answered)
    while len(answered) < seen_new + 20:  # the new generation answers for a while too
        await asyncio.sleep(0.05)
    stop.set()
    await searching

    generations = [g for g, _ in answered]
    assert not wrong, wrong[:3]
    assert generations[0] == before
    assert generations[-1] == number
    assert generations == sorted(generations)  # never back to the old model once switched
    assert set(generations) == {before, number}

    # A model that makes vectors of another size than it is said to is refused.
    wrong_size = await api.http.post(
        "/api/v1/generations", json={"provider": "local", "dimensions": 768}, headers=api.auth
    )
    assert wrong_size.status_code == 422, wrong_size.text
    assert "makes 384-dimensional vectors, not 768" in wrong_size.json()["detail"]
