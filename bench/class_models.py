"""What a class exploring its teacher's model costs the app process: `N` students press "Explore this model on every
page" (ui/classroom/board.py), each of them then showing the teacher's model on their pages.

    .venv/bin/python -m bench.class_models [--students 30] [--compare DIR]

A private redis-server and one `streamlit run app.py` on it (127.0.0.1, free ports), so that this script can be the
teacher through the class store itself: it starts a class, shares a model of about 16 MB (the largest a class may
share: random weights of d_model 256, 3 + 3 layers, d_ff 480, the shipped vocabularies) and a finished run that
names it. `--students` browserless students (tools/ws_client.py) join by the link and follow; then each presses
the button, one after the other. Printed: the app process's memory (RSS) before and after, per student, and the
clicks' time. `--compare DIR` first measures another checkout the same way (a `git worktree` of an older commit:
the "before").

Bounded: at most 60 students; every wait has a timeout; servers stopped at the end (process groups).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.abuse import Memory
from bench.class_clients import ONE_ADDRESS, join
from classroom import RedisClassStore
from serving.processes import start_app
from serving.replicas import start_redis

STATE = {"page": "overview", "sentence": "thinking machines", "model": "base"}
RUN = {
    "settings": {},
    "steps": [1],
    "losses": [1.0],
    "exact_match": None,
    "source": "",
    "translation": "",
    "state": "finished",
    "step": 1,
    "total": 1,
    "attention": None,
}


def big_model() -> tuple[bytes, bytes]:
    """A checkpoint of about 16 MB (random weights, the shipped vocabularies)."""
    import torch

    from model.checkpoint import SHIPPED, Bundle, build_model, load, to_bytes

    shipped = load(SHIPPED)
    cfg = shipped.config.__class__(
        **{
            **shipped.config.to_dict(),
            "d_model": 256,
            "n_enc_layers": 3,
            "n_dec_layers": 3,
            "d_ff": 480,
            "dropout": 0.0,
        }
    )
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    return to_bytes(Bundle(model, shipped.src_vocab, shipped.tgt_vocab, shipped.direction, {}, "big"))


def rss_mb(pid: int) -> float:
    return Memory(pid).tree_rss() / 2**20


async def explore(url: str, pid: int, store: RedisClassStore, n: int, model: tuple[bytes, bytes]) -> dict:
    code, secret = store.create(STATE)
    version = store.set_class_model(code, secret, *model)
    store.set_class_run(code, secret, {**RUN, "model": version})
    students = []
    for i in range(0, n, 10):
        students += await asyncio.gather(*(join(url, code) for _ in range(min(10, n - i))))
    try:
        await asyncio.sleep(3)
        before = rss_mb(pid)
        clicks = []
        for s in students:
            t = time.perf_counter()
            await s.click("class_run_use")
            clicks.append(time.perf_counter() - t)
        await asyncio.sleep(3)
        after = rss_mb(pid)
        shows = sum("You explore this model" in s.text() for s in students)
    finally:
        await asyncio.gather(*(s.close() for s in students), return_exceptions=True)
    return {
        "students": n,
        "before_mb": before,
        "after_mb": after,
        "per_student_mb": (after - before) / n,
        "clicks_p50": statistics.median(clicks),
        "clicks_max": max(clicks),
        "explored": shows,
    }


def measure(root: Path | None, n: int, model: tuple[bytes, bytes]) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="glass-bench-models-"))
    redis = start_redis(workdir)
    app = None
    try:
        env = {**ONE_ADDRESS, "GLASS_REDIS_URL": redis.url}
        app = start_app(log=workdir / "app.log", timeout=120, extra_env=env, root=root)
        store = RedisClassStore(redis.url, classes_per_client=100, class_starts_per_minute=100)
        try:
            return asyncio.run(asyncio.wait_for(explore(app.url, app.proc.pid, store, n, model), 120 + n * 20))
        finally:
            store.close()
    finally:
        if app is not None:
            app.stop()
        redis.child.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--compare", type=Path, default=None, help="measure this checkout first (a before)")
    args = ap.parse_args(argv)
    n = max(1, min(args.students, 60))
    model = big_model()
    print(f"a shared model of {sum(map(len, model)) / 2**20:.1f} MB, {n} students explore it", flush=True)
    for label, root in ((f"before ({args.compare})", args.compare), ("this checkout", None)):
        if label.startswith("before") and root is None:
            continue
        r = measure(root, n, model)
        print(
            f"{label}: {r['explored']} of {n} students explore it; app process {r['before_mb']:.0f} -> "
            f"{r['after_mb']:.0f} MB = {r['per_student_mb']:.1f} MB per student; clicks p50 {r['clicks_p50']:.2f} s, "
            f"max {r['clicks_max']:.2f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
