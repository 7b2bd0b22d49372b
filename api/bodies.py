"""Request bodies the routes read themselves (an upload streamed as it arrives, a text as JSON
or as a form), declared in the OpenAPI schema by hand, from the same models where there are
models."""

from __future__ import annotations

from typing import Any

from core.governance import Visibility
from schemas.api import TextDocumentIn

# Governance as form fields: lists are comma-separated.
GOVERNANCE_FORM: dict[str, Any] = {
    "visibility_mode": {"type": "string", "enum": [v.value for v in Visibility]},
    "owner_user_id": {"type": "string"},
    "audience_tags": {"type": "string", "description": "comma-separated"},
    "user_grants": {"type": "string", "description": "comma-separated"},
    "tags": {"type": "string", "description": "comma-separated"},
}


def inline_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON schema with its `$defs` written in place, so that it refers to nothing
    the OpenAPI document may not hold."""
    defs = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {key: resolve(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def _body(content: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": content}}


UPLOAD_BODY = _body(
    {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "title": {"type": "string"},
                    **GOVERNANCE_FORM,
                },
            }
        }
    }
)

_TEXT_FORM = {
    "type": "object",
    "required": ["content"],
    "properties": {
        "title": {"type": "string", "maxLength": 500},
        "content": {"type": "string", "minLength": 1},
        "external_id": {"type": "string", "minLength": 1, "maxLength": 512},
        "url": {"type": "string", "maxLength": 2048},
        **GOVERNANCE_FORM,
    },
}
TEXT_BODY = _body(
    {
        "application/json": {"schema": inline_schema(TextDocumentIn.model_json_schema())},
        "application/x-www-form-urlencoded": {"schema": _TEXT_FORM},
        "multipart/form-data": {"schema": _TEXT_FORM},
    }
)
