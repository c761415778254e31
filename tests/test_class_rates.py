"""The class store's rate limits (classroom/rules.py `LIMITS`): every row of the table applied by both back-ends the
same way (the memory store and a real redis-server, tests/services.py), and the one algorithm, a sliding window,
in numbers: on the memory store with a fake clock where exact times matter, on both in real time once."""

from __future__ import annotations

import time

import pytest

from classroom import MemoryClassStore, NotFound, RateLimited
from classroom.rules import LIMITS

Q = ("Which word does 'it' attend to most?", ["animal", "street", "tired"], 0)
RUN = {
    "settings": {"d_model": 64, "n_heads": 2, "steps": 300, "look_ahead_mask": True},
    "steps": [100, 200, 300],
    "losses": [3.0, 1.2, 0.5],
    "exact_match": 0.42,
    "source": "i am a student",
    "translation": "je suis étudiant",
}
CLIENTS = ("198.51.100.1", "198.51.100.2")


def sid(n: int) -> str:
    return f"student-{n:04d}"


def sender(store, name: str):
    """send(n, other): the n-th send under the limit `name`, from its first key (other=False) or another one."""
    code, secret = store.create({}, "192.0.2.200")
    for n in range(8):
        store.join(code, "192.0.2.201", sid(n))
    qid = store.ask_peer(code, secret, *Q)
    wrong = next(c for c in ("222222", "333333") if c != code)
    return {
        "starts": lambda n, other: store.create({}, CLIENTS[other]),
        "joinfail": lambda n, other: store.join(wrong, CLIENTS[other], sid(n)),
        "shots": lambda n, other: store.send_shot(code, sid(other), CLIENTS[0], {}, ""),
        "shots_client": lambda n, other: store.send_shot(code, sid(n + 4 * other), CLIENTS[other], {}, ""),
        "runs": lambda n, other: store.post_run(code, sid(other), CLIENTS[0], RUN),
        "votes": lambda n, other: store.vote(code, sid(other), qid, n % 2, CLIENTS[0]),
        "votes_client": lambda n, other: store.vote(code, sid(n + 4 * other), qid, 0, CLIENTS[other]),
    }[name]


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_every_limit_allows_exactly_its_most_per_key_on_both_back_ends(make_store, monkeypatch, name):
    """Each row at 3: three sends go through, the fourth is refused with a wait within the window, another key
    (another student, or another address) is not held back."""
    limit = LIMITS[name]
    if limit.env:
        monkeypatch.setenv(limit.env, "3")
    store = make_store(
        **({"max_failed_joins": 3} if name == "joinfail" else {}),
        **({"class_starts_per_minute": 3} if name == "starts" else {}),
    )
    assert store.limit(name).most == 3 and store.limit(name).seconds == limit.seconds
    send = sender(store, name)
    for n in range(3):
        with pytest.raises(NotFound) if name == "joinfail" else _allowed():
            send(n, False)
    with pytest.raises(RateLimited) as refused:
        send(3, False)
    assert 0 < refused.value.retry_after <= limit.seconds
    with pytest.raises(NotFound) if name == "joinfail" else _allowed():
        send(3, True)


class _allowed:  # (a context that lets everything but a refusal through)
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def votes_at(clock: list[float], times: list[float], monkeypatch) -> list[bool]:
    """One student's votes at these times on a memory store with a fake clock, the limit at 3 per 10 s: which
    went through."""
    monkeypatch.setenv("GLASS_VOTES_PER_STUDENT", "3")
    store = MemoryClassStore(clock=lambda: clock[0])
    code, secret = store.create({})
    store.join(code, CLIENTS[0], sid(1))
    qid = store.ask_peer(code, secret, *Q)
    went = []
    for n, t in enumerate(times):
        clock[0] = t
        try:
            store.vote(code, sid(1), qid, n % 2, CLIENTS[0])
            went.append(True)
        except RateLimited:
            went.append(False)
    return went


def test_votes_are_a_sliding_window_never_more_than_the_limit_in_any_ten_seconds(monkeypatch):
    """Votes were counted in fixed 10 s slots: 3 at the end of one slot and 3 more at the start of the next went
    through (6 in under 2 s), and a refused vote counted too. A sliding window allows 3 in any 10 s: the fourth
    waits until the first is 10 s old, then exactly one more goes."""
    assert votes_at([0.0], [1009.0, 1009.5, 1009.9, 1010.1, 1011.0], monkeypatch) == [True, True, True, False, False]
    assert votes_at([0.0], [1000.0, 1001.0, 1002.0, 1005.0, 1010.0, 1010.2, 1010.5, 1011.5], monkeypatch) == [
        True,
        True,
        True,
        False,
        False,
        True,
        False,
        True,
    ]  # (the vote at 1000 counts up to 1010, its end included)


def test_a_refusal_says_how_long_until_the_oldest_send_leaves_the_window(monkeypatch):
    clock = [500.0]
    store = MemoryClassStore(clock=lambda: clock[0], class_starts_per_minute=2)
    for t in (500.0, 530.0):
        clock[0] = t
        store.create({}, CLIENTS[0])
    clock[0] = 545.0
    with pytest.raises(RateLimited) as refused:
        store.create({}, CLIENTS[0])
    assert refused.value.retry_after == pytest.approx(15.0)  # the start at 500 leaves at 560
    clock[0] = 560.5
    store.create({}, CLIENTS[0])


def test_failed_joins_are_a_sliding_window_on_both_back_ends(make_store):
    """Redis counted failed joins from the first one for a window and then forgot them all; the memory store slid.
    Now both slide: 3 failures in 3 s, the first at 0 s and two at 1.5 s; at 3.2 s the first has left, the two
    have not, so one more failure goes and the next is refused."""
    store = make_store(max_failed_joins=3, join_window_seconds=3.0)
    with pytest.raises(NotFound):
        store.join("222222", CLIENTS[0], sid(1))
    make_store.wait(1.5)  # (the memory store's clock moves; Redis's time passes)
    for n in (2, 3):
        with pytest.raises(NotFound):
            store.join("222222", CLIENTS[0], sid(n))
    second = time.monotonic()
    with pytest.raises(RateLimited):
        store.join("222222", CLIENTS[0], sid(4))
    make_store.wait(1.7)  # 3.2 s after the first
    with pytest.raises(NotFound):
        store.join("222222", CLIENTS[0], sid(5))
    if time.monotonic() - second < 2.9:  # (the two at 1.5 s are still in the window: a machine this slow says nothing)
        with pytest.raises(RateLimited) as refused:
            store.join("222222", CLIENTS[0], sid(6))
        assert 0 < refused.value.retry_after <= 1.5
