"""MkDocs hook: the Limits and quotas page, from the code that enforces them.

`<!-- generated: limits -->` becomes two tables: the limits a deployment sets (settings, with
their variables, defaults and descriptions, from the settings model as the Configuration page
reads it) and the limits fixed by the API's request schemas (each field's bound, read from the
OpenAPI schema the API serves). A limit named here that the code no longer has fails the build.
"""

from __future__ import annotations

from typing import Any

try:
    from docs.hooks.openapi_page import served_schema
    from docs.hooks.settings_page import groups
except ModuleNotFoundError:  # MkDocs loads a hook from its file, with docs/hooks on sys.path
    from openapi_page import served_schema  # type: ignore[import-not-found,no-redef]
    from settings_page import groups  # type: ignore[import-not-found,no-redef]

MARKER = "<!-- generated: limits -->"

# The settings that bound what a caller may send or how fast, by their dotted path.
SETTINGS = (
    "limits.uploads_per_minute",
    "limits.searches_per_second",
    "api.max_body_mb",
    "ingest.max_upload_mb",
    "api.request_timeout_s",
    "api.bulk_request_timeout_s",
)
# The request fields whose bounds are the API's own: (schema, field, what it bounds).
FIELDS = (
    ("KnowledgeSearchRequest", "query", "a search's question"),
    ("KnowledgeSearchRequest", "top_k", "passages of a person's search"),
    ("BotSearchOptions", "top_k", "passages of a bot's search"),
    ("KnowledgeSearchRequest", "kb_ids", "knowledge bases one search names"),
    ("KnowledgeSearchRequest", "max_context_tokens", "a search's context budget"),
    ("BatchIn", "records", "records of one batch"),
    ("SyncIn", "records", "records of one full sync"),
    ("KnowledgeBaseCreate", "name", "a knowledge base's name"),
    ("KnowledgeBaseCreate", "code", "a knowledge base's code"),
    ("EvaluationRequest", "cases", "cases of one evaluation"),
    ("CrawlJobCreate", "urls", "start addresses of one crawl"),
    ("CrawlJobCreate", "max_pages", "pages of one crawl"),
    ("CrawlJobCreate", "max_depth", "link depth of one crawl"),
)
BOUNDS = (
    ("maxLength", "characters"),
    ("maxItems", "items"),
    ("maximum", ""),
)


def setting_rows() -> list[str]:
    """The deployment's limits: variable, default and description of each."""
    found = {".".join(setting.path): setting for group in groups() for setting in group.settings}
    rows = ["| limit | variable | default | what it bounds |", "|---|---|---|---|"]
    for path in SETTINGS:
        setting = found[path]  # a KeyError here: the setting is gone, the page must change
        description = setting.description.replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{path}` | `{setting.env}` | {setting.default} | {description} |")
    return rows


def field_bound(schema: dict[str, Any], name: str, field: str) -> str:
    """A request field's bound as the served schema states it (`2000 characters`)."""
    properties = schema["components"]["schemas"][name]["properties"]
    declared = properties[field]  # a KeyError here: the field is gone, the page must change
    for branch in (declared, *declared.get("anyOf", ())):
        for key, unit in BOUNDS:
            if key in branch:
                value = branch[key]
                number = int(value) if float(value).is_integer() else value
                return f"{number:,} {unit}".strip()
    raise ValueError(f"{name}.{field} has no bound in the schema")


def field_rows(schema: dict[str, Any]) -> list[str]:
    """The API's own limits: field, what it bounds, and the bound."""
    rows = ["| field | what it bounds | at most |", "|---|---|---|"]
    for name, field, what in FIELDS:
        rows.append(f"| `{name}.{field}` | {what} | {field_bound(schema, name, field)} |")
    return rows


def render() -> str:
    """Both tables, each under a heading."""
    return "\n".join(
        [
            "## Set by the deployment",
            "",
            *setting_rows(),
            "",
            "## Fixed by the API",
            "",
            *field_rows(served_schema()),
        ]
    )


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replaces the marker with the tables."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())
