"""The admin console at /console, driven end to end in headless Chromium (Debian's chromium and
chromium-driver, through Selenium) against a whole running stack: log in, knowledge bases,
uploads by drag and drop followed live, failed documents re-indexed, the search playground,
evaluations with their misses and a configuration of theirs applied to a bot or the KB, log
out. Each step's screenshot is kept in tests/artifacts/console/."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from schemas.search import SearchHit
from tests.conftest import FIXTURES, RunningPipeline, unique
from tests.e2e.console_browser import Browser, chromium
from tests.factories import KAYAK_SHOP

pytestmark = pytest.mark.e2e

SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
FINAL = {"indexed", "failed"}
ENCRYPTED_REASON = "the PDF is encrypted; upload a copy without a password"
TEXTS = {name: KAYAK_SHOP[name] for name in ("returns.md", "shipping.md", "warranty.md")}


@dataclass
class Library:
    """A knowledge base with indexed documents and a bot over it, made through the API."""

    kb: dict[str, Any]
    documents: dict[str, str]
    bot: dict[str, Any]


@pytest.fixture(scope="module")
def admin(stack: RunningPipeline) -> Iterator[httpx.Client]:
    """The REST API as the admin of tenant `default`, to set up and to check what the console
    did."""
    headers = {"Authorization": f"Bearer {stack.admin_token}"}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def browser(stack: RunningPipeline) -> Iterator[Browser]:
    """Headless Chromium on the stack's origin; screenshots in tests/artifacts/console/."""
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    with chromium(stack.url, SHOTS) as opened:
        yield opened
    print(f"console screenshots: {SHOTS}")


@pytest.fixture
def console(browser: Browser, stack: RunningPipeline) -> Iterator[Browser]:
    """The console, logged in as the admin; afterwards, the page must have logged no error of
    its own (a script error, a refused load under its security policy)."""
    browser.open("/console/")
    if browser.wait(lambda: _view(browser), "the login or the console") == "login":
        _log_in(browser, stack.admin_token)
    browser.find("#app-view")
    yield browser
    assert _page_errors(browser) == []


@pytest.fixture(scope="module")
def library(admin: httpx.Client) -> Library:
    kb = _ok(admin.post("/api/v1/knowledge-bases", json={"name": unique("Kayak shop")}), 201)
    documents = {}
    for name, text in TEXTS.items():
        uploaded = _upload(admin, kb["id"], name, text.encode())
        documents[name] = uploaded["id"]
    for document_id in documents.values():
        assert _wait_final(admin, kb["id"], document_id)["parse_status"] == "indexed"
    bot = _ok(
        admin.post(
            "/api/v1/bots",
            json={
                "name": unique("Support"),
                "knowledge": {"enabled": True, "kb_ids": [kb["id"]], "score_threshold": 0.2},
            },
        ),
        201,
    )
    return Library(kb, documents, bot)


def test_a_bad_token_is_refused_with_the_apis_message_and_a_good_one_logs_in(
    browser: Browser, stack: RunningPipeline, library: Library
) -> None:
    browser.open("/console/")
    if browser.wait(lambda: _view(browser), "the login or the console") == "console":
        browser.click("#logout")
    browser.fill("#token", "not-a-token")
    browser.click("#login-button")
    error = browser.wait_text("#login-error", "HTTP 401")
    assert error == "Log in failed: invalid token (HTTP 401)"
    assert _stored_token(browser) is None
    browser.screenshot("login-refused")

    _log_in(browser, stack.admin_token)
    row = browser.find(f"tr[data-kb-id='{library.kb['id']}']")
    assert library.kb["name"] in row.text
    assert "active" in row.text
    assert _stored_token(browser) == stack.admin_token
    browser.screenshot("knowledge-bases")
    assert _page_errors(browser) == []


def test_a_knowledge_base_is_created_edited_disabled_and_enabled(
    console: Browser, admin: httpx.Client
) -> None:
    console.open("/console/#/kbs")
    name = unique("Handbook")
    code = unique("hb").replace("_", "-").lower()
    console.fill("#kb-name", name)
    console.fill("#kb-code", code)
    console.fill("#kb-description", "Staff policies")
    console.screenshot("kb-create-form")
    console.click("#kb-create")
    assert console.wait_text("#kb-title", name) == name
    assert console.notice() == f"Created knowledge base “{name}”."
    kb = _ok(admin.get(f"/api/v1/knowledge-bases/{code}"))
    assert (kb["name"], kb["description"], kb["status"]) == (name, "Staff policies", "active")

    # A second KB with the same code is refused, and the API's reason is shown.
    console.open("/console/#/kbs")
    console.fill("#kb-name", "Another")
    console.fill("#kb-code", code)
    console.click("#kb-create")
    refusal = console.wait_notice("HTTP 409")
    assert code in refusal
    console.screenshot("kb-create-refused")

    # Edit: what the API stores comes back as text, markup included, never as markup.
    console.open(f"/console/#/kb/{kb['id']}/settings")
    console.fill("#edit-name", f"{name} 2")
    console.fill("#edit-description", "Policies <b>& procedures</b>")
    console.click("#kb-save")
    console.wait_text("#kb-title", f"{name} 2")
    assert console.notice() == f"Saved “{name} 2”."
    assert console.text("#kb-description-text") == "Policies <b>& procedures</b>"
    assert console.finds("#kb-header b") == []
    stored = _ok(admin.get(f"/api/v1/knowledge-bases/{kb['id']}"))
    assert (stored["name"], stored["description"]) == (f"{name} 2", "Policies <b>& procedures</b>")
    console.screenshot("kb-edited")

    console.click("#kb-disable")
    console.accept_confirmation()
    console.find("#kb-enable")
    assert console.notice() == f"“{name} 2” is disabled."
    console.wait_text("#kb-header .badge", "disabled")
    assert _ok(admin.get(f"/api/v1/knowledge-bases/{kb['id']}"))["status"] == "disabled"
    console.screenshot("kb-disabled")

    console.click("#kb-enable")
    console.find("#kb-disable")
    assert console.notice() == f"“{name} 2” is active."
    assert _ok(admin.get(f"/api/v1/knowledge-bases/{kb['id']}"))["status"] == "active"
    console.open("/console/#/kbs")
    assert "active" in console.find(f"tr[data-kb-id='{kb['id']}']").text


def test_dropped_files_upload_and_their_progress_shows_live_until_indexed_or_failed(
    console: Browser, admin: httpx.Client
) -> None:
    kb = _ok(admin.post("/api/v1/knowledge-bases", json={"name": unique("Dropped")}), 201)
    console.open(f"/console/#/kb/{kb['id']}/documents")
    console.find("#no-documents")
    # A mark on the page: if it is still there at the end, the page was never reloaded.
    console.driver.execute_script("window.__sameDocument = true;")
    guide = "\n\n".join(f"## Step {n}\n\n" + f"Paddle stroke number {n}. " * 40 for n in range(8))
    console.drop_files(
        "#drop-zone",
        [
            ("paddling.md", f"# Paddling guide\n\n{guide}".encode(), "text/markdown"),
            ("locked.pdf", (FIXTURES / "encrypted-file.pdf").read_bytes(), "application/pdf"),
            ("tool.exe", b"MZ\x90\x00", "application/octet-stream"),
        ],
    )
    # The refused file says why, in the list of uploads and in the notice.
    refused = console.wait_text("#uploads li[data-file='tool.exe']", "HTTP 415")
    assert "unsupported file type '.exe'" in refused
    assert "tool.exe: unsupported file type '.exe'" in console.notice()

    documents = {d["filename"]: d for d in _documents(admin, kb["id"])}
    assert set(documents) == {"paddling.md", "locked.pdf"}
    guide_row = f"tr[data-document-id='{documents['paddling.md']['id']}']"
    pdf_row = f"tr[data-document-id='{documents['locked.pdf']['id']}']"
    # The console shows the document on its way, then indexed, without being reloaded.
    seen: list[str] = []
    deadline = time.monotonic() + 120
    # A row's status and its progress text, read in one step: read one after the other, the
    # page could update between them (seen once: "queued", then "extracting (2 of 6)").
    snapshot = (
        "const row = document.querySelector(arguments[0]);"
        "if (!row) return null;"
        "const text = row.querySelector('.progress-text');"
        "return [row.dataset.status, text ? text.innerText.trim() : ''];"
    )
    console.find(guide_row)
    while "indexed" not in seen[-1:]:
        read = console.driver.execute_script(snapshot, guide_row)
        if read is None:  # the row is being drawn again
            assert time.monotonic() < deadline, seen
            time.sleep(0.05)
            continue
        status, progress = read
        if status not in seen[-1:]:
            seen.append(status)
            if status not in FINAL:
                assert status in progress or "chunks embedded" in progress, progress
                console.screenshot(f"upload-{status}")
        assert status != "failed", console.text(guide_row)
        assert time.monotonic() < deadline, seen
        time.sleep(0.05)
    assert seen[0] in {"queued", "extracting", "chunking", "embedding", "indexing"}, seen
    assert "done" in console.text(f"{guide_row} .progress-text")
    chunks = _ok(admin.get(f"/api/v1/knowledge-bases/{kb['id']}/documents/"
                           f"{documents['paddling.md']['id']}"))["chunk_count"]  # fmt: skip
    assert console.text(f"{guide_row} td.num") == str(chunks)

    console.wait(lambda: console.attribute(pdf_row, "data-status") == "failed", "the PDF failed")
    assert console.text(f"{pdf_row} td.reason") == ENCRYPTED_REASON
    console.wait(lambda: console.find(f"{pdf_row} button.reindex").is_enabled(), "a re-index")
    assert console.driver.execute_script("return window.__sameDocument === true")
    console.wait_text("#live", "as of")
    console.screenshot("upload-final")


def test_a_failed_document_shows_why_and_is_re_indexed_from_the_console(
    console: Browser, admin: httpx.Client
) -> None:
    kb = _ok(admin.post("/api/v1/knowledge-bases", json={"name": unique("Failures")}), 201)
    _upload(admin, kb["id"], "notes.md", b"# Notes\n\nThe shop opens at nine.")
    pdf = _upload(admin, kb["id"], "locked.pdf", (FIXTURES / "encrypted-file.pdf").read_bytes())
    before = _wait_final(admin, kb["id"], pdf["id"])
    assert before["parse_status"] == "failed"

    console.open(f"/console/#/kb/{kb['id']}/documents")
    console.find("#doc-filter option[value='failed']").click()
    row = f"tr[data-document-id='{pdf['id']}']"
    console.wait(lambda: len(console.finds("#documents tbody tr")) == 1, "only the failed one")
    assert console.text(f"{row} td.reason") == ENCRYPTED_REASON
    assert "failed" in console.text(f"{row} .badge")
    console.screenshot("failed-documents")

    console.click(f"{row} button.reindex")
    assert console.wait_notice("Re-indexing").startswith("Re-indexing “locked.pdf”")
    # The pipeline ran again: the document failed anew, for the same reason.
    after = console.wait(
        lambda: (
            (d := _document(admin, kb["id"], pdf["id"]))["parse_status"] == "failed"
            and _moment(d["stage_started_at"]["failed"])
            > _moment(before["stage_started_at"]["failed"])
            and d
        ),
        "the re-run to end",
        timeout=60,
    )
    assert after["last_error"] == ENCRYPTED_REASON
    console.wait(lambda: console.attribute(row, "data-status") == "failed", "failed")
    assert console.text(f"{row} td.reason") == ENCRYPTED_REASON
    audit = _ok(admin.get("/api/v1/audit", params={"limit": 20}))["items"]
    assert any(
        e["method"] == "POST" and e["path"].endswith(f"/{pdf['id']}/reindex") and e["status"] == 202
        for e in audit
    ), audit
    console.screenshot("failed-after-re-index")


def test_the_playground_shows_a_bots_hits_with_citations_scores_rationale_and_timings(
    console: Browser, admin: httpx.Client, stack: RunningPipeline, library: Library
) -> None:
    query = "How long do refunds take?"
    console.open("/console/#/playground")
    console.find(f"#bot-select option[value='{library.bot['id']}']").click()
    assert library.kb["name"] in console.wait_text("#bot-about", "KBs:")
    console.fill("#query", query)
    console.click("#search")
    console.find("#hits .hit")

    contract = httpx.post(
        f"{stack.url}/api/v1/internal/knowledge/search",
        json={"bot_id": library.bot["id"], "session_id": "console-test", "query": query},
        headers={"X-Internal-Secret": stack.internal_secret},
    ).json()
    expected = [SearchHit.model_validate(hit) for hit in contract["hits"]]
    hits = console.finds("#hits .hit")
    assert len(hits) == len(expected) > 0
    for element, hit in zip(hits, expected, strict=True):
        assert element.find_element("css selector", ".citation").text == hit.cited_as
        score = element.find_element("css selector", ".score").text
        assert score.startswith("score ")
        assert float(score.removeprefix("score ")) == pytest.approx(hit.score, abs=5e-4)
        rationale = element.find_element("css selector", ".rationale").text
        assert rationale == hit.retrieval_rationale
        assert element.find_element("css selector", ".chunk-text").text == hit.chunk_text.strip()
    assert "Returns" in hits[0].text
    metrics = console.text("#metrics")
    for part in ("total ", " ms", "query embedding", "ranking", "fetch", "cached:", "hit"):
        assert part in metrics, metrics
    console.screenshot("playground-hits")

    # A threshold nothing passes: the strict bot's fallback message.
    console.fill("#threshold", "1")
    console.fill("#query", "zebra xylophone quantum")
    console.click("#search")
    fallback = console.wait_text("#fallback", "the bot would say")
    assert library.bot["knowledge"]["fallback_message"] in fallback
    assert console.finds("#hits .hit") == []

    # The API's refusal is shown: a bot deleted while the page was open.
    doomed = _ok(admin.post("/api/v1/bots", json={"name": unique("Doomed")}), 201)
    console.open("/console/#/kbs")
    console.open("/console/#/playground")
    console.find(f"#bot-select option[value='{doomed['id']}']").click()
    assert admin.delete(f"/api/v1/bots/{doomed['id']}").status_code == 204
    console.fill("#query", query)
    console.click("#search")
    notice = console.wait_notice("HTTP 404")
    assert notice == f"bot '{doomed['id']}' not found (HTTP 404)"
    console.screenshot("playground-refused")


def test_evaluation_results_show_every_configurations_scores_and_the_misses(
    console: Browser, admin: httpx.Client, library: Library
) -> None:
    kb_id = library.kb["id"]
    console.open(f"/console/#/kb/{kb_id}/evaluations")
    console.find("#eval-form")
    # A line that is not JSON is caught before anything is sent.
    console.fill("#eval-cases", '{"query": "refunds"')
    console.click("#eval-run")
    assert console.wait_notice("line 1").startswith("Cases, line 1: not JSON")
    # The API's own refusal (an empty `expected`) is shown with its message.
    console.fill("#eval-cases", json.dumps({"query": "refunds", "expected": []}))
    console.click("#eval-run")
    refusal = console.wait_notice("HTTP 422")
    assert "cases.0.expected" in refusal

    found = {"query": "How long do refunds take?", "expected": [library.documents["returns.md"]]}
    missed = {"query": "Which colour are the kayaks?", "expected": ["bright orange hulls"]}
    console.fill("#eval-cases", "\n".join(json.dumps(case) for case in (found, missed)))
    console.fill("#eval-k", "2")
    console.click("#eval-run")
    best = console.find("#best-config").text
    assert console.notice().startswith("Evaluation eval_")

    [run] = _ok(admin.get(f"/api/v1/knowledge-bases/{kb_id}/evaluations"))[:1]
    assert run["case_count"] == 2
    assert run["k"] == 2
    shown = console.find(f"#evaluation-{run['id']}")
    assert best == _label(run["best"])
    rows = shown.find_elements("css selector", "#scores tbody tr")
    assert [r.get_attribute("data-config") for r in rows] == [
        _label(t["config"]) for t in run["tried"]
    ]
    for row, tried in zip(rows, run["tried"], strict=True):
        cells = [float(c.text) for c in row.find_elements("css selector", "td")[1:]]
        scores = tried["scores"]
        figures = [scores[k] for k in ("recall_at_k", "recall_at_10", "mrr", "ndcg_at_10")]
        assert cells == pytest.approx(figures, abs=5e-4)
    [best_row] = shown.find_elements("css selector", "#scores tr.best")
    assert best_row.get_attribute("data-config") == best

    # Every mode's best configuration lists the case it missed, and what came instead.
    for mode, result in run["modes"].items():
        details = shown.find_element("css selector", f"details[data-mode='{mode}']")
        if not details.get_attribute("open"):
            details.find_element("css selector", "summary").click()
        misses = details.find_elements("css selector", "li.miss")
        assert [m.find_element("css selector", ".miss-query").text for m in misses] == [
            miss["query"] for miss in result["misses"]
        ]
        assert missed["query"] in [miss["query"] for miss in result["misses"]]
        for element, miss in zip(misses, result["misses"], strict=True):
            codes = element.find_elements("css selector", "code.missing")
            assert [c.text for c in codes] == miss["missing"]
            returned = element.find_elements("css selector", "ol.returned > li")
            assert len(returned) == len(miss["returned"])
    console.screenshot("evaluation-results")

    # The run is kept: it is listed, and shown again when the tab is opened anew.
    console.open(f"/console/#/kb/{kb_id}/documents")
    console.open(f"/console/#/kb/{kb_id}/evaluations")
    console.find(f"tr[data-evaluation-id='{run['id']}']")
    console.find(f"#evaluation-{run['id']}")


def test_an_evaluations_configuration_is_applied_to_a_bot_or_the_kb_from_the_console(
    console: Browser, admin: httpx.Client, library: Library
) -> None:
    kb_id = library.kb["id"]
    knowledge = {"enabled": True, "kb_ids": [kb_id], "score_threshold": 0.2}

    def bot(name: str, **body: Any) -> dict[str, Any]:
        created = _ok(admin.post("/api/v1/bots", json={"name": unique(name), **body}), 201)
        assert isinstance(created, dict)
        return created

    tuned = bot("Tuned", knowledge=knowledge)
    leaving = bot("Leaving", knowledge=knowledge)
    elsewhere = bot("Elsewhere")
    cases = [{"query": "How long do refunds take?", "expected": [library.documents["returns.md"]]}]
    evaluations = f"/api/v1/knowledge-bases/{kb_id}/evaluations"
    run = _ok(admin.post(evaluations, json={"cases": cases}, timeout=120), 201)
    labels = [_label(t["config"]) for t in run["tried"]]

    console.open(f"/console/#/kb/{kb_id}/evaluations")
    console.find(f"#evaluation-{run['id']} #apply-form")
    # One case cannot show the best to be a significant gain over what the KB's searches use:
    # the page says so and chooses the current configuration; the targets are the KB and the
    # bots with the KB attached.
    assert run["offered"] is False
    gain = console.text("#best-gain")
    assert gain.startswith(f"Against {_label(run['current'])}, what this knowledge base's")
    assert f"p = {run['gain']['p_value']:.3f}" in gain
    chosen = console.find("#apply-config option:checked").text
    assert chosen.startswith(_label(run["current"]) + " (nDCG@10")
    targets = [o.get_attribute("value") for o in console.finds("#apply-target option")]
    assert "kb" in targets
    assert {f"bot:{tuned['id']}", f"bot:{leaving['id']}"} <= set(targets)
    assert f"bot:{elsewhere['id']}" not in targets
    default = "the service's default (hybrid, convex per query)"
    assert console.text("#kb-default-retrieval") == default

    def apply(config: str, target: str) -> None:
        console.find(f"#apply-config option[value='{labels.index(config)}']").click()
        console.find(f"#apply-target option[value='{target}']").click()
        console.click("#apply-run")

    # A refusal is shown with the API's message: sparse for a bot, a bot that left the KB.
    apply("sparse", f"bot:{tuned['id']}")
    refusal = console.wait_notice("HTTP 422")
    assert refusal.startswith("config: bots do not search sparse")
    assert console.wait_text("#apply-result", "HTTP 422") == refusal
    _ok(admin.patch(f"/api/v1/bots/{leaving['id']}", json={"knowledge": {"kb_ids": []}}))
    apply("hybrid, RRF k=20", f"bot:{leaving['id']}")
    conflict = console.wait_notice("HTTP 409")
    assert f"does not have knowledge base '{kb_id}' attached" in conflict
    console.screenshot("evaluation-apply-refused")

    # To a bot: its knowledge settings change.
    apply("hybrid, RRF k=20", f"bot:{tuned['id']}")
    shown = console.wait_text("#apply-result", "Applied")
    assert shown == (
        f"Applied hybrid, RRF k=20 (nDCG@10 {_ndcg(run, 'hybrid, RRF k=20')}) to bot "
        f"{tuned['name']}: before hybrid, convex per query, now hybrid, RRF k=20."
    )
    assert console.notice() == shown
    stored = _ok(admin.get(f"/api/v1/bots/{tuned['id']}"))["knowledge"]
    assert (stored["retrieval_mode"], stored["fusion"], stored["rrf_k"]) == ("hybrid", "rrf", 20)

    # To the KB: its default for people's searches, shown at once.
    apply("dense", "kb")
    shown = console.wait_text("#apply-result", "to this knowledge base's default")
    assert shown == (
        f"Applied dense (nDCG@10 {_ndcg(run, 'dense')}) to this knowledge base's default: "
        "before the service's default, now dense."
    )
    assert console.text("#kb-default-retrieval") == "dense (applied from an evaluation)"
    stored = _ok(admin.get(f"/api/v1/knowledge-bases/{kb_id}"))["default_retrieval"]
    assert stored["retrieval_mode"] == "dense"
    console.screenshot("evaluation-applied")
    # Opened anew, the tab shows the KB's default as stored.
    console.open(f"/console/#/kb/{kb_id}/documents")
    console.open(f"/console/#/kb/{kb_id}/evaluations")
    console.wait_text("#kb-default-retrieval", "dense")


def _ndcg(run: dict[str, Any], label: str) -> str:
    scores = next(t["scores"] for t in run["tried"] if _label(t["config"]) == label)
    return f"{scores['ndcg_at_10']:.3f}"


def test_the_embedding_model_page_shows_the_generations_and_says_why_a_change_is_refused(
    console: Browser,
) -> None:
    console.click("a[data-nav='model']")
    row = console.find("#generations tr[data-generation='1']")
    assert "live" in row.text
    assert "hashed/384" in row.text
    # The live generation's own model: the API's refusal, in its words.
    console.find("#model-provider").send_keys("hashed")
    console.fill("#model-dimensions", "384")
    console.click("#model-start")
    assert "already has hashed/384" in console.wait_notice("already has")
    assert len(console.finds("#generations tbody tr")) == 1
    console.screenshot("embedding-model")


def test_log_out_forgets_the_token(console: Browser) -> None:
    console.click("#logout")
    console.find("#login-view")
    assert _stored_token(console) is None
    console.open("/console/#/kbs")
    console.find("#login-view")
    assert not console.find("#token").get_attribute("value")
    console.screenshot("logged-out")


def test_console_files_are_served_with_a_strict_security_policy(stack: RunningPipeline) -> None:
    with httpx.Client(base_url=stack.url) as http:
        redirect = http.get("/console")
        assert redirect.status_code == 308
        assert redirect.headers["location"] == "/console/"
        for path, media_type in (
            ("/console/", "text/html"),
            ("/console/js/app.js", "text/javascript"),
            ("/console/styles.css", "text/css"),
        ):
            response = http.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-type"].startswith(media_type)
            policy = response.headers["content-security-policy"]
            assert "script-src 'self'" in policy
            assert "default-src 'none'" in policy
            assert "frame-ancestors 'none'" in policy
            assert response.headers["x-content-type-options"] == "nosniff"
        for missing in ("/console/nope.js", "/console/..%2Froutes.py", "/console/routes.py"):
            response = http.get(missing)
            assert response.status_code == 404, missing
        # Nothing of the page holds a script or style inline, which the policy would refuse.
        page = http.get("/console/").text
        assert "<script>" not in page
        assert " style=" not in page
        assert "<style" not in page


def _view(browser: Browser) -> str | None:
    if browser.finds("#login-view:not([hidden])"):
        return "login"
    if browser.finds("#app-view:not([hidden])"):
        return "console"
    return None


def _log_in(browser: Browser, token: str) -> None:
    browser.fill("#token", token)
    browser.click("#login-button")
    browser.find("#app-view")
    browser.find("#kb-create-form")


def _stored_token(browser: Browser) -> str | None:
    token = browser.driver.execute_script("return sessionStorage.getItem('ragline.console.token')")
    assert token is None or isinstance(token, str)
    return token


def _page_errors(browser: Browser) -> list[str]:
    """The page's severe console messages, but the refusals the tests asked for (a browser
    logs every 4xx answer to a request as a failed load)."""
    return [
        message
        for message in browser.console_errors()
        if "Failed to load resource: the server responded with a status of 4" not in message
    ]


def _label(config: dict[str, Any]) -> str:
    if config["retrieval_mode"] != "hybrid" or not config.get("fusion"):
        return str(config["retrieval_mode"])
    if config["fusion"] == "rrf":
        return f"hybrid, RRF k={config['rrf_k']}"
    weight = config["dense_weight"]
    names = {"convex": "convex", "dbsf": "DBSF", "zscore": "z-score", "gated": "gated"}
    return f"hybrid, {names[config['fusion']]} {'per query' if weight is None else weight}"


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, (response.request.url, response.text)
    return response.json()


def _upload(admin: httpx.Client, kb_id: str, name: str, data: bytes) -> dict[str, Any]:
    document = _ok(
        admin.post(f"/api/v1/knowledge-bases/{kb_id}/documents", files={"file": (name, data)}),
        202,
    )
    assert isinstance(document, dict)
    return document


def _document(admin: httpx.Client, kb_id: str, document_id: str) -> dict[str, Any]:
    document = _ok(admin.get(f"/api/v1/knowledge-bases/{kb_id}/documents/{document_id}"))
    assert isinstance(document, dict)
    return document


def _documents(admin: httpx.Client, kb_id: str) -> list[dict[str, Any]]:
    return list(_ok(admin.get(f"/api/v1/knowledge-bases/{kb_id}/documents"))["items"])


def _wait_final(admin: httpx.Client, kb_id: str, document_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        document = _document(admin, kb_id, document_id)
        if document["parse_status"] in FINAL:
            return document
        assert time.monotonic() < deadline, document
        time.sleep(0.2)


def _moment(stamp: str) -> datetime:
    """A timestamp from the API as a time: the JSON leaves out a whole second's fraction,
    so two stamps within one second do not compare as strings."""
    return datetime.fromisoformat(stamp)
