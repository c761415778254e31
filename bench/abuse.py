"""Replay classroom abuse cases (floods, reloads, hostile uploads) against a real server; measure their cost.

Starts `streamlit run app.py` on a free loopback port (serving/processes.py) with
``GLASS_TRUST_PROXY=1``, so that each simulated client can carry its own address in
``X-Forwarded-For`` as a reverse proxy would write it. Every visitor is a browserless websocket
session (tools/ws_client.py) with its own Streamlit XSRF cookie (a new mask on every connection, as
the server writes it), so one "browser" can reload. Then:

1. before: `--students` students on the overview page type sentences; their rerun latencies;
2. the attack, for at most `--deadline` seconds, while the same students go on typing:
   - a flood: one client opens `--flood` sessions of the training page and presses Start in each
     (one client, many browsers: the per-client cap must stop it at GLASS_JOBS_PER_CLIENT);
   - `--trainers` real students, each from its own address, start a small training and reload the page
     `--reloads` times while it is queued or running; after each reload the page must show their job
     (re-attached), and in the end every one of their trainings must finish: a training that is lost
     (not shown after a reload, or ended "session ended") counts as lost;
   - hostile uploads (another client, through Streamlit's own upload endpoint, as the frontend does it):
     the largest corpus the page takes (just under 2 MB, 7,996 words a side, every sentence 30 words),
     the largest settings on it (must be refused with the reason), then the heaviest run the server
     accepts on it (must finish, or fail with the memory message, within its cap); and checkpoints made
     to hurt (garbage, a header claiming a 40 GB tensor, JSON nested 100,000 deep): each must get its
     message.
3. it prints the server's peak memory (resident set of the server and its training workers, sampled
   every 0.25 s), the students' rerun latency during the attack against before (median and p95, and
   their ratios), how many flood starts were accepted and refused, and jobs lost (must be 0).

Bounded: at most 200 flood sessions, 10 trainers, 20 reloads each; the attack phase ends at `--deadline`
seconds and the whole run at `--deadline` + 240 s.

    .venv/bin/python -m bench.abuse [--flood 60] [--trainers 2] [--reloads 2] [--students 4] [--deadline 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.Common_pb2 import FileUploaderState, FileURLsRequest, UploadedFileInfo
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

from model import checkpoint
from serving.processes import start_app
from tools.ws_client import StreamlitSession, _Widget

SENTENCES = [
    "i am a student",
    "the cat is small",
    "she is happy",
    "we are tired",
    "the dog is young",
    "thinking machines learn fast",
    "he is a teacher",
    "you are tall",
]
TRAINER_SETTINGS = {"Steps": 150, "d_model": 32, "d_ff": 64}  # a small run: about 10 s on an idle core


class Visitor(StreamlitSession):
    """A StreamlitSession that is a browser (an XSRF cookie, re-masked on each connection, as the server
    does) behind a proxy (an X-Forwarded-For address), and that can click buttons and set numbers."""

    def __init__(
        self, base_url: str, address: str, token: bytes | None = None, stamp: int | None = None, timeout: float = 120
    ):
        super().__init__(base_url, timeout)
        self.address = address
        self.token = token if token is not None else os.urandom(16)  # the browser's cookie: token ...
        self.stamp = stamp if stamp is not None else int(time.time())  # ... and its time, both kept by the server

    session_id = ""
    _urls: asyncio.Future | None = None

    def extra_headers(self) -> dict[str, str]:
        """The page's other requests (its class's event stream) come through the same proxy, from the same address."""
        return {"X-Forwarded-For": self.address}

    def _handle(self, msg) -> None:
        kind = msg.WhichOneof("type")
        if kind == "new_session" and msg.new_session.initialize.session_id:
            self.session_id = msg.new_session.initialize.session_id
        elif kind == "file_urls_response" and self._urls is not None and not self._urls.done():
            self._urls.set_result(msg.file_urls_response)
        super()._handle(msg)

    async def upload(self, label: str, files: list[tuple[str, bytes]]) -> float:
        """Choose `files` in the file uploader `label`, as the frontend does: ask for upload URLs over the
        websocket, PUT each file over HTTP (with the XSRF cookie and header), then rerun with the uploader's
        new state. Returns the seconds to the end of that rerun."""
        t = time.perf_counter()
        self._urls = asyncio.get_running_loop().create_future()
        request = FileURLsRequest(
            request_id=uuid.uuid4().hex, file_names=[n for n, _ in files], session_id=self.session_id
        )
        await self._ws.send(BackMsg(file_urls_request=request).SerializeToString())
        resp = await asyncio.wait_for(self._urls, self.timeout)
        cookie = generate_xsrf_token_string(self.token, self.stamp)
        infos = []
        for (name, data), urls in zip(files, resp.file_urls, strict=True):
            await asyncio.to_thread(self._put, urls.upload_url, name, data, cookie)
            infos.append(UploadedFileInfo(name=name, size=len(data), file_id=urls.file_id, file_urls=urls))
        wid = self.widget_id(label)
        self.widgets[wid] = WidgetState(id=wid, file_uploader_state_value=FileUploaderState(uploaded_file_info=infos))
        await self.rerun()
        return time.perf_counter() - t

    def _put(self, url: str, name: str, data: bytes, cookie: str) -> None:
        boundary = uuid.uuid4().hex
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        full = (
            url
            if url.startswith("http")
            else self.page_url.split("/", 3)[0] + "//" + self.page_url.split("/", 3)[2] + url
        )
        req = urllib.request.Request(
            full,
            data=body,
            method="PUT",
            headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "X-Xsrftoken": cookie,
                "Cookie": f"_streamlit_xsrf={cookie}",
                "X-Forwarded-For": self.address,
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                r.read()
        except urllib.error.HTTPError as e:  # a refused upload (too large) is an answer, not a crash
            if e.code not in (400, 413):
                raise

    def upgrade_headers(self) -> dict[str, str]:
        cookie = generate_xsrf_token_string(self.token, self.stamp)  # masked afresh on each connection
        return {"Cookie": f"_streamlit_xsrf={cookie}", "X-Forwarded-For": self.address}

    def _button_id(self, label: str) -> str:
        for _, (_, el) in sorted(self.elements.items()):
            if el.WhichOneof("type") == "button" and el.button.label == label:
                return el.button.id
        raise KeyError(f"no button {label!r}")

    async def click(self, label: str) -> float:
        """Press a button: a rerun with its trigger and every widget's state."""
        bid = self._button_id(label)
        state = ClientState(page_script_hash=self.page_hash)
        extra = WidgetState(id=bid, trigger_value=True)
        self.widgets[bid] = extra
        try:
            return await self._rerun(state)
        finally:
            self.widgets.pop(bid, None)

    def set_number(self, label: str, value: int) -> None:
        wid = self.widget_id(label)
        self.widgets[wid] = WidgetState(id=wid, int_value=int(value))

    async def rerun(self) -> float:
        return await self._rerun(ClientState(page_script_hash=self.page_hash))

    def progress(self) -> str:
        for _, (_, el) in sorted(self.elements.items()):
            if el.WhichOneof("type") == "progress":
                return el.progress.text
        return ""


_ = (WidgetStates, _Widget)  # the protocol's types, as ws_client uses them


class Memory:
    """Peak resident memory of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int, every: float = 0.25):
        self.pid, self.every, self.peak, self.samples = pid, every, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def tree_rss(self) -> int:
        children: dict[int, list[int]] = {}
        rss: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                pid = int(stat.parent.name)
                ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
                status = (stat.parent / "status").read_text()
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(pid)
            line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), None)
            rss[pid] = int(line.split()[1]) * 1024 if line else 0
        total, todo = 0, [self.pid]
        while todo:
            p = todo.pop()
            total += rss.get(p, 0)
            todo += children.get(p, [])
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.tree_rss())
            self.samples += 1
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))] if xs else float("nan")


async def student(url: str, i: int, until: float, out: list[float], errors: list[str], pause: float) -> None:
    """Type sentences on the overview page until `until` (monotonic); each rerun's seconds into `out`."""
    v = Visitor(url, f"10.1.0.{i + 1}")
    try:
        await v.connect()
        k = 0
        while time.monotonic() < until:
            try:
                out.append(await v.type_sentence(SENTENCES[(i + k) % len(SENTENCES)]))
            except Exception as e:  # noqa: BLE001 - a failed rerun is a measured error
                errors.append(f"student {i}: {type(e).__name__}")
            k += 1
            await asyncio.sleep(pause)
    finally:
        await v.close()


async def flood(url: str, n: int, until: float, result: dict, retry: float) -> list[Visitor]:
    """One client, `n` sessions (each a new browser) of the training page, each pressing Start, then
    pressing it again every `retry` seconds (trying to get in) until `until`."""
    opened: list[Visitor] = []
    sem = asyncio.Semaphore(8)

    async def one(i: int) -> None:
        if time.monotonic() > until:
            return
        async with sem:
            v = Visitor(url, "203.0.113.66")
            try:
                await v.connect("training")
                opened.append(v)
                await v.click("Start")
                text = v.text()
                if "per address" in text or "per minute" in text:
                    result["refused"] += 1
                elif v.progress() or "Waiting for a free slot" in text or "Building the model" in text:
                    result["accepted"] += 1
                else:
                    result["other"] += 1
            except Exception as e:  # noqa: BLE001
                result["errors"].append(f"flood {i}: {type(e).__name__}: {str(e)[:80]}")
                return
        while time.monotonic() + retry < until and not result.get("done"):
            await asyncio.sleep(retry)
            try:
                await v.click("Start")
                result["retries"] += 1
                if "per address" not in v.text() and "per minute" not in v.text() and v.progress():
                    result["accepted_later"] += 1
            except Exception as e:  # noqa: BLE001
                result["errors"].append(f"flood {i} retry: {type(e).__name__}: {str(e)[:80]}")
                return

    await asyncio.gather(*(one(i) for i in range(n)))
    return opened


def hostile_corpus(n_words: int = 7996, n_pairs: int = 5400, per: int = 30) -> bytes:
    """Just under 2 MB: 7,996 distinct words a side (the limit is 8,000 with the special tokens), every
    sentence at the 30-word limit: the largest embeddings, output layer and evaluation batches a corpus
    can ask for."""
    rng = random.Random(0)
    return (
        "\n".join(
            " ".join(f"s{rng.randrange(n_words)}" for _ in range(per))
            + "\t"
            + " ".join(f"t{rng.randrange(n_words)}" for _ in range(per))
            for _ in range(n_pairs)
        )
        + "\n"
    ).encode()


def hostile_checkpoints() -> dict[str, tuple[bytes, bytes]]:
    """Checkpoints made to hurt: garbage, a header that claims a 40 GB tensor, JSON nested 100,000 deep."""
    import json
    import struct

    header = json.dumps(
        {"src_embed.weight": {"dtype": "F32", "shape": [100_000, 100_000], "data_offsets": [0, 40_000_000_000]}}
    )
    claim = struct.pack("<Q", len(header)) + header.encode() + b"\0" * 64
    meta = json.loads((checkpoint.SHIPPED.parent / (checkpoint.SHIPPED.name + ".json")).read_text())
    meta.pop("weights_sha256", None)  # the shipped model's real config and vocabularies, with the claim above
    meta = json.dumps(meta).encode()
    return {
        "garbage": (os.urandom(100_000), b"{}"),
        "40 GB claim": (claim, meta),
        "nested JSON": (b"\0" * 64, b"[" * 100_000 + b"]" * 100_000),
    }


LABELS = {
    "layers": "Layers (encoder and decoder each)",
    "heads": "Heads",
    "d_model": "d_model",
    "d_ff": "d_ff",
    "batch": "Batch size (sentence pairs)",
    "steps": "Steps",
    "eval": "Evaluate on held-out pairs every … steps (0: only at the end)",
}
MODEL_UPLOADER = "Upload a model: its .safetensors and .json files together"


async def hostile(url: str, until: float, report: dict) -> None:
    """One more client: uploads the largest corpus it can, asks for the largest settings, then trains the
    heaviest run the server accepts on it; and uploads hostile checkpoints."""
    v = Visitor(url, "203.0.113.99")
    try:
        await v.connect("training")
        report["corpus upload s"] = round(await v.upload("Corpus file", [("wide.tsv", hostile_corpus())]), 2)
        choices = next(
            (
                list(el.radio.options)
                for _, (_, el) in v.elements.items()
                if el.WhichOneof("type") == "radio" and el.radio.label == "Train on"
            ),
            [],
        )
        report["corpus"] = choices[-1] if choices else "no choice of data on the page"
        for key, value in {"layers": 4, "heads": 8, "d_model": 256, "d_ff": 1024, "batch": 128}.items():
            v.set_number(LABELS[key], value)
        await v.click("Start")
        text = v.text()
        report["largest settings"] = (
            "refused: "
            + next(
                line
                for line in text.splitlines()
                if "could not be saved" in line or "limit per job" in line or "memory" in line.lower() and "MB" in line
            )[:160]
            if "No training yet" in text
            else "ACCEPTED"
        )
        for key, value in {
            "layers": 2,
            "heads": 4,
            "d_model": 128,
            "d_ff": 1024,
            "batch": 8,
            "steps": 30,
            "eval": 0,
        }.items():
            v.set_number(LABELS[key], value)
        await v.click("Start")
        state = job_state(v)
        report["heavy run"] = state
        while state in ("running", "queued") and time.monotonic() < until:
            await asyncio.sleep(3)
            await v.rerun()
            state = job_state(v)
        report["heavy run"] += f" -> {state}" + (
            ": " + next((x for x in v.text().splitlines() if "memory" in x), "")[:160] if state == "failed" else ""
        )
        for what, (w, j) in hostile_checkpoints().items():
            await v.upload(MODEL_UPLOADER, [("m.safetensors", w), ("m.json", j)])
            said = next((x for x in v.text().splitlines() if "cannot be used" in x or "checkpoint" in x.lower()), "")
            report[f"checkpoint: {what}"] = said[:140] or "no message"
        report["exceptions"] = v.exceptions()
    except Exception as e:  # noqa: BLE001
        report["error"] = f"{type(e).__name__}: {str(e)[:160]}"
    finally:
        await v.close()


def job_state(v: Visitor) -> str:
    text = v.text()
    for words, state in (
        ("Training finished", "finished"),
        ("session ended", "lost"),
        ("Training stopped (time limit", "time limit"),
        ("Training stopped", "stopped"),
        ("Training failed", "failed"),
        ("Waiting for a free slot", "queued"),
        ("No training yet", "none"),
    ):
        if words in text:
            return state
    return "running" if v.progress() or "Building the model" in text else "unknown"


async def trainer(url: str, i: int, reloads: int, until: float, report: dict) -> None:
    """A student who trains a small model and reloads the page while it is queued or running."""
    token, stamp = os.urandom(16), int(time.time())
    address = f"198.51.100.{i + 1}"
    v = Visitor(url, address, token, stamp)
    log = report.setdefault(f"trainer {i}", [])
    try:
        await v.connect("training")
        for label, value in TRAINER_SETTINGS.items():
            v.set_number(label, value)
        await v.click("Start")
        state = job_state(v)
        log.append(f"start: {state}")
        if state not in ("running", "queued"):
            report["lost"] += 1
            log.append("error text: " + v.text()[-300:])
            return
        report["started"] += 1
        for r in range(reloads):
            await asyncio.sleep(3)
            await v.close()  # the reload: this websocket is gone ...
            v = Visitor(url, address, token, stamp)  # ... and the same browser opens a new one
            await v.connect("training")
            state = job_state(v)
            log.append(f"reload {r + 1}: {state} {v.progress()}")
            if state in ("none", "lost", "unknown"):
                report["lost"] += 1
                return
            report["reattached"] += 1
        while time.monotonic() < until:
            await asyncio.sleep(2)
            await v.rerun()
            state = job_state(v)
            if state not in ("running", "queued"):
                break
        log.append(f"end: {state}")
        if state in ("finished", "time limit"):  # the time limit hands the model over: kept, not lost
            report["finished" if state == "finished" else "time_limited"] += 1
        else:
            report["lost"] += 1
    except Exception as e:  # noqa: BLE001
        report["errors"].append(f"trainer {i}: {type(e).__name__}: {str(e)[:80]}")
        report["lost"] += 1
    finally:
        await v.close()


async def main_async(args) -> dict:
    env = {"GLASS_TRUST_PROXY": "1", "GLASS_TRAINING_MAX_SECONDS": str(args.max_seconds)}
    server = start_app(log=Path("/tmp") / "glass-abuse.log", timeout=120, extra_env=env)
    print(f"server {server.url} (log {server.log})", flush=True)
    out: dict = {
        "flood": {"accepted": 0, "refused": 0, "other": 0, "retries": 0, "accepted_later": 0, "errors": []},
        "trainers": {"started": 0, "reattached": 0, "finished": 0, "time_limited": 0, "lost": 0, "errors": []},
    }
    try:
        with Memory(server.proc.pid) as mem:
            warm = Visitor(server.url, "10.9.9.9")
            await warm.connect("training")  # the first run imports torch and loads the model
            await warm.close()
            rss_idle = mem.tree_rss()
            before: list[float] = []
            errors: list[str] = []
            t_end = time.monotonic() + args.before
            await asyncio.gather(
                *(student(server.url, i, t_end, before, errors, args.pause) for i in range(args.students))
            )
            print(f"before the attack: {len(before)} reruns, median {statistics.median(before):.3f} s", flush=True)
            during: list[float] = []
            t0 = time.monotonic()
            until = t0 + args.deadline
            students = [
                asyncio.create_task(student(server.url, i, until, during, errors, args.pause))
                for i in range(args.students)
            ]
            trainers = [
                asyncio.create_task(trainer(server.url, i, args.reloads, until, out["trainers"]))
                for i in range(args.trainers)
            ]
            hostile_report: dict = {}
            out["hostile"] = hostile_report
            hostiles = [asyncio.create_task(hostile(server.url, until, hostile_report))] if args.uploads else []
            await asyncio.sleep(1)
            flooding = asyncio.create_task(flood(server.url, args.flood, until, out["flood"], args.retry))
            await asyncio.gather(*trainers, *hostiles)
            out["flood"]["done"] = True
            opened = await flooding
            for s in students:
                s.cancel()
            await asyncio.gather(*students, return_exceptions=True)
            for v in opened:
                with contextlib.suppress(Exception):
                    await v.close()
            out["attack_seconds"] = time.monotonic() - t0
        out.update(
            before=before,
            during=during,
            student_errors=errors,
            peak_rss=mem.peak,
            idle_rss=rss_idle,
            samples=mem.samples,
        )
    finally:
        server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flood", type=int, default=60, help="sessions one client opens on the training page (<= 200)")
    ap.add_argument("--trainers", type=int, default=2, help="students who train and reload (<= 10)")
    ap.add_argument("--reloads", type=int, default=2, help="reloads per trainer (<= 20)")
    ap.add_argument("--students", type=int, default=4, help="students typing sentences meanwhile")
    ap.add_argument("--before", type=float, default=20, help="seconds of typing before the attack")
    ap.add_argument("--pause", type=float, default=0.5, help="seconds between a student's reruns")
    ap.add_argument("--deadline", type=float, default=300, help="the attack phase ends after this many seconds")
    ap.add_argument("--max-seconds", type=float, default=120, help="the server's time limit per training job")
    ap.add_argument("--retry", type=float, default=10, help="seconds between a flood session's Start presses")
    ap.add_argument("--no-uploads", dest="uploads", action="store_false", help="skip the hostile uploads")
    args = ap.parse_args(argv)
    args.flood, args.trainers, args.reloads = min(args.flood, 200), min(args.trainers, 10), min(args.reloads, 20)
    try:
        out = asyncio.run(asyncio.wait_for(main_async(args), timeout=args.deadline + args.before + 240))
    except TimeoutError:
        print("the run hit its overall time limit", file=sys.stderr)
        return 2
    b, d = out["before"], out["during"]
    f, t = out["flood"], out["trainers"]
    print(
        f"flood from one address: {args.flood} sessions pressed Start: {f['accepted']} accepted, {f['refused']} "
        f"refused, {f['other']} other; {f['retries']} more presses every {args.retry:g} s, {f['accepted_later']} "
        f"of them showing a running job; {len(f['errors'])} errors {f['errors'][:3]}"
    )
    print(
        f"trainers: {t['started']} started, {t['reattached']} re-attached after {args.reloads} reloads each, "
        f"{t['finished']} finished, {t['time_limited']} stopped by the time limit (model kept), jobs lost: "
        f"{t['lost']} {t['errors'][:3]}"
    )
    for k, v in t.items():
        if k.startswith("trainer "):
            print(f"  {k}: " + " | ".join(v))
    if b and d:
        mb, md = statistics.median(b), statistics.median(d)
        pb, pd = pct(b, 0.95), pct(d, 0.95)
        print(
            f"other students' reruns: before median {mb:.3f} s / p95 {pb:.3f} s ({len(b)}); during the attack "
            f"median {md:.3f} s / p95 {pd:.3f} s ({len(d)}): ratio median {md / mb:.2f}x, p95 {pd / pb:.2f}x; "
            f"errors {len(out['student_errors'])}"
        )
    print(
        f"server memory (server + training workers, resident): after warm-up {out['idle_rss'] / 1e6:,.0f} MB, "
        f"peak {out['peak_rss'] / 1e6:,.0f} MB ({out['samples']} samples, attack {out['attack_seconds']:.0f} s)"
    )
    for k, v in out.get("hostile", {}).items():
        print(f"hostile uploads: {k}: {v}")
    return 0 if t["lost"] == 0 and t["started"] == args.trainers else 1


if __name__ == "__main__":
    sys.exit(main())
