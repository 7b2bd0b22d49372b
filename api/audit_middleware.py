"""Records every change asked of the API in the audit log: who (the token, its user and
role), what (method and path), when, and how it ended (its status). Reads and searches are
not changes and are not recorded; a failure to record is logged, never the request's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from infra.mongo.audit_repository import AuditRepository, new_audit_id
from infra.process.metrics import TENANT_REQUESTS
from schemas.domain import AuditEntry, Principal, utcnow

log = logging.getLogger(__name__)

READS = frozenset({"GET", "HEAD", "OPTIONS"})
# Searches are POSTs that change nothing.
NOT_CHANGES = ("/search", "/mcp")


def remember_principal(scope: Scope, principal: Principal) -> None:
    """Notes who is calling, for the audit entry written when the request ends."""
    scope.setdefault("state", {})["principal"] = principal


def remember_details(scope: Scope, details: dict[str, Any]) -> None:
    """Notes what a change was, beyond its method and path, for its audit entry (the last
    noted wins: what was asked, then what was done)."""
    scope.setdefault("state", {})["audit_details"] = details


def _count(scope: Scope) -> None:
    """Counts a request of a known caller in its tenant's request rate."""
    principal = scope.get("state", {}).get("principal")
    if isinstance(principal, Principal):
        TENANT_REQUESTS.labels(principal.tenant_id, "api").inc()


class AuditMiddleware:
    """ASGI middleware writing one audit entry per change request of a known caller."""

    def __init__(self, app: ASGIApp, audit: Callable[[], AuditRepository | None]) -> None:
        self.app = app
        self._audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] in READS or scope["path"].endswith(NOT_CHANGES):
            try:
                await self.app(scope, receive, send)
            finally:
                _count(scope)
            return
        status = 500

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            await self._record(scope, status)

    async def _record(self, scope: Scope, status: int) -> None:
        _count(scope)
        state = scope.get("state", {})
        principal = state.get("principal")
        audit = self._audit()
        if not isinstance(principal, Principal) or audit is None:
            return
        entry = AuditEntry(
            id=new_audit_id(),
            tenant_id=principal.tenant_id,
            at=utcnow(),
            token_id=principal.token_id,
            user_id=principal.user_id,
            role=principal.role,
            method=scope["method"],
            path=scope["path"],
            status=status,
            outcome="ok" if status < 400 else "refused" if status < 500 else "failed",
            details=state.get("audit_details"),
        )
        try:
            await audit.record(entry)
        except Exception as exc:
            log.warning("audit entry for %s %s not written: %s", entry.method, entry.path, exc)
