"""Serves the console's static files under /console, each with a strict Content-Security-Policy:
the page runs only its own scripts and styles and talks only to this origin."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

from core.errors import NotFound

STATIC = Path(__file__).parent / "static"
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# Every file the console serves, by its path under /console/: nothing else is reachable.
FILES: dict[str, Path] = {
    path.relative_to(STATIC).as_posix(): path
    for path in sorted(STATIC.rglob("*"))
    if path.is_file() and path.suffix in MEDIA_TYPES
}
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # A new release's files are fetched again instead of mixing with cached ones.
    "Cache-Control": "no-cache",
}

router = APIRouter(prefix="/console", tags=["console"], include_in_schema=False)


@router.api_route("", methods=["GET", "HEAD"])
async def console_root() -> RedirectResponse:
    """The console lives under `/console/`, so that its modules resolve relative to it."""
    return RedirectResponse("/console/", status_code=308, headers=HEADERS)


@router.api_route("/{path:path}", methods=["GET", "HEAD"])
async def console_file(path: str) -> FileResponse:
    """One of the console's files (`index.html` for the folder itself)."""
    name = path or "index.html"
    file = FILES.get(name)
    if file is None:
        raise NotFound("console file", name)
    return FileResponse(file, media_type=MEDIA_TYPES[file.suffix], headers=HEADERS)
