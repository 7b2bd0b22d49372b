"""Rotating credentials as `docs/how-to/rotate-secrets-and-tokens.md` does it, against running
API processes: an admin's token issued, used and revoked with the `ragline` command (the old
one gets 401 at once, the new one goes on), a bot's token the same way over HTTP, a token
that expires and stays listed, and the internal search secret: an API process started with
the new secret and the previous one accepts both, and started again with the new one alone
refuses the old.

Cost (measured alone on two idle cores): the token tests run on the session's mechanics stack
(its start, about 14 s, is shared with the other mechanics modules) in about 4 s, 2.7 s of it
waiting for a token to expire; the internal secret's test starts one API process of its own
twice on the session's servers (no workers, the hashed embedder): about 12 s."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from devstack.launcher import LocalServices, Pipeline, free_port, pipeline_env
from ragline_cli import app
from tests.conftest import FAST_EMBEDDER, RunningPipeline, unique
from tests.e2e.client import CLIENT_LIMITS

pytestmark = pytest.mark.e2e


class Ragline:
    """The `ragline` command (typer's runner, in this process) against a stack."""

    def __init__(self, url: str, config_home: Path) -> None:
        self.url = url
        self.config_home = config_home
        self.runner = CliRunner()

    def __call__(self, token: str, *args: str, expect: int = 0) -> Any:
        """Runs `ragline <args> --json` with the token; returns what it printed, parsed."""
        env = {
            "RAGLINE_URL": self.url,
            "RAGLINE_TOKEN": token,
            "XDG_CONFIG_HOME": str(self.config_home),
            "NO_COLOR": "1",
        }
        result = self.runner.invoke(app, [*args, "--json"], env=env)
        assert result.exit_code == expect, f"{result.stdout}\n{result.stderr}"
        return json.loads(result.stdout) if expect == 0 else None


@pytest.fixture
def ragline(stack: RunningPipeline, tmp_path: Path) -> Ragline:
    """The command line against the module's stack."""
    return Ragline(stack.url, tmp_path / "config")


@pytest.fixture
def http(stack: RunningPipeline) -> Iterator[httpx.Client]:
    """A plain HTTP client of the module's stack."""
    with httpx.Client(base_url=stack.url, timeout=30, limits=CLIENT_LIMITS) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    """The Authorization header of a token."""
    return {"Authorization": f"Bearer {token}"}


def lists_tokens(http: httpx.Client, token: str) -> int:
    """The status `GET /api/v1/tokens` answers the token with."""
    return http.get("/api/v1/tokens", headers=bearer(token)).status_code


def test_an_admin_token_is_rotated_with_the_command_line(
    stack: RunningPipeline, ragline: Ragline, http: httpx.Client
) -> None:
    old = ragline(stack.admin_token, "tokens", "issue", unique("ci"), "--role", "admin")
    assert lists_tokens(http, old["token"]) == 200

    new = ragline(old["token"], "tokens", "issue", unique("ci"), "--role", "admin")
    assert new["expires_at"] is None
    # Both work until the old one is revoked.
    assert (lists_tokens(http, old["token"]), lists_tokens(http, new["token"])) == (200, 200)

    assert ragline(new["token"], "tokens", "revoke", old["id"]) == {"revoked": old["id"]}
    refused = http.get("/api/v1/tokens", headers=bearer(old["token"]))
    assert (refused.status_code, refused.json()) == (401, {"detail": "invalid token"})
    assert lists_tokens(http, new["token"]) == 200
    listed = [t["id"] for t in ragline(new["token"], "tokens", "list")]
    assert new["id"] in listed
    assert old["id"] not in listed
    again = http.delete(f"/api/v1/tokens/{old['id']}", headers=bearer(new["token"]))
    assert again.status_code == 404
    ragline(new["token"], "tokens", "revoke", new["id"])
    assert lists_tokens(http, new["token"]) == 401


def test_a_person_token_is_issued_for_its_user(
    stack: RunningPipeline, ragline: Ragline, http: httpx.Client
) -> None:
    person = unique("alice")
    issued = ragline(
        stack.admin_token, "tokens", "issue", "alice laptop", "--role", "user", "--user-id", person
    )
    assert (issued["role"], issued["user_id"]) == ("user", person)
    assert http.get("/api/v1/knowledge-bases", headers=bearer(issued["token"])).status_code == 200
    ragline(stack.admin_token, "tokens", "revoke", issued["id"])
    assert http.get("/api/v1/knowledge-bases", headers=bearer(issued["token"])).status_code == 401


def test_a_bot_token_is_rotated_over_http(stack: RunningPipeline, http: httpx.Client) -> None:
    admin = bearer(stack.admin_token)
    kb = http.post("/api/v1/knowledge-bases", json={"name": unique("kb")}, headers=admin)
    assert kb.status_code == 201, kb.text
    knowledge = {"enabled": True, "kb_ids": [kb.json()["id"]]}
    bot = http.post("/api/v1/bots", json={"name": "Support", "knowledge": knowledge}, headers=admin)
    assert bot.status_code == 201, bot.text
    tokens = f"/api/v1/bots/{bot.json()['id']}/tokens"

    def searches(token: str) -> int:
        body = {"query": "opening hours"}
        return http.post("/api/v1/knowledge/search", json=body, headers=bearer(token)).status_code

    old = http.post(tokens, json={"name": "agent"}, headers=admin).json()
    new = http.post(tokens, json={"name": "agent 2027"}, headers=admin).json()
    assert (old["role"], old["bot_id"]) == ("bot", bot.json()["id"])
    assert (searches(old["token"]), searches(new["token"])) == (200, 200)
    assert {old["id"], new["id"]} <= {
        t["id"] for t in http.get(tokens, headers=admin).json()["items"]
    }

    assert http.delete(f"{tokens}/{old['id']}", headers=admin).status_code == 204
    assert (searches(old["token"]), searches(new["token"])) == (401, 200)
    # `/api/v1/tokens` refuses the bot role: a bot's tokens are issued under the bot.
    as_bot = {"name": "x", "role": "bot"}
    assert http.post("/api/v1/tokens", json=as_bot, headers=admin).status_code == 422


def test_a_token_that_expires_is_refused_after_its_time_and_stays_listed(
    stack: RunningPipeline, ragline: Ragline, http: httpx.Client
) -> None:
    issued = ragline(
        stack.admin_token,
        "tokens",
        "issue",
        unique("short"),
        "--role",
        "admin",
        "--expires-in",
        "2",
    )
    expires_at = datetime.fromisoformat(issued["expires_at"])
    status = lists_tokens(http, issued["token"])
    assert status == 200 or datetime.now(expires_at.tzinfo) >= expires_at
    time.sleep(max(0.0, (expires_at - datetime.now(expires_at.tzinfo)).total_seconds()) + 0.3)
    assert lists_tokens(http, issued["token"]) == 401
    assert issued["id"] in [t["id"] for t in ragline(stack.admin_token, "tokens", "list")]
    ragline(stack.admin_token, "tokens", "revoke", issued["id"])


@pytest.fixture
def api_process(local_services: LocalServices, tmp_path: Path) -> Iterator[tuple[Pipeline, str]]:
    """One API process (no workers) on the session's servers, with a database of its own,
    not started yet; and its admin token."""
    admin_token = secrets.token_urlsafe(16)
    env = {
        **pipeline_env(local_services, tmp_path / "run", admin_token, ""),
        **FAST_EMBEDDER,
        "RAGLINE_MONGO__DATABASE": unique("rotation"),
        "RAGLINE_KAFKA__GROUP_PREFIX": unique("g"),
    }
    pipeline = Pipeline(tmp_path / "run", env, api_port=free_port())
    try:
        yield pipeline, admin_token
    finally:
        pipeline.stop()


def test_the_internal_secret_is_rotated_without_refusing_a_caller(
    api_process: tuple[Pipeline, str],
) -> None:
    pipeline, admin_token = api_process
    old, new = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    # Step 1 of the page: the new secret, and the old one as the previous.
    pipeline.env["RAGLINE_INTERNAL_SECRET"] = new
    pipeline.env["RAGLINE_INTERNAL_SECRET_PREVIOUS"] = old
    pipeline.start(workers=False)
    with httpx.Client(base_url=pipeline.api_url, timeout=30, limits=CLIENT_LIMITS) as http:
        admin = bearer(admin_token)
        kb = http.post("/api/v1/knowledge-bases", json={"name": "Rotation"}, headers=admin)
        knowledge = {"enabled": True, "kb_ids": [kb.json()["id"]]}
        bot = http.post("/api/v1/bots", json={"name": "Rotation", "knowledge": knowledge},
                        headers=admin).json()  # fmt: skip

        def search(secret: str) -> int:
            body = {"bot_id": bot["id"], "session_id": "rotation-check", "query": "hello"}
            headers = {"X-Internal-Secret": secret}
            return http.post(
                "/api/v1/internal/knowledge/search", json=body, headers=headers
            ).status_code

        # Steps 2 and 3: both secrets are accepted, nothing else is.
        assert (search(new), search(old), search("not-the-secret"), search("")) == (
            200, 200, 401, 401,
        )  # fmt: skip

    # Step 4: the previous secret retired, and the process started again.
    pipeline.stop()
    pipeline.env["RAGLINE_INTERNAL_SECRET_PREVIOUS"] = ""
    pipeline.start(workers=False)
    with httpx.Client(base_url=pipeline.api_url, timeout=30, limits=CLIENT_LIMITS) as http:
        refused = http.post(
            "/api/v1/internal/knowledge/search",
            json={"bot_id": bot["id"], "session_id": "rotation-check", "query": "hello"},
            headers={"X-Internal-Secret": old},
        )
        assert (refused.status_code, refused.json()) == (401, {"detail": "invalid internal secret"})
        accepted = http.post(
            "/api/v1/internal/knowledge/search",
            json={"bot_id": bot["id"], "session_id": "rotation-check", "query": "hello"},
            headers={"X-Internal-Secret": new},
        )
        assert accepted.status_code == 200, accepted.text
