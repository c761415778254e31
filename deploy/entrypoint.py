"""The app image's entrypoint: secrets from files into the environment the app reads, then the command.

    python -m deploy.entrypoint streamlit run app.py ...     (the Dockerfile's ENTRYPOINT; CMD follows)

Docker and compose hand secrets to a container as files (/run/secrets/NAME); the app reads environment
variables. So that no secret is in compose.yaml, on a command line or in `docker inspect`, the container
is given the files' paths and this sets, in its own environment only, then replaces itself (exec) with
the command:

- ``GLASS_REDIS_URL``, with the password of ``GLASS_REDIS_PASSWORD_FILE`` put in: the URL is given without
  one, ``redis://redis:6379/0`` (the default user: app processes) or ``redis://glass-worker@redis:6379/0``
  (a training queue worker's own user, serving/redis_conf.py);
- ``STREAMLIT_SERVER_COOKIE_SECRET`` from ``STREAMLIT_SERVER_COOKIE_SECRET_FILE`` (one secret for every
  replica, so a cookie one set is accepted by all), ``GLASS_ACCESS_CODE`` from ``GLASS_ACCESS_CODE_FILE``.

A secret file that is missing or empty stops the container with a message naming it.
"""

from __future__ import annotations

import os
import sys
import urllib.parse
from pathlib import Path

PLAIN = ("STREAMLIT_SERVER_COOKIE_SECRET", "GLASS_ACCESS_CODE")  # NAME_FILE -> NAME, as they are


class MissingSecret(Exception):
    pass


def read_secret(variable: str, env: dict) -> str:
    """The contents of the file named by $variable, stripped; MissingSecret if it is not a readable, non-empty file."""
    path = Path(env[variable])
    try:
        value = path.read_text().strip()
    except OSError as e:
        raise MissingSecret(f"{variable}={path}: {e.strerror or e}") from None
    if not value:
        raise MissingSecret(f"{variable}={path} is empty")
    return value


def with_password(url: str, password: str) -> str:
    """`url` (redis://[user@]host:port/db) with `password` in it, quoted (a password may hold a '/')."""
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        raise MissingSecret("GLASS_REDIS_URL already holds a password: give it without one, and the password as a file")
    user = urllib.parse.quote(parts.username or "", safe="")
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{urllib.parse.quote(password, safe='')}@{host}"))


def secret_environment(env: dict) -> dict:
    """`env` with every secret file read into the variable the app reads."""
    out = dict(env)
    for name in PLAIN:
        if out.get(f"{name}_FILE"):
            out[name] = read_secret(f"{name}_FILE", out)
    if out.get("GLASS_REDIS_PASSWORD_FILE"):
        if not out.get("GLASS_REDIS_URL"):
            raise MissingSecret("GLASS_REDIS_PASSWORD_FILE is set but not GLASS_REDIS_URL (the server, no password)")
        out["GLASS_REDIS_URL"] = with_password(out["GLASS_REDIS_URL"], read_secret("GLASS_REDIS_PASSWORD_FILE", out))
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m deploy.entrypoint COMMAND [ARGS...]", file=sys.stderr)
        return 2
    try:
        env = secret_environment(dict(os.environ))
    except MissingSecret as e:
        print(f"glass: a secret is missing: {e} (docs/operators.md, 'Containers')", file=sys.stderr)
        return 78  # EX_CONFIG
    os.execvpe(argv[0], argv, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
