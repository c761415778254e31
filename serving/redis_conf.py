"""The Redis this app needs, as a redis.conf: `python -m serving.redis_conf > redis.conf`.

One recipe for every Redis the app runs on (the private one of `./dev.sh serve`, compose's): passwords
never on a command line (they come from the environment or a file, and go into the config, which
`redis-server -` reads on its standard input or from a file only its owner reads); two users:

- ``default``: the app processes (classes, the training queue, browser ids), on this machine or the
  private network: every key and command;
- ``glass-worker``: training queue workers, possibly on other machines: only the training queue's keys
  (``glass:train:*`` and RQ's ``rq:*``) and RQ's command channels, so a worker's password cannot read or
  change a class;

a memory ceiling with ``maxmemory-policy noeviction``: Redis never evicts a key, so no class and no
running job's stream can vanish under memory pressure; a write past the ceiling is refused, and the
page says the server is full (what the app keeps is bounded by its own rules: classes by their caps and
expiry, ended training runs by `training.redis_queue.RESULTS_BUDGET`); and, with a data folder, an
append-only file, so that classes and queued runs survive a restart of Redis.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

WORKER_USER = "glass-worker"
# The keys and channels a queue worker uses, and the commands: everything a client needs but the
# dangerous ones; RQ reads the server's version with INFO and names its connection with CLIENT SETNAME.
WORKER_RULES = "~glass:train:* ~rq:* &rq:* +@all -@dangerous +info +client|setname +client|getname"
DEFAULT_MAXMEMORY = "1gb"
_SAFE = re.compile(r"[A-Za-z0-9_.~+/=-]{16,256}")  # what a password may be here (no quote, no space)


def redis_conf(
    password: str,
    worker_password: str | None = None,
    port: int = 6379,
    bind: str = "127.0.0.1",
    maxmemory: str = DEFAULT_MAXMEMORY,
    data_dir: Path | str | None = None,
) -> str:
    """A redis.conf: `bind`:`port`, the default user's password, a worker user when `worker_password` is given,
    the memory ceiling, and an append-only file in `data_dir` (None: nothing written to disk)."""
    for what, secret in (("password", password), ("worker password", worker_password)):
        if secret is not None and not _SAFE.fullmatch(secret):
            raise ValueError(f"the Redis {what} must be 16-256 characters of A-Z, a-z, 0-9 and _.~+/=-")
    if not re.fullmatch(r"\d+(kb|mb|gb)?", maxmemory.lower()):
        raise ValueError("maxmemory: a size such as 512mb or 2gb")
    lines = [
        f"bind {bind}",
        f"port {int(port)}",
        "protected-mode yes",
        "daemonize no",
        f"user default on >{password} ~* &* +@all",
        f"maxmemory {maxmemory}",
        "maxmemory-policy noeviction",
    ]
    if worker_password is not None:
        lines.append(f"user {WORKER_USER} on >{worker_password} {WORKER_RULES}")
    if data_dir is None:
        lines += ['save ""', "appendonly no"]
    else:
        lines += [f'dir "{Path(data_dir)}"', 'save ""', "appendonly yes", "appendfsync everysec"]
    return "\n".join(lines) + "\n"


def _secret(name: str) -> str | None:
    """$NAME, or the contents of the file $NAME_FILE (a Docker secret), stripped."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    value = os.environ.get(name)
    return value.strip() if value else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m serving.redis_conf", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--maxmemory", default=os.environ.get("GLASS_REDIS_MAXMEMORY", DEFAULT_MAXMEMORY))
    ap.add_argument("--data-dir", default=None, help="keep an append-only file here (default: nothing on disk)")
    args = ap.parse_args(argv)
    password = _secret("GLASS_REDIS_PASSWORD")
    if not password:
        print("set GLASS_REDIS_PASSWORD or GLASS_REDIS_PASSWORD_FILE", file=sys.stderr)
        return 2
    sys.stdout.write(
        redis_conf(
            password, _secret("GLASS_REDIS_WORKER_PASSWORD"), args.port, args.bind, args.maxmemory, args.data_dir
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
