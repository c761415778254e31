"""Many users at once: one call run on as many threads, started together."""

from __future__ import annotations

import threading
from collections.abc import Callable


def at_once(work: Callable[[int], object], n: int, timeout: float = 60) -> list[Exception]:
    """work(0) ... work(n - 1), each on a thread of its own, all started before any is waited for (each for at
    most `timeout` s): the exceptions they raised."""
    errors: list[Exception] = []

    def run(i: int) -> None:
        try:
            work(i)
        except Exception as e:  # noqa: BLE001 - handed to the test, which asserts there are none
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return errors
