"""The training page's session state: its keys, its defaults, and the callbacks that change it.

Session-state keys (all per session): `training_job` (the `training.Job` this session shows: its
browser's job, as the training service keeps it), `training_owner` (a per-session token, the job's owner
when the browser has no identity of its own), `_training_identity` (this session's
`serving.identity.Identity`: client address, hashed browser id, session id), `training_adopted` (id of the job
whose model became "my model"), `training_switched`, `training_error`, `training_corpus` (the
uploaded corpus' bytes), `training_model_msg`, the memos `_training_parsed` / `_training_profile`
/ `_training_probes_auto`, and the page's widgets' `training_*` keys. The finished model goes to
`my_model` / `my_model_key` (see ui/state.py) and `model` is set to "mine" when Streamlit allows
that at that moment.

Callbacks (`on_*`) run before the script, so they may set widget keys and the sidebar's choice.

A job belongs to the browser (see `training.local_pool`): `job()` asks the service for this browser's job on
every run, so a reload or a second tab re-attaches to a running job and its figures, and a job started
by a burst of Start messages is always the one shown and stopped. `on_start` is idempotent.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import PurePath

import streamlit as st

import training
from model import checkpoint, train_settings
from model.checkpoint import MAX_BYTES, CheckpointError, from_bytes
from model.data import CorpusError, langs, parse_corpus, split_pairs
from model.probes import default_probes
from model.train import TrainConfig
from model.train_settings import (
    DEFAULT_PROBE_EVERY,
    DEFAULTS,
    DataProfile,
    MemoryEstimate,
    SettingsError,
    estimate_memory,
    make_config,
    profile,
    toy_profile,
    worst_case,
)
from serving.identity import Identity
from training import JobRefused, make_job
from ui.models import ADOPTED_KEY, SWITCHED_KEY, use_model
from ui.session_info import current_identity, streamlit_session_alive
from ui.widgets import md

JOB_KEY = "training_job"  # st.session_state key of the Job this session shows
IDENTITY_KEY = "_training_identity"  # this session's identity.Identity (computed once per session)
OWNER_KEY, ERROR_KEY, CORPUS_KEY, MODEL_MSG_KEY = (
    "training_owner",
    "training_error",
    "training_corpus",
    "training_model_msg",
)
PARSED_KEY, PROFILE_KEY = "_training_parsed", "_training_profile"
CORPUS_MAX_MB, MODEL_MAX_MB = 2, MAX_BYTES // (1024 * 1024)
SETTINGS = {  # widget key -> TrainConfig field
    "training_direction": "direction",
    "training_n_layers": "n_layers",
    "training_n_heads": "n_heads",
    "training_d_model": "d_model",
    "training_d_ff": "d_ff",
    "training_dropout": "dropout",
    "training_batch_size": "batch_size",
    "training_steps": "steps",
    "training_warmup": "warmup",
    "training_lr_scale": "lr_scale",
    "training_label_smoothing": "label_smoothing",
    "training_seed": "seed",
    "training_eval_every": "eval_every",
}


class _Uploads:
    """The last corpus each browser uploaded, kept by this process so that a reload (a new session) still offers
    it; at most `size` browsers (the least recent forgotten first), each file within the upload limit (2 MB).
    Keyed by the browser's identity, as its training job is: another browser never sees it."""

    def __init__(self, size: int = 32) -> None:
        self.size, self._lock, self._by = size, threading.Lock(), OrderedDict[str, dict]()

    def get(self, browser: str) -> dict | None:
        with self._lock:
            return self._by.get(browser)

    def put(self, browser: str, corpus: dict | None) -> None:
        with self._lock:
            self._by.pop(browser, None)
            if corpus is not None:
                self._by[browser] = corpus
                while len(self._by) > self.size:
                    self._by.popitem(last=False)


_uploads = _Uploads()


def init() -> None:
    """The page's defaults (kept once set, so a choice survives a visit to another page)."""
    ss = st.session_state
    for key, field in SETTINGS.items():
        ss.setdefault(key, getattr(DEFAULTS, field))
    ss.setdefault("training_no_mask", False)
    ss.setdefault("training_probe_every", DEFAULT_PROBE_EVERY)
    ss.setdefault(OWNER_KEY, uuid.uuid4().hex)
    if CORPUS_KEY not in ss and (kept := _uploads.get(owner())) is not None:  # a reload keeps the upload
        ss[CORPUS_KEY] = kept
        ss.setdefault("training_data", "upload")
    ss.setdefault("training_data", "toy")
    job()  # this browser's job, if any (a reload, another tab)


def identity() -> Identity:
    """Who this session is for the training service (client, browser, session), computed once per session."""
    ss = st.session_state
    ident = ss.get(IDENTITY_KEY)
    if ident is None:
        ident = ss[IDENTITY_KEY] = current_identity()
    return ident


def owner() -> str:
    """The owner of this session's jobs: its browser, or (no browser identity) this session alone."""
    ss = st.session_state
    return identity().browser or ss.setdefault(OWNER_KEY, uuid.uuid4().hex)


def service() -> training.TrainingService:
    """The server's training service, which asks Streamlit whether a session is still connected."""
    return training.service(streamlit_session_alive)


def job():
    """The job this session shows: its browser's latest job (attaching this session to it, so that it
    keeps the job alive), or the one it kept itself; None."""
    ss = st.session_state
    found = service().job_for(owner(), identity().session)
    if found is not None and found is not ss.get(JOB_KEY):
        ss[JOB_KEY] = found  # started in another tab of this browser, or before a reload: re-attached
    return ss.get(JOB_KEY)


# --- "My model" ------------------------------------------------------------------------------------


def adopt_finished(state=None, select: bool = True) -> bool:
    """When this session's job has ended, hand its model over as "my model" (once per job).

    True when something changed (the page then reruns so the sidebar shows it). A failed job has no
    model: it is only marked as seen.
    """
    state = st.session_state if state is None else state
    job = state.get(JOB_KEY)
    if job is None or not job.done or state.get(ADOPTED_KEY) == job.id:
        return False
    state[ADOPTED_KEY] = job.id
    if job.result is not None:
        use_model(state, job.result, select=select)
    return True


ADOPTED_ELSEWHERE = "Your model has finished training: choose “My model” in the sidebar to see it on every page."


def attach(page_name: str) -> None:
    """Start of every run of every page (app.py): this browser's training run is re-attached (a reload, another tab),
    and once it has ended its model becomes "my model" here, offered in the sidebar on every page and not only after
    a visit to the training page; a toast says so off that page. It is not chosen for the student: a teacher's
    choice moves the class, and a reload should not change what a page shows unasked."""
    job()
    if adopt_finished(select=False) and page_name != "training" and st.session_state.get("my_model") is not None:
        st.toast(ADOPTED_ELSEWHERE, icon=":material/model_training:")


def waiting_for_adoption() -> bool:
    """True while the job is queued or running, or has ended and its model is not handed over yet."""
    job = st.session_state.get(JOB_KEY)
    return job is not None and (job.active or (job.done and st.session_state.get(ADOPTED_KEY) != job.id))


def on_use_mine() -> None:
    """Show "my model" on every page (from a callback: Streamlit allows changing the sidebar's choice there)."""
    st.session_state["model"] = "mine"
    st.session_state[SWITCHED_KEY] = True


# --- What the widgets say ---------------------------------------------------------------------------


def settings() -> dict:
    """The `TrainConfig` fields the widgets set."""
    ss = st.session_state
    out = {f: ss[k] for k, f in SETTINGS.items()}
    out["look_ahead_mask"] = not ss["training_no_mask"]
    return out


def probes() -> list[str]:
    return [line.strip() for line in str(st.session_state.get("training_probes", "")).splitlines() if line.strip()]


def follow_default_probes(data) -> None:
    """The probe box follows the direction / corpus until the student edits it (call before drawing it)."""
    ss = st.session_state
    auto = "\n".join(default_probes(ss["training_direction"], data))
    if ss.get("training_probes") in (None, ss.get("_training_probes_auto")):
        ss["training_probes"] = auto
    ss["_training_probes_auto"] = auto


def corpus():
    """(ParsedCorpus or None, error message or None) of the uploaded file in the chosen direction."""
    ss = st.session_state
    up = ss.get(CORPUS_KEY)
    if up is None:
        return None, None
    src_lang, tgt_lang = langs(ss["training_direction"])
    memo = ss.get(PARSED_KEY)
    if memo is None or memo[0] != (up["sha"], src_lang):
        try:
            memo = (
                (up["sha"], src_lang),
                parse_corpus(up["data"], up["name"], src_lang=src_lang, tgt_lang=tgt_lang),
                None,
            )
        except CorpusError as e:
            memo = ((up["sha"], src_lang), None, str(e))
        ss[PARSED_KEY] = memo
    return memo[1], memo[2]


def corpus_profile(parsed) -> DataProfile:
    """Sizes of the uploaded corpus in the chosen direction (computed once per file and direction)."""
    ss = st.session_state
    key = (ss[CORPUS_KEY]["sha"], ss["training_direction"])
    memo = ss.get(PROFILE_KEY)
    if memo is None or memo[0] != key:
        memo = (key, profile(split_pairs(parsed.pairs), ss["training_direction"]))
        ss[PROFILE_KEY] = memo
    return memo[1]


def chosen_data():
    """(data dict or None for the toy set, label, sha256)."""
    ss = st.session_state
    parsed, _ = corpus()
    if ss["training_data"] == "upload" and parsed is not None:
        up = ss[CORPUS_KEY]
        return split_pairs(parsed.pairs), f"{up['name']} ({len(parsed.pairs)} pairs)", up["sha"]
    return None, "the toy set", None


# --- Callbacks ----------------------------------------------------------------------------------------


def on_start() -> None:
    """Start a run for this browser, unless one is queued or running already (then show that one)."""
    ss = st.session_state
    ss.pop(ERROR_KEY, None)
    current = job()
    if current is not None and current.active:  # a second click, a burst of messages, another tab
        return
    ident = identity()
    data, label, sha = chosen_data()
    try:
        new = make_job(
            settings(),
            probes=probes(),
            probe_every=int(ss["training_probe_every"]),
            data=data,
            data_label=label,
            data_sha256=sha,
            session_id=ident.session,
            owner=owner(),
            client=ident.client,
            name="my model",
        )
        ss[JOB_KEY] = service().submit(new)  # compare-and-set: the browser's one active job
    except (SettingsError, JobRefused) as e:
        ss[ERROR_KEY] = str(e)


def on_stop() -> None:
    current = job()
    if current is not None:
        current.stop("stopped by you")
        if current.join(timeout=3.0):  # it stops after the current step: adopt here, where the sidebar may change
            adopt_finished()


def on_corpus_upload() -> None:
    ss = st.session_state
    f = ss.get("training_corpus_upload")
    ss.pop(PARSED_KEY, None)
    if f is None:
        ss.pop(CORPUS_KEY, None)
        _uploads.put(owner(), None)
        ss["training_data"] = "toy"
        return
    data = f.getvalue()
    ss[CORPUS_KEY] = {"name": f.name, "data": data, "sha": hashlib.sha256(data).hexdigest()}
    _uploads.put(owner(), ss[CORPUS_KEY])
    ss["training_data"] = "upload"


def on_model_upload() -> None:
    ss = st.session_state
    files = ss.get("training_model_upload") or []
    if not files:
        ss.pop(MODEL_MSG_KEY, None)
        return
    weights = [f for f in files if f.name.lower().endswith(".safetensors")]
    meta = [f for f in files if f.name.lower().endswith(".json")]
    if len(weights) != 1 or len(meta) != 1:
        names = ", ".join(f.name for f in files)
        ss[MODEL_MSG_KEY] = (
            "warning",
            f"A checkpoint is two files: exactly one .safetensors and one .json (got: {names}). Select both at once.",
        )
        return
    total = weights[0].size + meta[0].size
    if total > MAX_BYTES:
        ss[MODEL_MSG_KEY] = (
            "error",
            f"This checkpoint cannot be used: it is {total / 2**20:.1f} MB; the limit is {MAX_BYTES / 2**20:.1f} MB.",
        )
        return
    try:
        bundle = from_bytes(weights[0].getvalue(), meta[0].getvalue(), name=PurePath(weights[0].name).stem)
    except CheckpointError as e:
        ss[MODEL_MSG_KEY] = ("error", f"This checkpoint cannot be used: {e}.")
        return
    use_model(ss, bundle)
    ss[MODEL_MSG_KEY] = (
        "success",
        f"Loaded **{md(bundle.name)}** ({bundle.direction}, d_model "
        f"{bundle.config.d_model}, {bundle.config.n_enc_layers}+"
        f'{bundle.config.n_dec_layers} layers): it is now "My model" on every page.',
    )


# --- What the settings would cost ---------------------------------------------------------------------


@dataclass(frozen=True)
class RunPreview:
    """What the page shows about the chosen settings before a run starts."""

    tcfg: TrainConfig
    memory: MemoryEstimate  # this run on the chosen data
    worst: MemoryEstimate  # the largest allowed settings on the toy set
    max_running: int  # jobs this server trains at once
    max_seconds: float  # its time limit per job
    max_job_bytes: int  # a run whose estimate is above this is refused
    checkpoint_bytes: int  # the checkpoint these settings would save (upper bound)
    max_checkpoint_bytes: int  # settings whose checkpoint would be larger are refused


def run_preview() -> RunPreview:
    """The chosen settings' config, memory and checkpoint size, and the server's limits; `SettingsError` if
    they cannot train (impossible settings, a model too large to save, a run over the memory limit)."""
    ss = st.session_state
    tcfg = make_config(settings())
    data, _, _ = chosen_data()
    prof = corpus_profile(corpus()[0]) if data is not None else toy_profile(ss["training_direction"])
    svc = service()
    train_settings.check_checkpoint_size(tcfg, prof)  # refused here, before Start, with the reason
    memory = estimate_memory(tcfg, prof, n_probes=max(1, len(probes())))
    train_settings.check_memory(memory)
    return RunPreview(
        tcfg,
        memory,
        worst_case(ss["training_direction"]),
        svc.max_running,
        svc.max_seconds,
        train_settings.MAX_JOB_BYTES,
        train_settings.checkpoint_bytes(tcfg, prof),
        checkpoint.MAX_BYTES,
    )
