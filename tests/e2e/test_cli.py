"""The `ragline` command line against a running stack: every command, --json, exit codes,
files not sent twice, config from the environment and the config file, clean errors, rate
limits waited out, and the live progress display in a real terminal (tmux)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from typer.testing import CliRunner, Result

from devstack.launcher import free_port
from ragline_cli import app
from tests.conftest import FIXTURES, RunningPipeline, unique
from tests.factories import KAYAK_PASSAGES, KAYAK_QUESTIONS_IN_OTHER_WORDS, KAYAK_SHOP

pytestmark = pytest.mark.e2e

# What the terminal test ingests: a few pages each, so the bars have time to move.
MANUALS = ("service-handbook.pdf", "indirect-rotation.pdf", "blk-paras-and-tables.docx")


class Cli:
    """Runs `ragline` in this process (typer's runner) against the stack, with an empty
    config folder unless the test writes one."""

    def __init__(self, stack: RunningPipeline, config_home: Path) -> None:
        self.stack = stack
        self.config_home = config_home
        self.runner = CliRunner()

    def env(self, overrides: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
        """The environment of a run: the stack's URL and admin token unless overridden."""
        env: dict[str, str | None] = {
            "RAGLINE_URL": self.stack.url,
            "RAGLINE_TOKEN": self.stack.admin_token,
            "XDG_CONFIG_HOME": str(self.config_home),
            "COLUMNS": "200",
            "NO_COLOR": "1",
        }
        env.update(overrides or {})
        return env

    def __call__(
        self, *args: str, expect: int = 0, env: Mapping[str, str | None] | None = None
    ) -> Result:
        """Runs the command; asserts its exit code and that no traceback was shown."""
        result = self.runner.invoke(app, list(args), env=self.env(env))
        shown = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        assert result.exit_code == expect, shown
        assert result.exception is None or isinstance(result.exception, SystemExit), shown
        assert "Traceback" not in result.stdout + result.stderr, shown
        return result

    def json(self, *args: str, expect: int = 0, env: Mapping[str, str | None] | None = None) -> Any:
        """Runs the command with --json; returns what it printed, parsed."""
        return json.loads(self(*args, "--json", expect=expect, env=env).stdout)


@pytest.fixture
def cli(stack: RunningPipeline, tmp_path: Path) -> Cli:
    """The command line, configured by the environment."""
    return Cli(stack, tmp_path / "config")


def _kb(cli: Cli, name: str = "Handbook") -> str:
    """A new knowledge base; returns its code."""
    code = unique("cli").replace("_", "-")
    cli("kb", "create", name, "--code", code)
    return code


def _write(root: Path, files: dict[str, str | bytes]) -> Path:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def _uploads_total(stack: RunningPipeline) -> float:
    """Every upload the API has received (`ragline_uploads_total`, any outcome)."""
    return _metric(stack, "ragline_uploads_total")


def _metric(stack: RunningPipeline, name: str) -> float:
    text = httpx.get(f"{stack.url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if head == name or head.startswith(name + "{"):
            total += float(value)
    return total


def _by_file(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["file"]: item for item in summary["files"]}


def test_kb_create_list_and_show_by_code_or_id(cli: Cli) -> None:
    code = unique("cli").replace("_", "-")
    created = cli.json("kb", "create", "Support [desk]", "--code", code, "--description", "FAQ")
    assert (created["name"], created["code"], created["description"]) == (
        "Support [desk]",
        code,
        "FAQ",
    )
    listed = cli.json("kb", "list")
    assert created["id"] in [kb["id"] for kb in listed]
    assert cli.json("kb", "show", code)["id"] == created["id"]
    assert cli.json("kb", "show", created["id"])["code"] == code
    table = cli("kb", "list").stdout
    assert code in table
    assert "Support [desk]" in table  # shown as it is, not read as markup
    shown = cli("kb", "show", code).stdout
    assert "Support [desk]" in shown
    assert "active" in shown

    taken = cli("kb", "create", "Other", "--code", code, expect=4)
    assert code in taken.stderr
    assert "HTTP 409" in taken.stderr
    malformed = cli("kb", "create", "Other", "--code", "Not_A_Code", expect=4)
    assert "code" in malformed.stderr
    assert "HTTP 422" in malformed.stderr
    missing = cli("kb", "show", "no-such-kb", expect=4)
    assert "'no-such-kb' not found (HTTP 404)" in missing.stderr


def test_ingest_a_tree_sends_only_what_the_kb_lacks(cli: Cli, tmp_path: Path) -> None:
    code = _kb(cli)
    tree = _write(
        tmp_path / "handbook",
        {
            "returns.md": "# Returns\n\nA kayak may be returned within thirty days.\n",
            "policies/shipping.txt": "Orders ship from Rotterdam every Tuesday and Friday.\n",
            "policies/care/rinsing.md": "# Care\n\nRinse the kayak with fresh water.\n",
            "policies/photo.png": b"\x89PNG\r\n\x1a\n",
            ".drafts/secret.md": "# Draft\n\nNot for the knowledge base.\n",
            # Enough documents that their statuses are read from the KB's listing.
            **{f"policies/faq/q{n}.md": f"# Question {n}\n\nAnswer {n}.\n" for n in range(6)},
            # The same bytes as q0.md: sent once, both follow its document.
            "policies/faq/q0_copy.md": "# Question 0\n\nAnswer 0.\n",
        },
    )
    faq = [f"handbook/policies/faq/q{n}.md" for n in range(6)]
    before = _uploads_total(cli.stack)

    # The folder's own files only; then its whole tree.
    top = cli.json("ingest", str(tree), "--kb", code)
    assert [(f["file"], f["outcome"], f["status"]) for f in top["files"]] == [
        ("handbook/returns.md", "new", "indexed")
    ]
    whole = cli.json("ingest", str(tree), "--kb", code, "--recursive")
    files = _by_file(whole)
    copy = files.pop("handbook/policies/faq/q0_copy.md")
    assert sorted(files) == sorted(
        [
            "handbook/policies/care/rinsing.md",
            *faq,
            "handbook/policies/shipping.txt",
            "handbook/returns.md",
        ]
    )
    assert (copy["outcome"], copy["status"]) == ("unchanged", "indexed")
    assert copy["document_id"] == files[faq[0]]["document_id"]
    assert files["handbook/returns.md"]["outcome"] == "unchanged"
    assert files["handbook/returns.md"]["document_id"] == top["files"][0]["document_id"]
    for name in ("handbook/policies/care/rinsing.md", "handbook/policies/shipping.txt", *faq):
        assert (files[name]["outcome"], files[name]["status"]) == ("new", "indexed")
        assert files[name]["chunks"] >= 1
    assert whole["skipped"] == [
        {"path": "handbook/policies/photo.png", "reason": "not a type Ragline ingests"}
    ]
    assert whole["counts"] == {"indexed": 10, "failed": 0, "in_progress": 0, "unchanged": 2}
    assert _uploads_total(cli.stack) == before + 9  # neither returns.md again nor the copy

    # The same tree again: nothing is sent.
    again = cli("ingest", str(tree), "--kb", code, "-r")
    assert _uploads_total(cli.stack) == before + 9
    assert "10 files: 10 indexed (10 unchanged)" in again.stdout
    assert again.stdout.count("unchanged") >= 10
    assert "Indexed" in again.stdout  # the bars' last state, then the summary
    listed = cli.json("docs", "list", "--kb", code, "--all")
    assert sorted(d["filename"] for d in listed) == sorted(
        ["returns.md", "rinsing.md", "shipping.txt", *(f"q{n}.md" for n in range(6))]
    )
    assert len(cli.json("docs", "list", "--kb", code, "--limit", "4")) == 4

    # A glob pattern; a changed file is a new version of its document.
    (tree / "returns.md").write_text("# Returns\n\nA kayak may be returned within sixty days.\n")
    globbed = cli.json("ingest", f"{tree}/**/*.md", "--kb", code)
    files = _by_file(globbed)
    assert sorted(files) == sorted(
        [f"{tree}/policies/care/rinsing.md", f"{tree}/returns.md"]
        + [f"{tree}/policies/faq/q{n}.md" for n in range(6)]
        + [f"{tree}/policies/faq/q0_copy.md"]
    )
    changed = files[f"{tree}/returns.md"]
    assert (changed["outcome"], changed["status"]) == ("new version", "indexed")
    assert files[f"{tree}/policies/care/rinsing.md"]["outcome"] == "unchanged"
    versions = [d for d in cli.json("docs", "list", "--kb", code) if d["filename"] == "returns.md"]
    assert [(d["id"], d["version"]) for d in versions] == [(changed["document_id"], 2)]


def test_a_failed_document_fails_the_run_and_reindex_tries_again(cli: Cli, tmp_path: Path) -> None:
    code = _kb(cli)
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(FIXTURES / "encrypted-file.pdf", folder)
    (folder / "hours.txt").write_text("The desk opens at nine and closes at five.\n")

    run = cli("ingest", str(folder), "--kb", code, expect=1)
    assert "2 files: 1 indexed, 1 failed" in run.stdout
    assert "encrypted" in run.stdout
    rows = [line for line in run.stdout.splitlines() if "encrypted-file.pdf" in line]
    assert rows
    assert "failed" in rows[0]

    failed = cli.json("docs", "list", "--kb", code, "--status", "failed")
    assert [d["filename"] for d in failed] == ["encrypted-file.pdf"]
    assert "encrypted" in failed[0]["parse_error"]
    indexed = cli.json("docs", "list", "--kb", code, "--status", "indexed")
    assert [d["filename"] for d in indexed] == ["hours.txt"]
    assert "encrypted-file.pdf" in cli("docs", "list", "--kb", code).stdout

    # Re-run on the failed ones: it fails again, for the same reason.
    again = cli.json("reindex", "--kb", code, "--status", "failed", expect=1)
    [document] = again["documents"]
    assert (document["file"], document["outcome"], document["status"]) == (
        "encrypted-file.pdf",
        "reindexed",
        "failed",
    )
    assert "encrypted" in document["error"]
    # By id, it indexes what can be indexed; an unknown id is refused on its own.
    mixed = cli.json("reindex", "--kb", code, indexed[0]["id"], "doc_unknown", expect=1)
    outcomes = [(d["outcome"], d["status"]) for d in mixed["documents"]]
    assert outcomes == [("reindexed", "indexed"), ("rejected", None)]
    assert "not found" in mixed["documents"][1]["error"]
    cli("reindex", "--kb", code, indexed[0]["id"])
    usage = cli("reindex", "--kb", code, expect=2)
    assert "--status" in usage.stderr


def test_files_the_api_refuses_are_reported_and_the_rest_still_go(cli: Cli, tmp_path: Path) -> None:
    code = _kb(cli)
    picture = tmp_path / "diagram.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n")
    large = tmp_path / "large.txt"
    large.write_text("word " * 600_000)  # 3 MB; the stack takes 2 MB
    fine = tmp_path / "fine.txt"
    fine.write_text("A small note about paddles.\n")

    summary = cli.json("ingest", str(picture), str(large), str(fine), "--kb", code, expect=1)
    files = _by_file(summary)
    assert files[str(picture)]["outcome"] == "rejected"
    assert "HTTP 415" in files[str(picture)]["error"]
    assert files[str(large)]["outcome"] == "rejected"
    assert "HTTP 413" in files[str(large)]["error"]
    assert (files[str(fine)]["outcome"], files[str(fine)]["status"]) == ("new", "indexed")

    missing = cli("ingest", str(tmp_path / "absent"), "--kb", code, expect=2)
    assert "no such file or folder" in missing.stderr
    nothing = cli("ingest", f"{tmp_path}/*.xyz", "--kb", code, expect=2)
    assert "no file matches" in nothing.stderr
    no_kb = cli("ingest", str(fine), "--kb", "no-such-kb", expect=4)
    assert "not found" in no_kb.stderr

    # Two files of one name would be versions of one document: refused unless named by path.
    twins = _write(tmp_path / "twins", {"a/notes.md": "# A\n\nalpha", "b/notes.md": "# B\n\nbeta"})
    clash = cli("ingest", str(twins), "--kb", code, "-r", expect=2)
    assert "notes.md: twins/a/notes.md, twins/b/notes.md" in clash.stderr
    named = cli.json("ingest", str(twins), "--kb", code, "-r", "--path-names")
    assert [f["status"] for f in named["files"]] == ["indexed", "indexed"]
    listed = {d["filename"] for d in cli.json("docs", "list", "--kb", code)}
    assert {"a--notes.md", "b--notes.md"} <= listed


def test_search_shows_passages_and_waits_out_the_rate_limit(cli: Cli, tmp_path: Path) -> None:
    code = _kb(cli)
    note = tmp_path / "warranty.md"
    note.write_text("# Warranty\n\nPaddles carry a two-year warranty against defects.\n")
    [item] = cli.json("ingest", str(note), "--kb", code)["files"]

    results = cli.json("search", "How long is the paddle warranty?", "--kb", code)
    assert results[0]["source"] == item["document_id"]
    assert "two-year warranty" in results[0]["content"]
    shown = cli("search", "paddle warranty", "--kb", code, "-n", "1").stdout
    assert "1. " in shown
    assert "Warranty" in shown
    assert "two-year warranty" in shown
    assert "no passages found" in cli("search", "paddle warranty", "--kb", _kb(cli)).stdout

    # A person over their searches per second: the CLI waits as Retry-After says and gets its
    # answer; told not to wait, it stops with the API's message.
    person = unique("reader")
    token = cli.json("tokens", "issue", person, "--role", "user", "--user-id", person)["token"]
    as_person = {"RAGLINE_TOKEN": token}
    _use_up_searches(cli.stack, person, seconds=3)
    refused = cli("--rate-limit-wait", "0", "search", "paddle warranty", "--kb", code,
                  expect=6, env=as_person)  # fmt: skip
    assert "too many searches" in refused.stderr
    assert "HTTP 429" in refused.stderr
    _use_up_searches(cli.stack, person, seconds=3)
    started = time.monotonic()
    waited = cli("search", "paddle warranty", "--kb", code, env=as_person)
    assert time.monotonic() - started >= 1
    assert "rate-limited by the API (too many searches" in waited.stderr
    assert "two-year warranty" in waited.stdout


def _use_up_searches(stack: RunningPipeline, user_id: str, seconds: int) -> None:
    """Counts a million searches of the person in each of the next seconds' rate windows,
    in the API's Redis (as `infra.redis.rate_limits.RateLimiter` keys them), so that their
    searches in those seconds are refused with 429 and when to try again."""
    client = redis.Redis.from_url(stack.services.redis_url)
    try:
        now = int(time.time())
        for window in range(now, now + seconds):
            key = f"ragline:limit:search:user:default:{user_id}:{window}"
            client.set(key, 1_000_000, ex=seconds + 2)
    finally:
        client.close()


def test_tokens_are_issued_used_and_revoked(cli: Cli) -> None:
    name = unique("reader")
    issued = cli.json("tokens", "issue", name, "--role", "user", "--user-id", "alice")
    assert (issued["name"], issued["role"], issued["user_id"]) == (name, "user", "alice")
    secret = issued["token"]
    assert issued["id"] in [t["id"] for t in cli.json("tokens", "list")]
    assert name in cli("tokens", "list").stdout
    assert "shown only this once" in cli("tokens", "issue", unique("x"), "--role", "admin").stdout

    # The user's token reads; an admin's operation is refused cleanly.
    assert isinstance(cli.json("kb", "list", env={"RAGLINE_TOKEN": secret}), list)
    refused = cli("tokens", "list", expect=5, env={"RAGLINE_TOKEN": secret})
    assert "HTTP 403" in refused.stderr

    assert cli.json("tokens", "revoke", issued["id"]) == {"revoked": issued["id"]}
    revoked = cli("--token", secret, "kb", "list", expect=5)
    assert "invalid token (HTTP 401); the token from --token was refused" in revoked.stderr
    assert issued["id"] not in [t["id"] for t in cli.json("tokens", "list")]
    assert "--user-id" in cli("tokens", "issue", "x", "--role", "user", expect=2).stderr


def test_config_comes_from_flags_then_environment_then_file(cli: Cli) -> None:
    unset: dict[str, str | None] = {"RAGLINE_URL": None, "RAGLINE_TOKEN": None}
    path = cli.config_home / "ragline" / "config.toml"

    nothing = cli("kb", "list", expect=3, env=unset)
    for hint in ("RAGLINE_URL", "RAGLINE_TOKEN", str(path), "--url"):
        assert hint in nothing.stderr
    cli("config", expect=3, env=unset)

    path.parent.mkdir(parents=True)
    path.write_text(f'url = "{cli.stack.url}"\ntoken = "{cli.stack.admin_token}"\n')
    assert isinstance(cli.json("kb", "list", env=unset), list)
    shown = cli.json("config", env=unset)
    assert shown["url"] == {"value": cli.stack.url, "source": str(path)}
    assert shown["token"]["source"] == str(path)
    assert cli.stack.admin_token not in json.dumps(shown)

    # The environment beats the file; a flag beats the environment.
    bad = cli("kb", "list", expect=5, env={"RAGLINE_URL": None, "RAGLINE_TOKEN": "nope"})
    assert "the token from RAGLINE_TOKEN was refused" in bad.stderr
    good, wrong = cli.stack.admin_token, {"RAGLINE_TOKEN": "nope"}
    assert isinstance(cli.json("--token", good, "kb", "list", env=wrong), list)
    assert cli.json("--token", good, "config", env=wrong)["token"]["source"] == "--token"
    elsewhere = f"http://127.0.0.1:{free_port()}"
    unreachable = cli("kb", "list", expect=6, env={"RAGLINE_URL": elsewhere})
    assert f"cannot reach the API at {elsewhere}" in unreachable.stderr

    path.write_text('url = "http://127.0.0.1:1"\napi_key = "x"\n')
    assert "unknown keys api_key" in cli("kb", "list", expect=2, env=unset).stderr
    path.write_text("url = \n")
    assert "cannot read" in cli("kb", "list", expect=2, env=unset).stderr


def _kayak_kb_and_cases(cli: Cli, tmp_path: Path) -> tuple[str, Path]:
    """A KB of two kayak shop pages, and evaluation cases for it (one it cannot answer)."""
    code = _kb(cli)
    docs = _write(
        tmp_path / "kayaks",
        {
            "returns.md": "# Returns\n\nYou can return a kayak within thirty days of delivery.",
            "shipping.md": "# Shipping\n\nOrders ship from Rotterdam every Tuesday and Friday.",
        },
    )
    cli("ingest", str(docs), "--kb", code)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        '{"query": "How long do I have to return a kayak?", "expected": ["within thirty days"]}\n'
        "\n"
        '{"query": "Is there a warranty on paddles?", "expected": "a two-year warranty"}\n'
    )
    return code, cases


def test_eval_shows_scores_best_configuration_and_misses(cli: Cli, tmp_path: Path) -> None:
    code, cases = _kayak_kb_and_cases(cli, tmp_path)

    shown = cli("eval", str(cases), "--kb", code).stdout
    for part in ("2 cases, k = 4", "nDCG@10", "← best", "a bot should use", "knowledge."):
        assert part in shown
    assert "Is there a warranty on paddles?" in shown
    assert "missing: a two-year warranty" in shown

    evaluation = cli.json("eval", str(cases), "--kb", code, "--k", "2")
    assert (evaluation["case_count"], evaluation["k"]) == (2, 2)
    assert evaluation["best"]["retrieval_mode"] in ("dense", "hybrid")
    best_mode = evaluation["modes"][evaluation["best"]["retrieval_mode"]]
    assert [miss["query"] for miss in best_mode["misses"]] == ["Is there a warranty on paddles?"]
    assert evaluation["best_scores"]["recall_at_k"] == 0.5

    under = cli("eval", str(cases), "--kb", code, "--fail-under", "0.9", expect=1)
    assert "is under 0.9" in under.stdout
    dense = cli("eval", str(cases), "--kb", code, "--misses", "dense").stdout
    assert "misses with dense" in dense

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"query": "fine", "expected": ["x"]}\n{"query": \n')
    assert f"{broken}:2: not JSON" in cli("eval", str(broken), "--kb", code, expect=2).stderr
    invalid = tmp_path / "invalid.jsonl"
    invalid.write_text('{"query": "fine", "expected": ["x"]}\n\n{"query": "no answer"}\n')
    refused = cli("eval", str(invalid), "--kb", code, expect=4)
    assert f"cases.1 ({invalid}:3)" in refused.stderr
    assert "HTTP 422" in refused.stderr


def test_eval_applies_the_best_only_when_it_is_a_significant_gain(cli: Cli, tmp_path: Path) -> None:
    code = _kb(cli)
    cli("ingest", str(_write(tmp_path / "kayaks", dict(KAYAK_SHOP))), "--kb", code)
    cases = tmp_path / "cases.jsonl"
    # The questions in other words, and one the shop cannot answer (missed by every
    # configuration alike).
    asked = [(q, KAYAK_PASSAGES[page]) for q, page in KAYAK_QUESTIONS_IN_OTHER_WORDS]
    asked.append(("Do you sell surfboards?", "surfboards in stock"))
    cases.write_text(
        "".join(json.dumps({"query": q, "expected": [passage]}) + "\n" for q, passage in asked)
    )
    kb_id = cli.json("kb", "show", code)["id"]
    admin = httpx.Client(
        base_url=cli.stack.url, headers={"Authorization": f"Bearer {cli.stack.admin_token}"}
    )

    def bot(kb_ids: list[str]) -> str:
        knowledge = {"enabled": True, "kb_ids": kb_ids}
        created = admin.post("/api/v1/bots", json={"name": unique("bot"), "knowledge": knowledge})
        assert created.status_code == 201, created.text
        return str(created.json()["id"])

    with admin:
        attached, unattached = bot([kb_id]), bot([])
        # The KB's searches made keyword searches: a sparse configuration applied by name.
        body = {"cases": [json.loads(line) for line in cases.read_text().splitlines()]}
        first = admin.post(f"/api/v1/knowledge-bases/{kb_id}/evaluations", json=body, timeout=120)
        assert first.status_code == 201, first.text
        sparse = {"target": "kb", "config": {"retrieval_mode": "sparse"}}
        path = f"/api/v1/knowledge-bases/{kb_id}/evaluations/{first.json()['id']}/apply"
        applied = admin.post(path, json=sparse)
        assert applied.status_code == 200, applied.text

        # As the KB's default: its searches are keyword searches, which find none of these
        # questions; the best is a significant gain over that, said, applied and used.
        shown = cli("eval", str(cases), "--kb", code, "--apply", "kb").stdout
        kb = cli.json("kb", "show", code)
        best = kb["default_retrieval"]
        assert best["retrieval_mode"] in ("dense", "hybrid")
        assert "against sparse, what the knowledge base's searches used: nDCG@10 +" in shown
        assert "better in 8, worse in 0 of 9 cases" in shown
        assert "a significant gain; --apply puts it to use" in shown
        assert (
            f"applied {_label(best)} to the knowledge base's default retrieval: before sparse, "
            f"now {_label(best)}"
        ) in shown
        [result, *_] = cli.json("search", "return a kayak", "--kb", code)
        way = "semantic match" if best["retrieval_mode"] == "dense" else "hybrid:"
        assert result["retrieval_rationale"].startswith(way)

        # To a bot that searches as well as the best already: refused with the reason, the
        # evaluation still shown, nothing applied.
        refused = cli(
            "eval", str(cases), "--kb", code, "--apply", f"bot:{attached}", "--json", expect=4
        )
        answer = json.loads(refused.stdout)
        assert answer["applied"] is None
        assert answer["offered"] is False
        assert "HTTP 409" in refused.stderr
        assert "nothing was applied" in refused.stderr
        assert admin.get(f"/api/v1/bots/{attached}").json()["revision"] == 0

        # Refused: a bot without the KB, a target that is neither (before anything runs), a
        # best under --fail-under.
        refused = cli(
            "eval", str(cases), "--kb", code, "--apply", f"bot:{unattached}", "--json", expect=4
        )
        assert json.loads(refused.stdout)["applied"] is None
        assert f"does not have knowledge base '{kb_id}' attached" in refused.stderr
        wrong = cli("eval", str(cases), "--kb", code, "--apply", "everything", expect=2)
        assert "--apply takes kb or bot:<bot_id>, not 'everything'" in wrong.stderr
        under = cli(
            "eval", str(cases), "--kb", code, "--apply", "kb", "--fail-under", "0.999", expect=1
        )
        assert "is under 0.999; nothing applied" in under.stdout
        assert admin.get(f"/api/v1/bots/{unattached}").json()["revision"] == 0


def _label(config: dict[str, Any]) -> str:
    """A configuration as the CLI names it."""
    if config["retrieval_mode"] == "hybrid" and config["fusion"] == "rrf":
        return f"hybrid rrf k={config['rrf_k']}"
    if config["retrieval_mode"] == "hybrid":
        weight = config["dense_weight"]
        return f"hybrid {config['fusion']} {'per query' if weight is None else format(weight, 'g')}"
    return str(config["retrieval_mode"])


def test_the_console_script_shows_live_progress_in_a_terminal(
    stack: RunningPipeline, cli: Cli, tmp_path: Path
) -> None:
    """`ragline ingest` under tmux: the bars move in place while the pipeline works, then the
    summary table is printed below them."""
    script = Path(sys.executable).with_name("ragline")
    assert script.exists(), "the console script is installed by `pip install -e .`"
    code = _kb(cli, "Terminal")
    folder = tmp_path / "manuals"
    folder.mkdir()
    for name in MANUALS:
        shutil.copy(FIXTURES / name, folder)
    tmux = shutil.which("tmux")
    assert tmux, "tmux is installed by `make test` (make system-packages)"
    socket = tmp_path / "tmux.sock"
    command = f"{script} ingest {folder} --kb {code}; echo EXIT=$?; sleep 600"
    subprocess.run(
        [tmux, "-S", str(socket), "new-session", "-d", "-x", "120", "-y", "40",
         "-e", f"RAGLINE_URL={stack.url}", "-e", f"RAGLINE_TOKEN={stack.admin_token}",
         "-e", f"XDG_CONFIG_HOME={tmp_path}", command],
        check=True, env={**os.environ, "TERM": "xterm-256color"},
    )  # fmt: skip
    frames: list[str] = []
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            pane = subprocess.run(
                [tmux, "-S", str(socket), "capture-pane", "-p"],
                check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            frames.append(pane)
            if "EXIT=" in pane:
                break
            time.sleep(0.1)
    finally:
        subprocess.run([tmux, "-S", str(socket), "kill-server"], check=False)
    final = frames[-1]
    assert "EXIT=0" in final, final
    # While it ran: the bars per stage, some not yet full, and no summary yet.
    moving = [
        frame
        for frame in frames
        if "Extracted" in frame and "Indexed" in frame and "Outcome" not in frame
    ]
    assert moving, frames[-5:]
    assert any(_unfinished(frame, "Indexed") for frame in moving), moving[-1]
    assert all("━" in frame and "Uploaded" in frame for frame in moving)
    # At the end: the bars drawn once (updated in place, not printed again), full, then the
    # summary table.
    assert final.count("Extracted") == 1, final
    assert "3/3" in _line(final, "Indexed")
    assert "chunks" in final
    for name in MANUALS:
        assert "indexed" in _line(final, name), final
    assert "3 files: 3 indexed" in final
    assert final.index("Indexed") < final.index("Outcome") < final.index("3 files")


def _line(screen: str, text: str) -> str:
    return next((line for line in screen.splitlines() if text in line), "")


def _unfinished(screen: str, label: str) -> bool:
    """Whether the bar's count reads `done/total` with done < total."""
    for word in _line(screen, label).split():
        done, slash, total = word.partition("/")
        if slash and done.isdigit() and total.isdigit():
            return int(done) < int(total)
    return False
