"""How Ragline's clients of google-genai send: through httpx2, always, with one try each.

google-genai sends its async requests through aiohttp whenever aiohttp is importable (another
package may bring it), and through httpx2 otherwise; Ragline's providers translate httpx2's
errors into typed ones, so the transport is pinned to httpx2's instead of depending on what else
is installed."""

from __future__ import annotations

import httpx2
from google.genai import types as genai_types


def genai_http_options(base_url: str | None, timeout_s: float) -> genai_types.HttpOptions:
    """Options of a google-genai client: its address, a time limit per request, one try (the
    callers decide what a failure means), and httpx2 as the async transport."""
    return genai_types.HttpOptions(
        base_url=base_url,
        timeout=int(timeout_s * 1000),
        retry_options=genai_types.HttpRetryOptions(attempts=1),
        async_client_args={"transport": httpx2.AsyncHTTPTransport()},
    )
