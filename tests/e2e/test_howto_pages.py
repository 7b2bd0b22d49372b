"""The how-to pages (`docs/how-to/`), followed as a user would: each page's ```sh and ```python
blocks run in order in one bash process (a Python block as `python3 -` with its text on
stdin, so that it sees what the page exported), against the session's mechanics stack, as the
admin of a tenant of the page's own (so that the page's codes, people and audiences are its
own on a shared stack, and nothing is rewritten). A block preceded by `<!-- not run: why -->`
is skipped: the prerequisites, which point at `make run`'s stack; the test sets `API`, `TOKEN`,
`KAFKA`, `RAGLINE_URL`, `RAGLINE_TOKEN` and `PATH` instead, and runs in a scratch directory.
What each page says a user sees is checked in its blocks' output and, with the tenant's token,
in the stack afterwards.

Cost: about 50 s of calls on the session's mechanics stack (hashed embedder, no model), plus
the stack's start when no module before it started it: three pages, two dozen documents, four
evaluations of eight cases.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.mongo.client import connect
from infra.mongo.token_repository import TokenRepository
from schemas.domain import Role
from tests.conftest import RunningPipeline, unique

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

HOW_TO = Path(__file__).resolve().parents[2] / "docs" / "how-to"
# The virtualenv's scripts (ragline, python3 with the client and aiokafka): the pages put
# `.venv/bin` first on PATH.
VENV_BIN = Path(sys.executable).parent
NOT_RUN = "<!-- not run:"
FENCE = re.compile(r"^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```$", re.S | re.M)
PAGE_TIMEOUT_S = 480
PYTHON_END = "RAGLINE_HOWTO_PYTHON"


@dataclass(frozen=True)
class Block:
    """A runnable block of a page."""

    lang: str
    body: str


@dataclass(frozen=True)
class Followed:
    """A page run to its end: each block with what it printed, and the whole stderr."""

    outputs: list[tuple[Block, str]]
    stderr: str

    def output_of(self, *marks: str) -> str:
        """What the one block holding all of `marks` printed."""
        found = [out for block, out in self.outputs if all(m in block.body for m in marks)]
        assert len(found) == 1, f"{len(found)} blocks hold {marks}"
        return found[0]

    @property
    def stdout(self) -> str:
        """Everything the page printed."""
        return "".join(out for _, out in self.outputs)


def runnable_blocks(page: Path) -> list[Block]:
    """The page's sh and python blocks, in order, less those marked not to run."""
    text = page.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        lang = match.group("lang")
        if lang not in ("sh", "python"):
            continue
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if before.startswith(NOT_RUN):
            continue
        blocks.append(Block(lang, match.group("body")))
    return blocks


def script_of(blocks: list[Block]) -> str:
    """One bash script running the blocks in order, each announced on stdout."""
    lines = ["set -euo pipefail"]
    for index, block in enumerate(blocks):
        lines.append(f"printf '\\n@@block {index}@@\\n'")
        if block.lang == "python":
            assert PYTHON_END not in block.body
            lines.append(f"python3 - <<'{PYTHON_END}'\n{block.body}{PYTHON_END}")
        else:
            lines.append(block.body)
    lines.append("printf '\\n@@end@@\\n'")
    return "\n".join(lines) + "\n"


async def tenant_admin(stack: RunningPipeline) -> str:
    """An admin token of a new tenant of the stack."""
    client = connect(stack.settings().mongo)
    try:
        tokens = TokenRepository(client[stack.database], "", "default")
        _, secret = await tokens.issue(unique("howto"), Role.ADMIN, "how-to reader")
    finally:
        await client.close()
    return secret


async def follow(stack: RunningPipeline, name: str, token: str, tmp_path: Path) -> Followed:
    """Runs the page's blocks in one bash process with the page's variables set; fails,
    showing what it printed, unless it runs to its end."""
    blocks = runnable_blocks(HOW_TO / name)
    assert blocks, f"{name} has no block to run"
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        "API": stack.url,
        "TOKEN": token,
        "RAGLINE_URL": stack.url,
        "RAGLINE_TOKEN": token,
        "KAFKA": stack.settings().kafka.bootstrap_servers,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "TMPDIR": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "COLUMNS": "160",
        "NO_COLOR": "1",
    }
    done = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", script_of(blocks)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT_S,
        check=False,
    )
    told = f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert done.returncode == 0, told
    assert "@@end@@" in done.stdout, told
    parts = re.split(r"\n@@block (\d+)@@\n", done.stdout.split("\n@@end@@\n")[0])
    outputs = [
        (blocks[int(index)], out) for index, out in zip(parts[1::2], parts[2::2], strict=True)
    ]
    assert len(outputs) == len(blocks), told
    return Followed(outputs, done.stderr)


async def get(stack: RunningPipeline, token: str, path: str, **params: Any) -> Any:
    """An answer of the stack's API with the tenant's token."""
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
        response = await http.get(path, params=params, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return response.json()


async def documents(stack: RunningPipeline, token: str, kb: str) -> list[dict[str, Any]]:
    """The KB's documents that are not being deleted."""
    page = await get(stack, token, f"/api/v1/knowledge-bases/{kb}/documents", limit=200)
    return [d for d in page["items"] if d["parse_status"] != "deleting"]


def lines(text: str) -> list[str]:
    """The non-empty lines of an output, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


async def test_connectors_and_full_sync(stack: RunningPipeline, tmp_path: Path) -> None:
    token = await tenant_admin(stack)
    page = await follow(stack, "connectors-and-full-sync.md", token, tmp_path)

    created = json.loads(page.output_of("-d @records.json | python3 -m json.tool"))
    assert [(r["external_id"], r["outcome"]) for r in created["results"]] == [
        ("kb-101", "created"),
        ("kb-102", "created"),
        ("kb-103", "created"),
    ]
    assert {r["parse_status"] for r in created["results"]} == {"queued"}
    assert lines(page.output_of("documents?external_id=kb-101")) == ["kb-101 version 1 indexed"]
    assert lines(page.output_of("-d @records.json \\\n  | python3")) == [
        "kb-101 unchanged",
        "kb-102 unchanged",
        "kb-103 unchanged",
    ]
    assert lines(page.output_of("Account, Billing details")) == [
        "kb-102 updated",
        "kb-102 version 2 indexed",
    ]
    assert "published 2 records and the end of run" in page.output_of("AIOKafkaProducer")
    listed = page.output_of('d["source"] == "wiki"')
    assert "VPN access" in listed
    assert "Printers" in listed
    first_sync = lines(page.output_of('"T-3"'))
    assert first_sync == ["T-1 created", "T-2 created", "T-3 created", "removed: []"]
    second_sync = lines(page.output_of("> sync.json"))
    assert second_sync[:2] == ["T-1 unchanged", "T-2 updated"]
    assert second_sync[2].startswith("removed: ['doc_")
    assert second_sync[3] == "the removed document answers 404"
    assert lines(page.output_of("from ragline_client import Ragline")) == [
        "batch kb-101 unchanged indexed",
        "batch kb-103 unchanged indexed",
        "sync [('T-1', 'unchanged'), ('T-2', 'unchanged')] removed []",
        "T-2 version 2 indexed",
    ]

    # The knowledge base holds what the page says: every record once, indexed, the full sync's
    # source exactly its last run, the Kafka run's records under their source.
    held = await documents(stack, token, "helpcenter")
    assert all(d["parse_status"] == "indexed" for d in held), held
    by_source: dict[str | None, list[str]] = {}
    for document in held:
        by_source.setdefault(document["source"], []).append(document["external_id"])
    assert sorted(by_source[None]) == ["kb-101", "kb-102", "kb-103"]
    assert sorted(by_source["wiki"]) == ["wiki-printers", "wiki-vpn"]
    assert sorted(by_source["helpdesk"]) == ["T-1", "T-2"]
    assert set(by_source) == {None, "wiki", "helpdesk"}


async def test_audiences_and_grants(stack: RunningPipeline, tmp_path: Path) -> None:
    token = await tenant_admin(stack)
    page = await follow(stack, "audiences-and-grants.md", token, tmp_path)

    members = page.output_of('{"user_ids": ["alice"]}').strip().splitlines()[-1]
    assert json.loads(members)["members"] == ["alice"]
    listed = page.output_of('d["visibility_mode"], d["audience_tags"]')
    assert "Offsite budget | indexed | shared ['finance'] [] owner: None" in listed
    assert "Offsite notes | indexed | private [] [] owner: alice" in listed
    assert "Offsite seating | indexed | restricted [] ['bob'] owner: None" in listed
    assert "Offsite plan | indexed | shared [] [] owner: None" in listed

    titles = ("Offsite plan", "Offsite budget", "Offsite notes", "Offsite seating")
    searches = page.output_of('echo "== admin"')
    admin, alice, bob = (part for part in re.split(r"^== \w+$", searches, flags=re.M)[1:])
    assert all(title in admin for title in titles), admin
    sees = {"Offsite plan", "Offsite budget", "Offsite notes"}
    assert {title for title in titles if title in alice} == sees, alice
    assert {title for title in titles if title in bob} == {"Offsite plan", "Offsite seating"}, bob
    assert "bob reading the budget by its id: 404" in searches

    member = page.output_of('{"user_ids": ["alice", "bob"]}')
    assert {title for title in titles if title in member} == {
        "Offsite plan",
        "Offsite seating",
        "Offsite budget",
    }, member
    granted = page.output_of("curl -s -X PATCH")
    assert "Offsite notes restricted ['bob'] owner: alice" in granted
    assert all(title in granted.split("== bob", 1)[1] for title in titles), granted
    assert lines(page.output_of("alice changing the plan")) == ["alice changing the plan: 403"]

    held = {d["title"]: d for d in await documents(stack, token, "policies")}
    assert held["Offsite notes"]["user_grants"] == ["bob"]
    assert held["Offsite notes"]["visibility_mode"] == "restricted"
    assert held["Offsite plan"]["visibility_mode"] == "shared"
    audiences = await get(stack, token, "/api/v1/audiences")
    assert [(a["tag"], sorted(a["members"])) for a in audiences["items"]] == [
        ("finance", ["alice", "bob"])
    ]


async def test_tune_with_an_evaluation(stack: RunningPipeline, tmp_path: Path) -> None:
    token = await tenant_admin(stack)
    page = await follow(stack, "tune-with-an-evaluation.md", token, tmp_path)

    assert page.output_of('"external_id": "loyalty"').count("indexed") == 10
    shown = page.output_of("ragline eval cases.jsonl --kb faq\n")
    assert "← best" in shown
    assert "a bot should use" in shown
    assert "nDCG@10" in shown
    assert "what the knowledge base's searches used" in shown
    read = lines(page.output_of('result["tried"]'))
    assert read[0].startswith("evaluation eval_")
    assert read[0].endswith("of 8 cases")
    assert len([line for line in read if "nDCG@10" in line]) == 12
    assert read[-2].startswith("best: {")
    assert read[-1].startswith("gain: ")

    applied_or_not = page.output_of('--apply "bot:$BOT"')
    refused = "nothing applied (exit 4)" in applied_or_not
    assert refused or "'s knowledge settings" in " ".join(applied_or_not.split()), applied_or_not
    if refused:
        said = " ".join(page.stderr.split())
        assert "is not a significant gain" in said or "is already" in said, said

    evaluations = await get(stack, token, "/api/v1/knowledge-bases/faq/evaluations")
    # The page's two evaluations and the one `--apply` runs; then the CI one.
    assert len(evaluations) == 4
    kb_applied = lines(page.output_of('\\"target\\": \\"kb\\"'))
    assert kb_applied[0].startswith("applied to kb before: None after: {")
    kb = await get(stack, token, "/api/v1/knowledge-bases/faq")
    named = next(e for e in evaluations if e["id"] == read[0].split()[1])
    assert kb["default_retrieval"] == {
        "retrieval_mode": named["best"]["retrieval_mode"],
        "fusion": named["best"].get("fusion"),
        "dense_weight": named["best"].get("dense_weight"),
        "rrf_k": named["best"].get("rrf_k"),
    }
    assert kb_applied[1] == f"default retrieval: {kb['default_retrieval']}"

    to_bot = page.output_of("ragline.apply_evaluation(")
    after = to_bot.split("after:", 1)[1]
    assert "'fusion': 'rrf'" in after, to_bot
    assert "'rrf_k': 20" in after, to_bot
    bots = await get(stack, token, "/api/v1/bots")
    (bot,) = bots["items"]
    assert bot["knowledge"]["fusion"] == "rrf"
    assert bot["knowledge"]["rrf_k"] == 20
    assert "the knowledge base passes" in page.output_of("--fail-under 0.5")
