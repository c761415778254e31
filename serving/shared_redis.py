"""The one Redis server that app processes share when `GLASS_REDIS_URL` is set (none by default).

The class store (`classroom`) and the training queue (`training.redis_queue`) use it, and so does the key
that turns a browser's cookie into its id (`serving.identity.browser_id`): with one key for every app
process, a browser keeps its id, and so its training job and its place in a class, when the proxy
sends it to another process (after a process was restarted or killed).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from redis import Redis

REDIS_URL_ENV = "GLASS_REDIS_URL"
BROWSER_KEY = "glass:browser-key"  # the shared key behind browser ids (no expiry: ids stay stable)

_log = logging.getLogger("glass.redis")
_clients: dict[str, Redis] = {}
_lock = threading.Lock()


def redis_url() -> str:
    """$GLASS_REDIS_URL, stripped ("" when unset: everything stays in this process)."""
    return os.environ.get(REDIS_URL_ENV, "").strip()


def client(url: str | None = None) -> Redis:
    """A `redis.Redis` for `url` (default: $GLASS_REDIS_URL), one per process and URL; bytes in, bytes out."""
    url = redis_url() if url is None else url
    with _lock:
        conn = _clients.get(url)
        if conn is None:
            conn = _clients[url] = new_client(url)
        return conn


def new_client(url: str) -> Redis:
    """A `redis.Redis` of its own (its own connection pool): for a connection whose settings someone else
    changes (RQ's worker raises its socket timeout for its blocking reads)."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5, health_check_interval=30)


def browser_key(fallback: bytes) -> bytes:
    """The key that hashes browser tokens into ids: shared by every app process through Redis when one is
    configured (set once, by whichever process asks first), else `fallback` (this process's own)."""
    url = redis_url()
    if not url:
        return fallback
    try:
        conn = client(url)
        conn.set(BROWSER_KEY, secrets.token_hex(16), nx=True)
        value = cast(bytes | None, conn.get(BROWSER_KEY))  # bytes: our clients never decode
        return bytes.fromhex(value.decode()) if value else fallback
    except Exception as e:  # noqa: BLE001 - no Redis: ids are per process, as without it
        _log.warning("browser ids are per process: Redis did not answer (%s)", e)
        return fallback
