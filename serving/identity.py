"""Who is asking: the browser and the client (network address), from what a request carries.

The training service gives one job per browser and shares its slots per client; classroom mode keeps
a student's place per browser and limits joins per client. This is the one place that decides both;
`ui.session_info.current_identity` reads the request of the Streamlit script run that asks.

How a browser is identified (`browser_id`)
-----------------------------------------------
Streamlit 1.67 keeps no per-browser id of its own: every websocket is a new session. What a browser
does carry is Streamlit's XSRF cookie, `_streamlit_xsrf`, which the server sets (without an expiry,
so for the browser's lifetime, ``Path=/``, shared by all tabs) on the health check the frontend
makes before it opens the websocket, and which the websocket's handshake then sends. The public
`st.context.cookies` shows it. Its value is ``2|mask|masked_token|timestamp``: the mask is drawn
afresh every time the server sets the cookie again, so the raw string changes from one load to the
next, but the token underneath (token XOR mask) and the timestamp do not. We unmask the token and
keep only ``sha256(key + token)``: the cookie is never stored, logged or shown. The key is random,
per process, or, with ``GLASS_REDIS_URL`` set, one key kept in Redis for every app process
(`serving.shared_redis`), so a browser keeps its id when a proxy sends it to another process.

Limits of this choice: a browser without that cookie (XSRF protection switched off, or a client
that is no browser, such as a script or AppTest) falls back to one identity per session, as before:
no re-attach, but the per-client limits still apply. A private window, another browser profile or
clearing cookies is another browser. Anyone who can read a browser's cookie (someone at that very
computer) can attach to its job; the id is no secret from its own browser. Without Redis the key is
per process, so ids (and jobs) do not outlive a server restart. Sessions attach to their browser's job
when they run the training page; a reload on another page keeps the job alive only if a training page
of that browser is opened within the job manager's `grace` seconds (60).

How a client is identified (`client_address`)
---------------------------------------------
By its IP address as Streamlit sees it (`st.context.ip_address`; a connection from this machine
counts as "local"). IPv6 addresses count per /64 (one household or device gets a whole /64). Behind
a reverse proxy every student would have the proxy's address: set ``GLASS_TRUST_PROXY=N`` (the number
of proxies in front of the app that append to ``X-Forwarded-For``, usually 1), and the client is the
address the outermost trusted proxy saw, read from the right of that header (entries further left
are written by the client itself and could be anything). A class that reaches the server through
one NAT address is one client: raise ``GLASS_JOBS_PER_CLIENT`` and ``GLASS_STARTS_PER_MINUTE`` to the
class size there.

Stored, a client is always hashed (`client_key`): no network address is kept in Redis or in memory.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import secrets
from dataclasses import dataclass

XSRF_COOKIE = "_streamlit_xsrf"
_SECRET = secrets.token_bytes(16)  # hashes browser tokens into ids in this process (see `_browser_key`)
_KEY: bytes | None = None


def _browser_key() -> bytes:
    """This process's key for browser ids, or the one all app processes share through Redis (set on first use)."""
    global _KEY
    if _KEY is None:
        from serving.shared_redis import browser_key

        _KEY = browser_key(_SECRET)
    return _KEY


def trusted_proxies() -> int:
    """$GLASS_TRUST_PROXY: how many reverse proxies in front of the app append to X-Forwarded-For
    (0: none, trust no header; "true"/"yes" mean 1)."""
    raw = os.environ.get("GLASS_TRUST_PROXY", "").strip().lower()
    if raw in ("true", "yes", "on"):
        return 1
    try:
        return max(0, int(raw or 0))
    except ValueError:
        return 0


@dataclass(frozen=True)
class Identity:
    """Who is asking: `client` (the fair-share unit: a network address), `browser` (a hash naming the
    browser, or None when it has no XSRF cookie) and `session` (this Streamlit session's id, or None)."""

    client: str
    browser: str | None
    session: str | None


def browser_id(cookie: str | None) -> str | None:
    """The id of the browser holding this `_streamlit_xsrf` cookie value: a hash of its unmasked token
    and timestamp (stable while the browser keeps the cookie, whatever mask the value carries), or None."""
    if not cookie:
        return None
    parts = cookie.strip("\"'").split("|")
    try:
        if len(parts) == 4 and parts[0] == "2":
            mask, masked = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
            if not mask or not masked:
                return None
            token = bytes(b ^ mask[i % len(mask)] for i, b in enumerate(masked)) + b"|" + parts[3].encode()
        elif len(parts) == 1:  # version 1: the token itself, in hex
            token = bytes.fromhex(parts[0])
        else:
            return None
    except ValueError:
        return None
    if len(token) < 8:
        return None
    return "b-" + hashlib.sha256(_browser_key() + token).hexdigest()[:32]


def client_address(ip: str | None, forwarded_for: str | None = None, proxies: int = 0) -> str:
    """The client a request counts for: the address the outermost trusted proxy saw when `proxies` > 0
    and the header has one, else `ip`; "local" for none. IPv6 counts per /64."""
    if proxies > 0 and forwarded_for:
        hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
        if hops:
            ip = hops[max(0, len(hops) - proxies)]
    if not ip:
        return "local"
    try:
        addr = ipaddress.ip_address(ip.strip().strip("[]"))
    except ValueError:
        return "unparsable:" + hashlib.sha256(ip.encode("utf-8", "replace")).hexdigest()[:16]
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return str(ipaddress.IPv6Network((addr, 64), strict=False))
    return str(addr)


def client_key(client: object) -> str:
    """The form a client is stored in (rate limits, shares, counts): a hash, so that no network address is
    kept anywhere and keys stay bounded. ValueError for anything that is not a client."""
    if not isinstance(client, str) or not 1 <= len(client) <= 256:
        raise ValueError("the client must be a string of 1-256 characters")
    return "c-" + hashlib.sha256(client.encode()).hexdigest()[:32]
