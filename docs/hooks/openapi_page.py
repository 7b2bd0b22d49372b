"""MkDocs hook: the API reference, rendered from the OpenAPI schema the service serves.

The app is built as the API process builds it (`ragline.api.build_app` over default settings):
building it opens nothing (no database, broker or model; those are opened by its lifespan,
which only a server runs), so `app.openapi()` is the very schema `GET /openapi.json` answers.
`<!-- generated: openapi -->` on a page becomes every operation, grouped by tag (method and
path, summary, description, authentication, parameters, request body, responses), then every
schema with its fields; the schema itself is written into the site as `api/openapi.json`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

try:
    from docs.hooks.markdown_tables import table_rows
except ModuleNotFoundError:  # MkDocs loads a hook from its file, with docs/hooks on sys.path
    from markdown_tables import table_rows  # type: ignore[import-not-found,no-redef]

MARKER = "<!-- generated: openapi -->"
SCHEMA_FILE = "api/openapi.json"
METHODS = ("get", "put", "post", "patch", "delete", "head", "options")
log = logging.getLogger("mkdocs.hooks.openapi_page")

SECURITY = {"HTTPBearer": "bearer token", "APIKeyHeader": "`X-Internal-Secret` header"}

_schema: dict[str, Any] | None = None


@contextmanager
def _logging_kept() -> Iterator[None]:
    """The API process configures logging as it builds its app; the docs build keeps its own."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in logging.root.manager.loggerDict}
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, saved in levels.items():
            logging.getLogger(name).setLevel(saved)


def served_schema() -> dict[str, Any]:
    """The OpenAPI schema of the API app, built as `python -m ragline.api` builds it."""
    from infra.settings import Settings
    from ragline.api import build_app

    with _logging_kept():
        app = build_app(Settings.model_construct())
    return app.openapi()


# -- rendering ------------------------------------------------------------------------------------


def operations(schema: Mapping[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Every (method, path, operation) of the schema, in its order."""
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield method, path, item[method]


def anchor(method: str, path: str) -> str:
    """An operation's heading id: `post-api-v1-knowledge-bases-kb_id-documents`."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9_]+", "-", f"{method} {path}".lower())).strip("-")


def schema_anchor(name: str) -> str:
    """A schema's heading id: `schema-knowledgebasecreate`."""
    return f"schema-{name.lower()}"


def render(schema: Mapping[str, Any]) -> str:
    """The reference page's generated part."""
    tags: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for method, path, operation in operations(schema):
        tag = (operation.get("tags") or ["other"])[0]
        tags.setdefault(tag, []).append((method, path, operation))
    info = schema.get("info", {})
    parts = [
        f"{info.get('title', 'The API')} {info.get('version', '')}, OpenAPI {schema['openapi']}."
    ]
    rows = ["| method | path | summary |", "|---|---|---|"]
    for method, path, op in operations(schema):
        link = f"[`{path}`](#{anchor(method, path)})"
        rows.append(f"| {method.upper()} | {link} | {_cell(op.get('summary', ''))} |")
    parts.append("\n".join(rows))
    for tag, ops in tags.items():
        parts.append(f"## {tag[:1].upper()}{tag[1:]}")
        parts.extend(_operation(method, path, op) for method, path, op in ops)
    components = schema.get("components", {}).get("schemas", {})
    if components:
        parts.append("## Schemas")
        parts.extend(_schema_section(name, body) for name, body in components.items())
    return "\n\n".join(parts) + "\n"


def _operation(method: str, path: str, operation: Mapping[str, Any]) -> str:
    lines = [f"### {method.upper()} `{path}` {{#{anchor(method, path)}}}"]
    summary = operation.get("summary")
    security = [
        SECURITY.get(name, f"`{name}`") for s in operation.get("security", []) for name in s
    ]
    head = f"**{summary}**" if summary else ""
    head += f" · authentication: {', '.join(security) if security else 'none'}"
    if operation.get("deprecated"):
        head += " · **deprecated**"
    lines.append(head.strip(" ·"))
    if operation.get("description"):
        lines.append(operation["description"].strip())
    parameters = operation.get("parameters", [])
    if parameters:
        rows = [
            "| name | in | type | required | default | description |",
            "|---|---|---|---|---|---|",
        ]
        for parameter in parameters:
            body = parameter.get("schema", {})
            cells = (
                f"`{parameter['name']}`",
                parameter.get("in", ""),
                _type(body),
                "yes" if parameter.get("required") else "no",
                _json(body["default"]) if "default" in body else "",
                _cell(parameter.get("description") or body.get("description") or _limits(body)),
            )
            rows.append("| " + " | ".join(cells) + " |")
        lines.append("**Parameters**\n\n" + "\n".join(rows))
    request = operation.get("requestBody")
    if request:
        required = "required" if request.get("required") else "optional"
        for kind, media in request.get("content", {}).items():
            body = media.get("schema", {})
            if "properties" in body and "$ref" not in body:
                text = f"**Request body** ({required}), `{kind}`:"
                if body.get("description"):
                    text += " " + " ".join(body["description"].split())
                lines.append(text + "\n\n" + _properties(body))
            else:
                lines.append(f"**Request body** ({required}), `{kind}`: {_type(body)}")
    responses = operation.get("responses", {})
    if responses:
        rows = ["| status | description | body |", "|---|---|---|"]
        for status in sorted(responses):
            response = responses[status]
            content = response.get("content", {})
            body = "; ".join(
                _type(media.get("schema", {})) if media.get("schema") else f"`{kind}`"
                for kind, media in content.items()
            )
            headers = ", ".join(f"`{h}`" for h in response.get("headers", {}))
            description = _cell(response.get("description", ""))
            if headers:
                description += f" (headers: {headers})"
            rows.append(f"| {status} | {description} | {body} |")
        lines.append("**Responses**\n\n" + "\n".join(rows))
    return "\n\n".join(lines)


def _schema_section(name: str, body: Mapping[str, Any]) -> str:
    lines = [f"### {name} {{#{schema_anchor(name)}}}"]
    if body.get("description"):
        lines.append(" ".join(body["description"].split()))
    if body.get("properties"):
        lines.append(_properties(body))
    elif "enum" in body:
        lines.append("One of " + ", ".join(f"`{value}`" for value in body["enum"]) + ".")
    else:
        lines.append(f"Type: {_type(body)}.")
    return "\n\n".join(lines)


def _properties(body: Mapping[str, Any]) -> str:
    """An object schema's fields as a table."""
    required = set(body.get("required", []))
    rows = [
        "| field | type | required | default | constraints | description |",
        "|---|---|---|---|---|---|",
    ]
    for field, spec in body.get("properties", {}).items():
        cells = (
            f"`{field}`",
            _type(spec),
            "yes" if field in required else "no",
            _json(spec["default"]) if "default" in spec else "",
            _cell(_limits(spec)),
            _cell(spec.get("description", "")),
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _type(spec: Mapping[str, Any]) -> str:
    """A schema's type in a few words, with links to the named schemas."""
    if "$ref" in spec:
        name = str(spec["$ref"]).rsplit("/", 1)[-1]
        return f"[`{name}`](#{schema_anchor(name)})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in spec:
            return " or ".join(_type(part) for part in spec[key])
    if "enum" in spec:
        return " or ".join(f"`{value}`" for value in spec["enum"])
    if "const" in spec:
        return f"`{spec['const']}`"
    kind = spec.get("type")
    if kind == "array":
        return f"array of {_type(spec.get('items', {}))}"
    if kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        return f"object of {_type(spec['additionalProperties'])}"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    shown = str(kind or "any")
    if spec.get("format"):
        shown += f" ({spec['format']})"
    return shown


_LIMITS = (
    ("minimum", "≥"),
    ("exclusiveMinimum", ">"),
    ("maximum", "≤"),
    ("exclusiveMaximum", "<"),
    ("minLength", "length ≥"),
    ("maxLength", "length ≤"),
    ("minItems", "items ≥"),
    ("maxItems", "items ≤"),
)


def _limits(spec: Mapping[str, Any]) -> str:
    """A schema's bounds and pattern (those of its alternatives too)."""
    shown = [f"{sign} {_number(spec[key])}" for key, sign in _LIMITS if key in spec]
    if "pattern" in spec:
        shown.append(f"pattern `{spec['pattern']}`")
    for key in ("anyOf", "oneOf"):
        shown.extend(limit for part in spec.get(key, []) if (limit := _limits(part)))
    return ", ".join(shown)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _json(value: Any) -> str:
    return f"`{_cell(json.dumps(value, ensure_ascii=False))}`"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


# -- the overview's hand-written table ------------------------------------------------------------

# Served by the API process beside the schema's operations: the MCP server and the console.
NOT_IN_SCHEMA = frozenset({("POST", "/mcp"), ("GET", "/console/")})
# `.../{kb_id}/documents` in the table is a path under the knowledge bases.
ELIDED = "/api/v1/knowledge-bases"


def table_operations(markdown: str) -> set[tuple[str, str]]:
    """The (method, path) pairs a hand-written `| method | path | |` table names: each method
    with each path of its row, or the methods and paths pairwise where a row names as many
    of each (`GET / PUT` of `/api/v1/users`, `/api/v1/users/{user_id}`)."""
    found: set[tuple[str, str]] = set()
    for cells in table_rows(markdown, "| method | path |"):
        methods = [m.strip() for m in cells[0].split("/")]
        paths = [
            ELIDED + path[3:] if path.startswith("...") else path
            for path in re.findall(r"`([^`]+)`", cells[1])
        ]
        if len(methods) == len(paths) > 1:
            found.update(zip(methods, paths, strict=True))
        else:
            found.update((method, path) for method in methods for path in paths)
    return found


def table_problems(markdown: str, schema: Mapping[str, Any]) -> list[str]:
    """The operations a hand-written table names that the schema does not hold, and those it
    leaves out (none when the page has no such table)."""
    named = table_operations(markdown)
    if not named:
        return []
    served = {(method.upper(), path) for method, path, _ in operations(schema)}
    problems = [
        f"{m} {p} is not in the OpenAPI schema" for m, p in sorted(named - served - NOT_IN_SCHEMA)
    ]
    problems += [f"{m} {p} is missing from the table" for m, p in sorted(served - named)]
    return problems


# -- MkDocs events --------------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    """Builds the schema once per build and puts it into the site as `api/openapi.json`."""
    from mkdocs.structure.files import File

    global _schema
    _schema = served_schema()
    files.append(File.generated(config, SCHEMA_FILE, content=json.dumps(_schema, indent=1) + "\n"))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fills the marker with the reference, and checks a hand-written table of endpoints."""
    if _schema is None:
        raise RuntimeError("the OpenAPI schema was not built (on_files did not run)")
    for problem in table_problems(markdown, _schema):
        log.warning("%s: %s", page.file.src_uri, problem)
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(_schema))
