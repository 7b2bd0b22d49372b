"""HTTP API settings and its request limits."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ApiSettings(BaseModel):
    """The HTTP server."""

    host: str = Field(default="127.0.0.1", description="Address the HTTP server listens on.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port the HTTP server listens on.")
    mcp_allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:*", "localhost:*", "[::1]:*"],
        description=(
            "Host headers the MCP endpoint answers (its DNS-rebinding protection); `*` turns "
            "the check off, behind a proxy that checks them."
        ),
    )
    max_body_mb: int = Field(
        default=50,
        ge=1,
        description=(
            "Largest request body that is not a file upload (MB); above it the request is "
            "refused (413). Uploads have ingest.max_upload_mb."
        ),
    )
    request_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description=(
            "Longest a request may take (s): its MongoDB operations are bounded by what is "
            "left of it, and past it the request is answered 503 with `Retry-After` (a "
            "dependency that hangs gives a fast refusal, not a request that waits)."
        ),
    )
    keep_alive_s: int = Field(
        default=75,
        ge=1,
        description=(
            "How long an idle client connection is kept open (s). Longer than the idle "
            "timeout of the clients and proxies in front (60 s on common load balancers, 5 s "
            "in common HTTP clients), so that the server never closes a connection at the "
            "moment a client sends a request on it."
        ),
    )
    learn_callers: int = Field(
        default=1000,
        ge=0,
        le=100_000,
        description=(
            "Tokens and bots, the most recent first, whose callers a starting API process "
            "reads into memory before their first request (who each token stands for, a "
            "bot's access, a user's audiences, the tenant's KBs), so that a MongoDB outage "
            "just after a restart refuses none of them; 0: none (count of each)."
        ),
    )
    bulk_request_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description=(
            "The same bound for requests whose work grows with their input (s): uploads, "
            "record batches and syncs, knowledge bases with their sources, crawl jobs, "
            "evaluations, re-driving every dead letter, starting a change of embedding model "
            "(which loads the model)."
        ),
    )


class LimitsSettings(BaseModel):
    """Request limits. Rates are counted in Redis per window, across API processes."""

    uploads_per_minute: int = Field(
        default=600,
        ge=1,
        description="Documents a tenant may add per minute: uploads, texts, batch records (count).",
    )
    searches_per_second: int = Field(
        default=200,
        ge=1,
        description=(
            "Searches per second of one bot, one person, or one tenant's internal form (count); "
            "over it a search is answered from the cache if it can be, else refused (429)."
        ),
    )
