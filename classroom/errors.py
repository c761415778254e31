"""What the class store refuses: every message can be shown to the user as it is."""

from __future__ import annotations


class ClassStoreError(Exception):
    """Anything the class store refuses; the message is safe to show."""


class InvalidInput(ClassStoreError, ValueError):
    pass


class NotFound(ClassStoreError):
    """No such class (never existed, expired, or ended long ago)."""


class ClassEnded(ClassStoreError):
    pass


class Forbidden(ClassStoreError):
    """A teacher operation without the class's secret."""


class RateLimited(ClassStoreError):
    def __init__(self, retry_after: float):
        super().__init__(f"Too many attempts: try again in {max(1, round(retry_after))} s.")
        self.retry_after = retry_after


class QuestionClosed(ClassStoreError):
    """The question was revealed, or replaced by a newer one, or there is none."""


class ClassFull(ClassStoreError):
    pass


class StoreUnavailable(ClassStoreError):
    """The shared store (Redis) cannot be reached."""


class StoreFull(StoreUnavailable):
    """The shared store (Redis) is at its memory ceiling: it answers every read and refuses every write."""
