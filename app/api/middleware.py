"""The ASGI middleware around every request: a gate before parsing (a body's size, and its
coding), and a last resort that answers what no exception handler took without dropping the
connection."""

from __future__ import annotations

import re

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response, unexpected_error
from app.core.errors import HeraldError, PayloadTooLarge, UnsupportedMediaType

# Room for the JSON envelope around the payload and for a client's pretty-printing; the payload
# itself is measured exactly once it is encoded (docs/decisions.md, "Payload bytes").
BODY_SLACK_BYTES = 64 * 1024

_CODING = re.compile(r"^[a-z0-9!#$%&'*+.^_`|~-]{1,32}$")  # a token: echoed back only if one


def _compressed(coding: bytes) -> str | None:
    """Why a body with this Content-Encoding is refused; None for an uncompressed one."""
    shown = coding.strip().lower().decode("latin-1")
    if shown in ("", "identity"):
        return None
    named = f"Content-Encoding: {shown}" if _CODING.fullmatch(shown) else "a Content-Encoding"
    return f"the request body is sent with {named}; send it uncompressed"


class _ClientGone(Exception):
    """The client left before its body ended."""


async def _read_within(receive: Receive, limit: int) -> bytes | None:
    """A chunked body, whole, if it fits in ``limit`` bytes; None past it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class BodyLimit:
    """Refuse oversized request bodies with 413, and compressed ones with 415, before they are
    parsed (a compressed body is read as JSON and fails as "not valid UTF-8"; decompressing it
    would be a cost the sender sets: docs/decisions.md, "Request bodies are not compressed").

    A declared Content-Length is checked up front (the server enforces it). A chunked body has
    no length, so it is read here, counting, and handed on only if it fits: the app would
    buffer it whole anyway, and this way an oversized one is answered 413 rather than
    surfacing as a body-parsing error.
    """

    def __init__(self, app: ASGIApp, max_payload_bytes: int, max_batch_bytes: int) -> None:
        self.app = app
        self.max_bytes = 2 * max_payload_bytes + BODY_SLACK_BYTES
        self.batch_max_bytes = max_batch_bytes
        # The limit is derived, not set: name what the operator did set, and why the rest.
        self.reason = (
            f"twice HERALD_MAX_PAYLOAD_BYTES ({max_payload_bytes}) plus 64 KiB, room for the "
            "JSON around the payload and for pretty-printing (the payload itself may be up to "
            f"{max_payload_bytes} bytes as compact JSON)"
        )
        self.batch_reason = f"HERALD_MAX_BATCH_BYTES ({max_batch_bytes})"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        batch = scope["path"].endswith("/batch")
        limit = self.batch_max_bytes if batch else self.max_bytes
        reason = self.batch_reason if batch else self.reason
        headers = dict(scope["headers"])
        compressed = _compressed(headers.get(b"content-encoding", b""))
        if compressed is not None:
            await self._refuse(scope, receive, send, compressed, UnsupportedMediaType)
            return
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            detail = f"the request body is {int(length)} bytes; the limit here is {limit}: {reason}"
            await self._refuse(scope, receive, send, detail)
            return
        if b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
            await self.app(scope, receive, send)
            return
        try:
            body = await _read_within(receive, limit)
        except _ClientGone:
            return
        if body is None:
            detail = f"the request body exceeds the limit here, {limit} bytes: {reason}"
            await self._refuse(scope, receive, send, detail)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        detail: str,
        error: type[HeraldError] = PayloadTooLarge,
    ) -> None:
        response = problem_response(
            Request(scope), status=error.status, title=error.title, slug=error.slug, detail=detail
        )
        if error is UnsupportedMediaType:
            response.headers["Accept-Encoding"] = "identity"  # RFC 7694: what would be read
        await response(scope, receive, send)


class AnswerUnexpected:
    """Answer an exception no handler took with the 500 problem, here.

    Starlette's own last resort (ServerErrorMiddleware, which the ``Exception`` handler
    becomes) sends the 500 and then re-raises; uvicorn, seeing an exception after a response,
    drops the keep-alive connection without a ``Connection: close``, and the client's next
    request on it is reset. This re-raises only when a response had already begun: then
    closing the connection is the only way to end it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracked)
        except Exception as exc:
            if started:
                raise
            response = await unexpected_error(Request(scope), exc)
            await response(scope, receive, send)
