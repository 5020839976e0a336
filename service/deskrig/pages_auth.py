"""Signing a browser in to deskrig's pages (a rig's ``/live`` and ``/view``, the orchestrator's
``/dashboard``) without the token ever reaching a URL, a log or a Referer header.

A browser cannot send ``Authorization: Bearer``, and a token in a query string lands in access
logs, browser history and Referer headers. So a page is opened as ``/live#token=SECRET``: the
fragment never leaves the browser. A page requested without credentials answers a small sign-in
page (401) whose script takes the token from the fragment, erases it from the address bar and
POSTs it in a form body to :data:`EXCHANGE_PATH`; without a fragment it shows a password form that
posts the same way. The exchange checks the token through the same :class:`TokenTable` as bearer
auth and sets a cookie holding a random page-session id (never the token): ``HttpOnly`` (no script
reads it), ``SameSite=Strict`` (no other site's request carries it) and ``Path``-scoped to each
page's prefix. The cookie authenticates only ``GET``/``HEAD`` under those prefixes: it can watch,
never drive (``/mcp`` still needs the bearer token). Every page response says
``Referrer-Policy: no-referrer``.

The decision stays in one place, :class:`deskrig.guard.GuardMiddleware`, which asks
:meth:`PageSessions.identify` only when a request has no bearer token.
"""

from __future__ import annotations

import html
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import Message, Receive, Scope, Send

from deskrig.identity import TokenTable

#: A rig's pages: the live screen and the trajectory viewer (the feed and files the viewer's page
#: reads are under /view too).
RIG_PAGES = ("/live", "/view")
#: The orchestrator's page.
ORCHESTRATOR_PAGES = ("/dashboard",)
#: Where the sign-in page posts the token (form field ``token``; ``next``: the page to return to).
EXCHANGE_PATH = "/auth/page"
COOKIE_NAME = "deskrig_page"
#: How long a page session lasts (a working day); the browser forgets it sooner if closed.
SESSION_SECONDS = 12 * 3600
#: Page sessions kept at once; the oldest is forgotten first.
MAX_SESSIONS = 1024
#: A sign-in form body larger than this is refused (a token is a few dozen bytes).
MAX_FORM_BYTES = 8192
#: Headers every page response carries.
PAGE_HEADERS = {"referrer-policy": "no-referrer", "cache-control": "no-store"}


@dataclass(frozen=True)
class _Session:
    identity: str
    expires: float


class PageSessions:
    """The page sessions of one server, and the pages (path prefixes) their cookie opens."""

    def __init__(self, prefixes: Iterable[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.prefixes = tuple(prefixes)
        self._clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()

    def is_page(self, path: str) -> bool:
        return any(path == prefix or path.startswith(prefix + "/") for prefix in self.prefixes)

    def issue(self, identity: str) -> str:
        """A new page-session id for ``identity``."""
        session_id = secrets.token_urlsafe(32)
        self._sessions[session_id] = _Session(identity, self._clock() + SESSION_SECONDS)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return session_id

    def identify(self, scope: Scope, headers: dict[str, str]) -> str | None:
        """The identity of a page request's cookie: only for GET/HEAD under a page prefix."""
        if scope.get("method") not in ("GET", "HEAD") or not self.is_page(scope["path"]):
            return None
        morsel = SimpleCookie(headers.get("cookie", "")).get(COOKIE_NAME)
        session = self._sessions.get(morsel.value) if morsel is not None else None
        if session is None:
            return None
        if session.expires < self._clock():
            self._sessions.pop(morsel.value if morsel else "", None)
            return None
        return session.identity

    def wants_sign_in(self, scope: Scope, headers: dict[str, str]) -> bool:
        """A browser navigating to a page without credentials: show it the sign-in page."""
        return (
            scope.get("method") == "GET"
            and self.is_page(scope["path"])
            and "text/html" in headers.get("accept", "")
        )

    def sign_in_page(self, scope: Scope, message: str = "") -> Response:
        return HTMLResponse(_sign_in_html(scope["path"], message), status_code=401, headers=PAGE_HEADERS)

    async def exchange(self, scope: Scope, receive: Receive, send: Send, tokens: TokenTable | None) -> None:
        """The sign-in form's POST: a cookie and a redirect to the page, or the form again (401).
        ``tokens`` None: a server without auth, where every page is open; just the redirect."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if _cross_site(headers):
            response: Response = HTMLResponse("cross-site sign-in refused", 403, headers=PAGE_HEADERS)
            await response(scope, receive, send)
            return
        form = parse_qs((await _read_body(receive)).decode("utf-8", "replace"))
        page = (form.get("next") or [""])[0]
        if not self.is_page(page):
            page = self.prefixes[0]
        if tokens is None:
            await RedirectResponse(page, status_code=303, headers=PAGE_HEADERS)(scope, receive, send)
            return
        identity = tokens.identify((form.get("token") or [""])[0])
        if identity is None:
            await self.sign_in_page({**scope, "path": page}, "That token is not valid here.")(
                scope, receive, send
            )
            return
        response = RedirectResponse(page, status_code=303, headers=PAGE_HEADERS)
        session_id = self.issue(identity)
        for prefix in self.prefixes:
            response.set_cookie(
                COOKIE_NAME,
                session_id,
                max_age=SESSION_SECONDS,
                path=prefix,
                secure=scope.get("scheme") == "https",
                httponly=True,
                samesite="strict",
            )
        await response(scope, receive, send)


def with_page_headers(send: Send) -> Send:
    """``send`` adding :data:`PAGE_HEADERS` to the response start (a page's own responses)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {name.lower() for name, _ in message.get("headers", [])}
            extra = [(k.encode(), v.encode()) for k, v in PAGE_HEADERS.items() if k.encode() not in names]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


def _cross_site(headers: dict[str, str]) -> bool:
    """A sign-in posted from another site's page (login CSRF). Browsers say so in
    ``Sec-Fetch-Site``; under ``no-referrer`` they send ``Origin: null`` even from our own page, so
    ``Origin`` is only compared when it names a site."""
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site not in ("same-origin", "none")
    origin = headers.get("origin", "null")
    return origin != "null" and urlsplit(origin).netloc != headers.get("host", "")


async def _read_body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        chunk: bytes = message.get("body", b"")
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return b""
        if not message.get("more_body"):
            return body


def _sign_in_html(page: str, message: str) -> str:
    note = f'<p class="error">{html.escape(message)}</p>' if message else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>deskrig: sign in</title>
<style>body{{font:15px system-ui,sans-serif;margin:3em auto;max-width:28em;color:#222}}
input{{font:inherit;padding:.3em;width:100%;box-sizing:border-box;margin:.4em 0}}.error{{color:#b00}}</style>
</head><body>
<h1>deskrig</h1>{note}
<form id="sign-in" method="post" action="{EXCHANGE_PATH}">
<label>Token for this server <input type="password" name="token" autocomplete="off" autofocus></label>
<input type="hidden" name="next" value="{html.escape(page)}">
<input type="submit" value="Open {html.escape(page)}">
</form>
<script>
// A token in the fragment (#token=...) never reaches the server in a URL: erase it and post it.
const given = new URLSearchParams(location.hash.slice(1)).get("token");
if (given) {{
  history.replaceState(null, "", location.pathname + location.search);
  const form = document.getElementById("sign-in");
  form.token.value = given;
  form.submit();
}}
</script>
</body></html>
"""
