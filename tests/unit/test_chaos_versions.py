"""The chaos soak's new versions: a file gets new versions from one upload at a time, sent
again until answered, and its old version stops being a live target before the upload is sent
(an upload answered late, or not at all, may still have been accepted and become the newest
version). Pure logic of the harness over an in-memory HTTP transport; milliseconds."""

from __future__ import annotations

import argparse
import asyncio
import random
from typing import Any, cast

import httpx

from benchmarks.chaos import Chaos
from benchmarks.soak import Corpus, Doc


class _Corpus:
    def markdown(self, code: str) -> bytes:
        return f"# Notes {code}\n".encode()


class _Api:
    """Answers uploads by a script: each either waits for `release` and is accepted (202),
    or is refused at once (503)."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.files: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        name = request.content.split(b'filename="', 1)[1].split(b'"', 1)[0].decode()
        self.files.append(name)
        status = self.answers.pop(0)
        if status == 202:
            await self.release.wait()
            return httpx.Response(202, json={"id": f"doc_new_{len(self.files)}"})
        return httpx.Response(503, headers={"Retry-After": "1"}, text="down")


def _chaos(api: _Api) -> Chaos:
    http = httpx.AsyncClient(transport=httpx.MockTransport(api), base_url="http://api")
    chaos = Chaos(
        http, cast(Any, None), cast(Any, None), cast(Corpus, _Corpus()), random.Random(3),
        argparse.Namespace(), faults=[],
    )  # fmt: skip
    chaos.kb = "kb_1"
    for name in ("a", "b", "c"):
        chaos.docs[name] = Doc(name, "markdown", f"code-{name}", status="indexed", filename=name)
        chaos.indexed_order.append(name)
    return chaos


async def test_a_second_version_waits_while_one_is_on_its_way() -> None:
    api = _Api([202])
    chaos = _chaos(api)
    first = asyncio.create_task(chaos.new_version())
    while not api.files:
        await asyncio.sleep(0)
    # Another version comes due while the first is unanswered: nothing is sent, it is owed.
    assert await chaos.new_version() is False
    old = api.files[0]
    assert old not in chaos.indexed_order  # no longer probed or deleted as live
    api.release.set()
    assert await first is True
    assert api.files == [old]
    assert chaos.replaces == {"doc_new_1": old}


async def test_an_unanswered_version_is_sent_again_for_the_same_file() -> None:
    api = _Api([503, 202])
    chaos = _chaos(api)
    api.release.set()
    assert await chaos.new_version() is False
    # Refused, or perhaps accepted with its answer lost: the old version is live no longer.
    assert api.files[0] not in chaos.indexed_order
    assert await chaos.new_version() is True
    first, second = api.files
    assert first == second
    assert first not in chaos.indexed_order
    assert sorted(chaos.indexed_order) == sorted({"a", "b", "c"} - {first})
