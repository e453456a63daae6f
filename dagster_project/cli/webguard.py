"""The Dagster webserver behind a Host/Origin guard (issue 42): ``kernelhouse ui``'s server.

Why: the UI binds 127.0.0.1, but a page in the user's browser can still reach it through
DNS rebinding (a name of the attacker's that resolves to 127.0.0.1) and drive GraphQL
mutations (launch runs, wipe assets). The browser sends the attacker's name as ``Host``
and its page as ``Origin``; Dagster's webserver checks neither and has no option to, so
this module serves Dagster's own app (``dagster_webserver``'s CLI, unchanged) wrapped in
:class:`HostOriginGuard`: a request (HTTP or WebSocket) whose ``Host`` is not
``127.0.0.1``/``localhost``/``[::1]`` (with the served port), or whose ``Origin``, when
sent, is not one of those, is refused with 403 (a WebSocket is closed, code 1008).

Run as ``python -m dagster_project.cli.webguard <dagster-webserver options>``.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(port: int) -> frozenset[str]:
    """``Host`` values a local browser sends for this server (with and without the port)."""
    return frozenset({*LOCAL_NAMES, *(f"{name}:{port}" for name in LOCAL_NAMES)})


class HostOriginGuard:
    """ASGI middleware: pass a request only when its Host (and Origin, if any) is local."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self.app = app
        self.hosts = allowed_hosts(port)
        self.origins = frozenset(f"{scheme}://{h}" for h in self.hosts for scheme in ("http",))

    def allows(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """True when ``Host`` is local and ``Origin`` is absent or local."""
        got = {k.lower(): v.decode("latin-1").strip().lower() for k, v in headers}
        origin = got.get(b"origin")
        return got.get(b"host", "") in self.hosts and (origin is None or origin in self.origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.allows(scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = b"kernelhouse ui: refused a request for a foreign Host or Origin\n"
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain"),
                    (b"content-length", b"%d" % len(body)),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _port(argv: list[str]) -> int:
    for flag in ("-p", "--port"):
        if flag in argv:
            return int(argv[argv.index(flag) + 1])
    return 3000


def main(argv: list[str] | None = None) -> None:
    """Dagster's webserver CLI with its app wrapped in :class:`HostOriginGuard`."""
    import dagster_webserver.cli as web

    args = list(sys.argv[1:] if argv is None else argv)
    port = _port(args)
    make_app = web.create_app_from_workspace_process_context

    def guarded(*a: Any, **kw: Any) -> Any:
        return HostOriginGuard(make_app(*a, **kw), port)

    web.create_app_from_workspace_process_context = guarded
    web.cli.main(args=args, prog_name="dagster-webserver")


if __name__ == "__main__":
    main()
