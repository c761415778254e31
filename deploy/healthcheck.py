"""Health checks of the app image (compose.yaml's `healthcheck:`), exit 0 when healthy:

    python -m deploy.healthcheck app      # this container's Streamlit answers /_stcore/health with "ok"
    python -m deploy.healthcheck worker   # this container's training queue worker said it was alive (its
                                          # heartbeat in Redis, on Redis's clock) within the last 20 s

A health check runs beside the container's process, not under its entrypoint, so the worker's check
reads its Redis URL the same way (deploy.entrypoint).
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request

APP_HEALTH = "http://127.0.0.1:8501/_stcore/health"
WORKERS_KEY = "glass:train:workers"  # training.redis_queue.key("workers") (not imported: it loads torch)
FRESH_SECONDS = 20  # the worker beats every 5 s (training.queue_worker.HEARTBEAT_SECONDS)


def app_healthy() -> bool:
    with urllib.request.urlopen(APP_HEALTH, timeout=3) as r:
        return r.read().strip() == b"ok"


def worker_healthy() -> bool:
    """A worker here (training.queue_worker names itself host-pid-random) has beaten within FRESH_SECONDS."""
    import redis

    from deploy.entrypoint import secret_environment

    url = secret_environment(dict(os.environ))["GLASS_REDIS_URL"]
    conn = redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3)
    seconds, micros = conn.time()
    now = seconds + micros / 1e6
    mine = f"{socket.gethostname()}-"
    return any(
        name.decode().startswith(mine) and now - beat < FRESH_SECONDS
        for name, beat in conn.zrange(WORKERS_KEY, 0, -1, withscores=True)
    )


def main(argv: list[str]) -> int:
    checks = {"app": app_healthy, "worker": worker_healthy}
    if len(argv) != 1 or argv[0] not in checks:
        print("usage: python -m deploy.healthcheck app|worker", file=sys.stderr)
        return 2
    try:
        return 0 if checks[argv[0]]() else 1
    except Exception as e:  # noqa: BLE001 - any failure is "unhealthy", with its reason in docker inspect
        print(f"{argv[0]} unhealthy: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
