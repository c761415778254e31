"""A study's codes and keys, and how each is made: the study's code (as a class code: no 0/O, 1/I/L), the hash its
owner's secret is kept as, the link's token, a participant's pseudonym (an HMAC of their browser with the study's
own key) and their deletion code (derived from the same key and the pseudonym, so it is never stored and their own
session can show it again)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # as class codes: no 0/O, 1/I/L
CODE_LENGTH = 8


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(code) -> str | None:
    if not isinstance(code, str) or len(code) > 32:
        return None
    code = "".join(code.split()).replace("-", "").upper()
    return code if len(code) == CODE_LENGTH and all(c in CODE_ALPHABET for c in code) else None


def hashed(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def deletion_code_of(actor_key: bytes, actor: str) -> str:
    """A participant's deletion code: 12 hex digits of an HMAC of their pseudonym, keyed by a key of its own made
    from the study's key (so no pseudonym or typed sentence's hash, both HMACs with the study's key, can equal it)."""
    key = hashlib.sha256(b"deletion-code|" + actor_key).digest()
    return hmac.new(key, actor.encode(), "sha256").hexdigest()[:12].upper()


def link_token(secret_hash: str) -> str:
    return hashed("study-link", secret_hash)[:20]


def pseudonym_of(actor_key: bytes, source: str) -> str:
    """A participant's id in a study: an HMAC of `source` (their browser's id, or "code:" + a code the researcher
    issued) with the study's own key."""
    return "p-" + hmac.new(actor_key, source.encode(), "sha256").hexdigest()[:32]
