"""Hangs, not crashes: MongoDB, the Kafka broker, Redis and a stage worker are each frozen
(SIGSTOP) for 15 s (three times the request bound) while uploads, listings, a bot's searches, an
agent's new questions over MCP and readiness probes go on, then resumed (SIGCONT).

The freeze is seen to take hold: every thread of the part is stopped (`/proc/<pid>/task`)
before the requests begin and still at the freeze's end; with the broker or the extract worker
frozen, every upload accepted meanwhile is still `queued` at the freeze's end (the API stores it
queued, and only the extract stage, which gets it through the broker, moves it on).

While a part is frozen, no request waits longer than the API's bound (`api.request_timeout_s`,
5 s by default, which this stack keeps): what needs the frozen part is refused with 503 and
`Retry-After`, the rest answers. Every request made during the freeze counts: at its end no new
one is made, and one still waiting the bound (and a slack) later, the part still frozen, fails
the test as hung. `/readyz` names the part that does not answer, within its 2 s per probe.
Once resumed, with no human action, every upload that was accepted ends indexed exactly once,
none failed, and what needed the frozen part works again: a new upload is indexed and listed,
and an agent's new question over MCP finds it. A bot's cached question is answered with its hits
throughout, MongoDB frozen included (the API holds the bot's access in memory, read anew just
before the freeze, for `search.access_ttl_s`, 60 s, longer than a freeze; the answer is in
Redis), and an agent's new question is answered (not a tool error) unless the frozen part is
the database; with a token never used before, which only the database can tell, it is then
refused with 503 and `Retry-After`. Time to recover (resume to the last accepted document
indexed) is printed per part.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from devstack.launcher import running_process
from tests.conftest import RunningPipeline, own_stack, unique
from tests.e2e.client import CLIENT_LIMITS, Api
from tests.faults.conftest import FAULT_SETTINGS
from tests.freezing import freeze, thread_states

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.faults,
    pytest.mark.local_servers,
    pytest.mark.timeout(400),
]

FREEZE_S = 15.0
BOUND_S = 5.0
# What a loaded two-core machine may add to an answer on top of the bound (scheduling, the
# client's own work); far below what a request waiting on a frozen part would take.
SLACK_S = 2.5
RECOVERY_LIMIT_S = 240
QUESTION = "when does the harbour ferry leave"
# The status recorded for a request still waiting when the freeze ended (its bound and slack
# past the last request made): allowed nowhere.
HUNG = -1
# An agent's question over MCP with a person's token the API has not seen before; each made
# before the freeze and used once.
NEW_TOKEN = "new token's mcp question"
FRESH_TOKENS = 40
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A stack with the default request bound (the suite's other stacks relax it)."""
    settings = {**FAULT_SETTINGS, "RAGLINE_API__REQUEST_TIMEOUT_S": str(BOUND_S)}
    with own_stack(tmp_path_factory.mktemp("freezes"), settings) as running:
        yield running


def _pid(stack: RunningPipeline, part: str) -> int:
    process = running_process(stack.services, stack.pipeline, part).process
    assert process is not None
    return int(process.pid)


# Each part, and what a request of each kind may answer while it is frozen.
EXPECTED: dict[str, dict[str, set[int]]] = {
    # Uploads and listings need the database; a repeated question comes from the caches (the
    # bot's access in the API's memory, the answer in Redis). An agent's new question over MCP
    # is answered, as a tool error or an HTTP 503; one with a token never seen before (which
    # only the database can tell) is refused with 503 and `Retry-After`, never a 500.
    "mongodb": {
        "upload": {503},
        "listing": {503},
        "repeated question": {200},
        "mcp question": {200, 503},
        NEW_TOKEN: {503},
    },
    # Uploads wait in the outbox (MongoDB) for the broker.
    "kafka": {
        "upload": {202},
        "listing": {200},
        "repeated question": {200},
        "mcp question": {200},
        NEW_TOKEN: {200},
    },
    # Search goes to the stores when its cache does not answer.
    "redis": {
        "upload": {202},
        "listing": {200},
        "repeated question": {200},
        "mcp question": {200},
        NEW_TOKEN: {200},
    },
    "extract-1": {
        "upload": {202},
        "listing": {200},
        "repeated question": {200},
        "mcp question": {200},
        NEW_TOKEN: {200},
    },
}
# What `/readyz` says meanwhile: its status, and the check that must not be "ok".
READINESS: dict[str, tuple[int, str | None]] = {
    "mongodb": (503, "mongodb"),
    "kafka": (503, "kafka"),
    "redis": (200, "redis"),  # reported; search works without its cache
    "extract-1": (200, None),
}


@dataclass
class Answers:
    """Every request made during a freeze: kind, status, seconds, and its body if not 2xx."""

    seen: list[tuple[str, int, float, str]] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    retry_after: list[str | None] = field(default_factory=list)

    async def timed(
        self, kind: str, request: Coroutine[Any, Any, httpx.Response]
    ) -> httpx.Response | None:
        started = time.monotonic()
        try:
            response = await request
        except httpx.HTTPError as exc:
            self.seen.append((kind, 0, time.monotonic() - started, repr(exc)))
            return None
        except asyncio.CancelledError:
            # Cancelled when the freeze ended (see `_drain`): a request that hung.
            took = time.monotonic() - started
            self.seen.append((kind, HUNG, took, "still waiting when the freeze ended"))
            raise
        took = time.monotonic() - started
        self.seen.append((kind, response.status_code, took, _what_it_said(kind, response)))
        if response.status_code == 503 and kind != "readiness":
            self.retry_after.append(response.headers.get("retry-after"))
        return response


def _what_it_said(kind: str, response: httpx.Response) -> str:
    """A 200's gist where it matters ("hits" or "no hits" of a bot's search, "answered" or
    "tool error" of an MCP question); the body of a readiness probe or a refusal."""
    if kind == "readiness":
        return response.text  # whole: the checks are parsed
    if not response.is_success:
        return response.text[:300]
    if kind == "repeated question":
        return "hits" if response.json()["hits"] else "no hits"
    if kind in ("mcp question", NEW_TOKEN):
        result = response.json().get("result") or {}
        if result.get("isError") is False and result["structuredContent"]["results"]:
            return "answered"
        return f"tool error: {response.text[:300]}"
    return ""


def _mcp_question(
    api: Api, query: str, n: int, token: str | None = None
) -> Coroutine[Any, Any, httpx.Response]:
    auth = api.auth if token is None else {"Authorization": f"Bearer {token}"}
    return api.http.post(
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "knowledge_search", "arguments": {"query": query}},
        },
        headers={**auth, **MCP_HEADERS},
    )


async def _fresh_tokens(api: Api, count: int) -> list[str]:
    """People's tokens, issued (written to the database) but never used."""
    tokens = []
    for n in range(count):
        issued = await api.http.post(
            "/api/v1/tokens",
            json={"name": f"freeze {n}", "role": "user", "user_id": unique("person")},
            headers=api.auth,
        )
        assert issued.status_code == 201, issued.text
        tokens.append(issued.json()["token"])
    return tokens


async def _requests_while_frozen(
    api: Api, bot: str, kb_id: str, answers: Answers, stop: asyncio.Event, tokens: list[str]
) -> None:
    """Each kind of request again and again, every kind in a loop of its own (as many users
    would), until `stop` is set (then each loop ends once its request in flight has answered):
    a kind that waits on the frozen part holds up no other."""
    http = api.http

    async def upload(n: int) -> None:
        note = f"# Freeze note {n} {unique('n')}\n\nBerth {n} is kept clear.".encode()
        answer = await answers.timed(
            "upload",
            http.post(
                f"/api/v1/knowledge-bases/{kb_id}/documents",
                files={"file": (f"note-{n}.md", note)},
                headers=api.auth,
            ),
        )
        if answer is not None and answer.status_code == 202:
            answers.accepted.append(answer.json()["id"])

    async def listing(n: int) -> None:
        await answers.timed(
            "listing", http.get(f"/api/v1/knowledge-bases/{kb_id}/documents", headers=api.auth)
        )

    async def repeated_question(n: int) -> None:
        await answers.timed(
            "repeated question",
            http.post(
                "/api/v1/internal/knowledge/search",
                json={"bot_id": bot, "session_id": "call-1", "query": QUESTION},
                headers={"X-Internal-Secret": api.running.internal_secret},
            ),
        )

    async def mcp_question(n: int) -> None:
        await answers.timed("mcp question", _mcp_question(api, f"{QUESTION} from berth {n}", n))

    async def new_token_question(n: int) -> None:
        if tokens:
            question = _mcp_question(api, f"{QUESTION} at dawn", n, tokens.pop())
            await answers.timed(NEW_TOKEN, question)

    async def readiness(n: int) -> None:
        await answers.timed("readiness", http.get("/readyz"))

    async def again(request: Callable[[int], Coroutine[Any, Any, None]]) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            await request(n)
            with contextlib.suppress(TimeoutError):  # half a second between requests
                await asyncio.wait_for(stop.wait(), 0.5)

    async with asyncio.TaskGroup() as group:
        for request in (
            upload,
            listing,
            repeated_question,
            mcp_question,
            new_token_question,
            readiness,
        ):
            group.create_task(again(request))


async def _drain(traffic: asyncio.Task[None]) -> None:
    """Once no new request is made, waits for those in flight to answer, for as long as one
    made at that moment may take (the bound and its slack); any still waiting then is cancelled,
    and recorded as hung (`Answers.timed`). Whatever else ended the traffic is raised."""
    await asyncio.wait({traffic}, timeout=BOUND_S + SLACK_S)
    if not traffic.done():
        traffic.cancel()
        await asyncio.wait({traffic})
    if not traffic.cancelled():
        traffic.result()


# The parts on the way from an accepted upload to the extract stage: while one is frozen, every
# upload accepted stays `queued` (the API stores it queued; only the extract stage, which gets
# it through the broker, moves it on).
HOLDS_UPLOADS = {"kafka", "extract-1"}


@pytest.mark.parametrize("part", list(EXPECTED))
async def test_a_frozen_part_gives_fast_answers_and_everything_resumes(
    stack: RunningPipeline, bot: str, part: str
) -> None:
    # The client waits far longer than the bound: a slow answer is seen, not cut by the client.
    async with httpx.AsyncClient(base_url=stack.url, timeout=60, limits=CLIENT_LIMITS) as http:
        api = Api(http, stack, stack.admin_token)
        kb = await api.create_kb(f"Freeze {part}")
        # A change to the bot (its name written again) retires the access the API holds: the
        # question below reads it anew, and it is held for `search.access_ttl_s` (60 s) from
        # then, longer than the freeze. Then asked until its answer comes from the cache.
        renamed = await http.patch(f"/api/v1/bots/{bot}", json={"name": "harbour"},
                                   headers=api.auth)  # fmt: skip
        assert renamed.status_code == 200, renamed.text
        warm = await api.ask_bot_cached(bot, QUESTION)  # now cached
        assert warm["hits"], warm
        tokens = await _fresh_tokens(api, FRESH_TOKENS)
        answers = Answers()
        pid = _pid(stack, part)
        try:
            await freeze(pid)
            stop = asyncio.Event()
            traffic = asyncio.create_task(
                _requests_while_frozen(api, bot, kb["id"], answers, stop, tokens)
            )
            await asyncio.sleep(FREEZE_S)  # the fault itself: the part stays frozen this long
            stop.set()
            await _drain(traffic)  # still frozen: every request made has answered or hung
            # Still frozen: where the uploads accepted meanwhile are, and the part's threads.
            held = [await api.document(kb["id"], doc_id) for doc_id in answers.accepted
                    if part in HOLDS_UPLOADS]  # fmt: skip
            states = thread_states(pid)
        finally:
            os.kill(pid, signal.SIGCONT)
        resumed = time.monotonic()
        async with asyncio.timeout(RECOVERY_LIMIT_S):
            finals = [await api.wait_final(kb["id"], doc_id) for doc_id in answers.accepted]
            recovered = time.monotonic() - resumed
            # Then what needs the part works again: a new upload is indexed and listed, and an
            # agent's new question over MCP finds it.
            word = unique("resumed")
            after = await api.upload(kb["id"], "after.md", f"# After\n\nBerth {word}.".encode())
            indexed = await api.wait_final(kb["id"], after["id"])
            listing = await http.get(f"/api/v1/knowledge-bases/{kb['id']}/documents",
                                     headers=api.auth)  # fmt: skip
            question = await _mcp_question(api, f"berth {word}", 0)

    slowest = max(answers.seen, key=lambda a: a[2])
    print(f"\nfrozen {part} for {FREEZE_S:.0f} s: {len(answers.seen)} requests, slowest "
          f"{slowest[0]} {slowest[2]:.2f} s; {len(answers.accepted)} uploads accepted, all "
          f"indexed {recovered:.1f} s after the resume")  # fmt: skip
    gists = Counter((kind, code, body.split(":")[0] if code == 200 and "question" in kind else "")
                    for kind, code, _, body in answers.seen)  # fmt: skip
    print("answers (kind, status, gist): count:", sorted(gists.items()))
    # The freeze took hold and lasted: every thread of the part was stopped at its end.
    assert set(states.values()) == {"T"}, (pid, states)
    # Each kind was asked more than once while the part was frozen (the first may have been
    # answered before the freeze took hold everywhere).
    asked = Counter(kind for kind, *_ in answers.seen)
    assert set(asked) == {*EXPECTED[part], "readiness"}
    assert min(asked.values()) >= 2, asked
    # No request made while the part was frozen went unanswered.
    hung = [a for a in answers.seen if a[1] == HUNG]
    assert hung == [], hung
    late = [a for a in answers.seen if a[2] > BOUND_S + SLACK_S]
    assert late == [], late
    for kind, allowed in EXPECTED[part].items():
        statuses = [a for a in answers.seen if a[0] == kind]
        assert all(a[1] in allowed for a in statuses), (kind, statuses)
    # A 200 is an answer: the bot's cached question has its hits, and an agent's new question
    # is answered, not a tool error, unless the database it needs is the frozen part.
    cached = [a for a in answers.seen if a[0] == "repeated question" and a[1] == 200]
    assert all(a[3] == "hits" for a in cached), cached
    mcp = [a for a in answers.seen if a[0] in ("mcp question", NEW_TOKEN) and a[1] == 200]
    if part != "mongodb":
        assert mcp, answers.seen
        assert all(a[3] == "answered" for a in mcp), mcp
    assert all(value == "5" for value in answers.retry_after), answers.retry_after
    status, named = READINESS[part]
    probes = [a for a in answers.seen if a[0] == "readiness"]
    assert all(a[2] < 2.0 + SLACK_S for a in probes), probes
    # The first probe may have been answered before the freeze took hold everywhere.
    for _, code, _, body in probes[1:]:
        assert code == status, probes
        if named is not None:
            assert json.loads(body)["checks"][named].startswith("error"), body
    # Where the frozen part is on the uploads' way, none of them moved while it was frozen.
    if part in HOLDS_UPLOADS:
        assert answers.accepted, answers.seen
        assert [d["parse_status"] for d in held] == ["queued"] * len(held), held
    assert indexed["parse_status"] == "indexed", indexed
    assert listing.status_code == 200, listing.text
    assert after["id"] in [d["id"] for d in listing.json()["items"]], listing.json()
    assert _what_it_said("mcp question", question) == "answered", question.text
    assert word in question.text, question.text  # the new passage is among its results
    for final in finals:
        assert final["parse_status"] == "indexed", final
    for final in [*finals, indexed]:
        chunks = await _chunks(stack, kb["id"], final["id"])
        assert sorted(c["chunk_index"] for c in chunks) == list(range(final["chunk_count"]))


async def _chunks(stack: RunningPipeline, kb_id: str, document_id: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
        return await Api(http, stack, stack.admin_token).chunks(kb_id, document_id)


async def test_a_restarted_api_answers_the_callers_it_knew_while_mongodb_is_frozen(
    stack: RunningPipeline, bot: str
) -> None:
    """An API process started again learns its callers before their first request
    (`api.learn_callers`): a person's token issued before the restart and a voice bot (named by
    its id) are answered a new question while MongoDB, frozen the moment the process learnt
    them, could tell it nothing. About 20 s: an API restart and a short freeze."""
    async with httpx.AsyncClient(base_url=stack.url, timeout=60, limits=CLIENT_LIMITS) as http:
        api = Api(http, stack, stack.admin_token)
        (person,) = await _fresh_tokens(api, 1)
        restarted = running_process(stack.services, stack.pipeline, "api")
        restarted.stop()
        restarted.start()
        async with asyncio.timeout(120):
            while not await asyncio.to_thread(stack.pipeline.api_ready):
                await asyncio.sleep(0.2)
            # Set once the process has learnt them all (the person's token and the bot among).
            while await api.metric(f"{stack.url}/metrics", "ragline_callers_learnt") == 0:
                await asyncio.sleep(0.1)
        pid = _pid(stack, "mongodb")
        try:
            await freeze(pid)
            asked = await _mcp_question(api, f"{QUESTION} on sundays", 1, person)
            voice = await http.post(
                "/api/v1/internal/knowledge/search",
                json={"bot_id": bot, "session_id": "call-2", "query": f"{QUESTION} on mondays"},
                headers={"X-Internal-Secret": stack.internal_secret},
            )
        finally:
            os.kill(pid, signal.SIGCONT)
    assert asked.status_code == 200, asked.text
    assert _what_it_said("mcp question", asked) == "answered", asked.text
    assert voice.status_code == 200, voice.text
    assert voice.json()["hits"], voice.json()
