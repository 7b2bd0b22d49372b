"""The request-size limit: a body that is not a file upload and says it is larger than
`api.max_body_mb` is refused (413) before it is read."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send


class BodyLimit:
    """ASGI middleware refusing oversized non-upload bodies by their Content-Length."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self._max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._too_large(scope):
            body = json.dumps(
                {"detail": f"request body larger than {self._max_bytes // (1024 * 1024)} MB"}
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 413,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def _too_large(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        if headers.get(b"content-type", b"").startswith(b"multipart/form-data"):
            return False  # uploads stream with their own limit
        try:
            length = int(headers.get(b"content-length", b"0"))
        except ValueError:
            return False
        return length > self._max_bytes
