"""What the operations mixed into `ClassStore` (classroom/votes.py `PeerVotes`, classroom/roster.py `RosterOps`) take
from the store itself (classroom/store.py): a class code read and checked, and a teacher's secret checked against
its class. Declared once, here, for both."""

from __future__ import annotations

from abc import ABC, abstractmethod


class StoreParts(ABC):
    """The store's part of every mixed-in operation (`ClassStore` implements it)."""

    @staticmethod
    @abstractmethod
    def _code(code: object) -> str:
        """The class code, normalised; NotFound when it cannot be one."""
        raise NotImplementedError

    @abstractmethod
    def _teacher(self, code: str, secret: object) -> str:
        """The class's stored secret hash, once `secret` is checked against it (NotFound, ClassEnded, Forbidden)."""
        raise NotImplementedError
