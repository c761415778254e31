"""Make the secrets compose.yaml needs, as files, and an env file naming them (standard library only):

    python3 -m deploy.make_secrets DIR        # then: docker-compose --env-file DIR/compose.env up ...

DIR (created, mode 0700) gets one random value per file: redis_password (the app's Redis user),
redis_worker_password (the training queue workers' Redis user), cookie_secret (Streamlit's cookie
secret, shared by every replica) and proxy_cookie_key (HAProxy's sticky-session cookies); and compose.env
with GLASS_*_FILE=DIR/... for each. Existing files are kept (running it again changes nothing), so the
same secrets survive a rebuild; delete a file to renew that secret. The files are world-readable inside
DIR only because Docker mounts them into containers whose processes do not run as root; keep DIR itself
private.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

# the file, and the variable compose.yaml reads its path from
SECRETS = {
    "redis_password": "GLASS_REDIS_PASSWORD_FILE",
    "redis_worker_password": "GLASS_REDIS_WORKER_PASSWORD_FILE",
    "cookie_secret": "GLASS_COOKIE_SECRET_FILE",
    "proxy_cookie_key": "GLASS_PROXY_COOKIE_KEY_FILE",
}


def make_secrets(folder: Path) -> Path:
    """The secret files in `folder` (made where missing) and `folder`/compose.env; returns the env file."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    lines = []
    for name, variable in SECRETS.items():
        path = folder / name
        if not path.exists() or not path.read_text().strip():
            path.write_text(secrets.token_urlsafe(32) + "\n")  # 43 characters of A-Z a-z 0-9 _ -
        path.chmod(0o644)
        lines.append(f"{variable}={path}")
    env = folder / "compose.env"
    env.write_text(
        "# secrets for compose.yaml (python3 -m deploy.make_secrets): the files' paths, not the values\n"
        + "\n".join(lines)
        + "\n"
    )
    env.chmod(0o600)
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m deploy.make_secrets", description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="where the secret files go (keep it out of the repository)")
    args = ap.parse_args(argv)
    print(make_secrets(args.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
