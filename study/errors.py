"""What the study store refuses: every message can be shown to the person as it is."""

from __future__ import annotations


class StudyError(Exception):
    """Anything the study store refuses; the message is safe to show."""


class InvalidInput(StudyError, ValueError):
    pass


class NotFound(StudyError):
    """No such study (never existed, deleted, or past its retention period)."""


class Forbidden(StudyError):
    """An owner's operation without the study's key."""


class StudyClosed(StudyError):
    pass


class NotConsented(StudyError):
    """Nothing is recorded for someone who has not consented (or whose data were deleted)."""


class AlreadyRecorded(StudyError):
    """An answer sent twice (a double click, a replayed message): the first one counts."""


class WrongPhase(StudyError):
    pass


class RateLimited(StudyError):
    def __init__(self, retry_after: float):
        super().__init__(f"Too many attempts: try again in {max(1, round(retry_after))} s.")
        self.retry_after = retry_after


class Unavailable(StudyError):
    """The database cannot be reached."""
