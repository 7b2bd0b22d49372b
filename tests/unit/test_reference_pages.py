"""The reference pages generated from the code: Limits and quotas (settings and the served
schema's bounds) and the Changelog (the repository's CHANGELOG.md). No server; about 2 s."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from docs.hooks import changelog_page, limits_page
from docs.hooks.openapi_page import served_schema
from infra.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    """The OpenAPI schema the API serves."""
    return served_schema()


def test_the_limits_page_shows_each_settings_default_and_variable() -> None:
    rows = "\n".join(limits_page.setting_rows())
    defaults = Settings.model_construct()
    assert "| `limits.uploads_per_minute` | `RAGLINE_LIMITS__UPLOADS_PER_MINUTE` |" in rows
    assert f"`{defaults.limits.uploads_per_minute}`" in rows
    assert f"`{defaults.ingest.max_upload_mb}`" in rows


def test_the_limits_page_shows_the_schemas_bounds(schema: dict[str, Any]) -> None:
    rows = "\n".join(limits_page.field_rows(schema))
    query = schema["components"]["schemas"]["KnowledgeSearchRequest"]["properties"]["query"]
    assert (
        f"| `KnowledgeSearchRequest.query` | a search's question | {query['maxLength']:,} " in rows
    )
    assert "| `BotSearchOptions.top_k` | passages of a bot's search | 10 |" in rows


def test_a_limit_the_api_no_longer_has_fails_the_build(schema: dict[str, Any]) -> None:
    with pytest.raises(KeyError):
        limits_page.field_bound(schema, "KnowledgeSearchRequest", "no_such_field")


def test_the_changelog_page_is_the_changelog_with_site_links() -> None:
    page = changelog_page.on_page_markdown(changelog_page.MARKER)
    assert page.startswith("# Changelog")
    assert "](api/versioning.md)" in page
    assert "](docs/" not in page


def test_the_changelog_has_the_current_version_and_what_is_unreleased() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    headings = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings[:2] == ["Unreleased", version]
