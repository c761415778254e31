"""Train your own: the paper's recipe, live, in the background of this session only.

Session-state keys of this page (all per session): `training_job` (the `ui.jobs.Job`),
`training_owner` (this session's token for the job manager), `training_adopted` (id of the job
whose model became "my model"), `training_error`, `training_corpus` (the uploaded corpus' bytes),
`training_model_msg`, and the widgets' `training_*` keys. The finished model goes to `my_model` /
`my_model_key` (see ui/state.py) and `model` is set to "mine" when that is allowed at that moment.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import PurePath

import streamlit as st

from model.checkpoint import MAX_BYTES, CheckpointError, from_bytes, to_bytes
from model.data import MIN_PAIRS, CorpusError, langs, parse_corpus, split_pairs
from ui import jobs, shell
from ui.state import init_state
from ui.widgets import matrix, md
from viz import training as vt

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare

init_state()
ss = st.session_state

JOB, ADOPTED, OWNER, ERROR = jobs.JOB_KEY, jobs.ADOPTED_KEY, "training_owner", "training_error"
CORPUS, PARSED, MODEL_MSG = "training_corpus", "_training_parsed", "training_model_msg"
CORPUS_MAX_MB, MODEL_MAX_MB = 2, MAX_BYTES // (1024 * 1024)
DIRECTIONS = {"en-fr": "English → French", "fr-en": "French → English"}
KINDS = {"enc_self": "encoder self-attention", "dec_self": "decoder self-attention (masked)",
         "cross": "encoder-decoder (cross) attention"}
COREF = {"en": ("it", ("animal", "street")), "fr": ("il", ("animal", "rue"))}  # pronoun, its two candidates
D = jobs.DEFAULTS
SETTINGS = {  # widget key -> TrainConfig field
    "training_direction": "direction", "training_n_layers": "n_layers", "training_n_heads": "n_heads",
    "training_d_model": "d_model", "training_d_ff": "d_ff", "training_dropout": "dropout",
    "training_batch_size": "batch_size", "training_steps": "steps", "training_warmup": "warmup",
    "training_lr_scale": "lr_scale", "training_label_smoothing": "label_smoothing", "training_seed": "seed",
    "training_eval_every": "eval_every",
}
for _key, _field in SETTINGS.items():
    ss.setdefault(_key, getattr(D, _field))
ss.setdefault("training_no_mask", False)
ss.setdefault("training_probe_every", jobs.DEFAULT_PROBE_EVERY)
ss.setdefault("training_data", "toy")
ss.setdefault(OWNER, uuid.uuid4().hex)


# --- State helpers and callbacks (callbacks run before the script, so they may set widget keys) --


def select_mine() -> None:
    """Show "my model" on every page (from a callback: Streamlit allows changing the sidebar's choice there)."""
    ss["model"] = "mine"
    ss[jobs.SWITCHED_KEY] = True


def adopt_finished() -> bool:
    return jobs.adopt_finished(ss)


def settings() -> dict:
    out = {f: ss[k] for k, f in SETTINGS.items()}
    out["look_ahead_mask"] = not ss["training_no_mask"]
    return out


def probes() -> list[str]:
    return [line.strip() for line in str(ss.get("training_probes", "")).splitlines() if line.strip()]


def corpus():
    """(ParsedCorpus or None, error message or None) of the uploaded file in the chosen direction."""
    up = ss.get(CORPUS)
    if up is None:
        return None, None
    src_lang, tgt_lang = langs(ss["training_direction"])
    memo = ss.get(PARSED)
    if memo is None or memo[0] != (up["sha"], src_lang):
        try:
            memo = ((up["sha"], src_lang), parse_corpus(up["data"], up["name"], src_lang=src_lang,
                                                        tgt_lang=tgt_lang), None)
        except CorpusError as e:
            memo = ((up["sha"], src_lang), None, str(e))
        ss[PARSED] = memo
    return memo[1], memo[2]


def corpus_profile(parsed) -> jobs.DataProfile:
    """Sizes of the uploaded corpus in the chosen direction (computed once per file and direction)."""
    key = (ss[CORPUS]["sha"], ss["training_direction"])
    memo = ss.get("_training_profile")
    if memo is None or memo[0] != key:
        memo = (key, jobs.profile(split_pairs(parsed.pairs), ss["training_direction"]))
        ss["_training_profile"] = memo
    return memo[1]


def chosen_data():
    """(data dict or None for the toy set, label, sha256)."""
    parsed, _ = corpus()
    if ss["training_data"] == "upload" and parsed is not None:
        up = ss[CORPUS]
        return split_pairs(parsed.pairs), f"{up['name']} ({len(parsed.pairs)} pairs)", up["sha"]
    return None, "the toy set", None


def on_start() -> None:
    ss.pop(ERROR, None)
    data, label, sha = chosen_data()
    try:
        job = jobs.make_job(settings(), probes=probes(), probe_every=int(ss["training_probe_every"]), data=data,
                            data_label=label, data_sha256=sha, session_id=jobs.current_session_id(),
                            owner=ss[OWNER], name="my model")
        jobs.get_manager().submit(job)
    except (jobs.SettingsError, jobs.JobRefused) as e:
        ss[ERROR] = str(e)
        return
    ss[JOB] = job


def on_stop() -> None:
    job = ss.get(JOB)
    if job is not None:
        job.stop("stopped by you")
        if job.join(timeout=3.0):  # it stops after the current step: adopt here, where the sidebar may change
            adopt_finished()


def on_corpus_upload() -> None:
    f = ss.get("training_corpus_upload")
    ss.pop(PARSED, None)
    if f is None:
        ss.pop(CORPUS, None)
        ss["training_data"] = "toy"
        return
    data = f.getvalue()
    ss[CORPUS] = {"name": f.name, "data": data, "sha": hashlib.sha256(data).hexdigest()}
    ss["training_data"] = "upload"


def on_model_upload() -> None:
    files = ss.get("training_model_upload") or []
    if not files:
        ss.pop(MODEL_MSG, None)
        return
    weights = [f for f in files if f.name.lower().endswith(".safetensors")]
    meta = [f for f in files if f.name.lower().endswith(".json")]
    if len(weights) != 1 or len(meta) != 1:
        names = ", ".join(f.name for f in files)
        ss[MODEL_MSG] = ("warning", "A checkpoint is two files: exactly one .safetensors and one .json "
                                    f"(got: {names}). Select both at once.")
        return
    total = weights[0].size + meta[0].size
    if total > MAX_BYTES:
        ss[MODEL_MSG] = ("error", f"This checkpoint cannot be used: it is {total / 2**20:.1f} MB; the limit is "
                                  f"{MAX_BYTES / 2**20:.0f} MB.")
        return
    try:
        bundle = from_bytes(weights[0].getvalue(), meta[0].getvalue(), name=PurePath(weights[0].name).stem)
    except CheckpointError as e:
        ss[MODEL_MSG] = ("error", f"This checkpoint cannot be used: {e}.")
        return
    jobs.use_model(ss, bundle)
    ss[MODEL_MSG] = ("success", f"Loaded **{md(bundle.name)}** ({bundle.direction}, d_model {bundle.config.d_model}, "
                                f"{bundle.config.n_enc_layers}+{bundle.config.n_dec_layers} layers): it is now "
                                "\"My model\" on every page.")


def on_use_mine() -> None:
    select_mine()


# A job that ended while this session was elsewhere: adopt its model, then redraw with it in the sidebar.
if adopt_finished():
    st.rerun()

job = ss.get(JOB)
busy = job is not None and job.active

# --- Page -------------------------------------------------------------------------------------

st.title("Train your own Transformer")
st.markdown(
    "Press **Start** and watch the paper's recipe teach a small Transformer the toy translation set: Adam, "
    "the warm-up learning-rate schedule, label smoothing and dropout. Training runs in the background for "
    "**your session only**; you can visit the other pages meanwhile and come back. When it ends (or when you "
    "stop it) the model becomes **My model** in the sidebar, beside the shipped one, and every page can "
    "show its tensors.")

# --- 1. Data ------------------------------------------------------------------------------------

st.header("1. Data")
direction = ss["training_direction"]
src_lang, tgt_lang = langs(direction)
toy = jobs.toy_profile(direction)
parsed, corpus_error = corpus()
options = ["toy"] + (["upload"] if parsed is not None else [])
if ss["training_data"] not in options:
    ss["training_data"] = "toy"
labels = {"toy": f"The toy set ({toy.n_train:,} training pairs, {toy.n_heldout:,} held out)"}
if parsed is not None:
    labels["upload"] = f"My corpus ({ss[CORPUS]['name']}, {len(parsed.pairs):,} pairs)"
st.radio("Train on", options, key="training_data", horizontal=True, disabled=busy, format_func=labels.get)
with st.expander("Upload your own parallel corpus", expanded=ss.get(CORPUS) is not None):
    st.markdown(f"A UTF-8 text file with one sentence pair per line: **{src_lang}** sentence, then its "
                f"**{tgt_lang}** translation, separated by a tab (.tsv) or a comma (.csv). At least {MIN_PAIRS} "
                f"pairs, at most {CORPUS_MAX_MB} MB; every 10th pair is held out for testing.")
    st.file_uploader("Corpus file", type=["tsv", "csv", "txt"], key="training_corpus_upload",
                     on_change=on_corpus_upload, max_upload_size=CORPUS_MAX_MB, disabled=busy)
    if corpus_error:
        st.error(corpus_error)
    elif parsed is not None:
        for w in parsed.warnings:
            st.warning(w)
        try:
            prof = corpus_profile(parsed)
            jobs.check_corpus_profile(prof)
        except jobs.SettingsError as e:
            st.error(str(e))
        else:
            c = st.columns(5)
            c[0].metric("pairs", f"{len(parsed.pairs):,}")
            c[1].metric("training / held out", f"{prof.n_train:,} / {prof.n_heldout:,}")
            c[2].metric(f"{src_lang} words", f"{prof.src_vocab - 4:,}")
            c[3].metric(f"{tgt_lang} words", f"{prof.tgt_vocab - 4:,}")
            c[4].metric("longest (tokens)", prof.longest)
        st.caption(f"Preview: the first {min(20, len(parsed.pairs))} pairs "
                   f"({'tab' if parsed.delimiter == chr(9) else 'comma'}-separated"
                   f"{', header skipped' if parsed.header else ''}).")
        st.dataframe({src_lang: [p.src for p in parsed.pairs[:20]], tgt_lang: [p.tgt for p in parsed.pairs[:20]]})

# --- 2. Settings ----------------------------------------------------------------------------------

st.header("2. Settings")
b = jobs.BOUNDS
c1, c2, c3 = st.columns(3)
with c1:
    st.subheader("Model")
    st.selectbox("Direction", list(DIRECTIONS), key="training_direction", format_func=DIRECTIONS.get, disabled=busy)
    st.number_input("Layers (encoder and decoder each)", *map(int, b["n_layers"]), step=1, key="training_n_layers",
                    disabled=busy, help="The paper uses 6 + 6.")
    st.number_input("Heads", *map(int, b["n_heads"]), step=1, key="training_n_heads", disabled=busy,
                    help="d_model must be divisible by the number of heads: d_k = d_model / heads.")
    st.number_input("d_model", *map(int, b["d_model"]), step=2, key="training_d_model", disabled=busy,
                    help="Width of every token vector (the paper: 512).")
    st.number_input("d_ff", *map(int, b["d_ff"]), step=8, key="training_d_ff", disabled=busy,
                    help="Hidden width of the feed-forward net (the paper: 2048).")
    st.slider("Dropout", *b["dropout"], step=0.05, key="training_dropout", disabled=busy)
with c2:
    st.subheader("Recipe")
    st.number_input("Batch size (sentence pairs)", *map(int, b["batch_size"]), step=8, key="training_batch_size",
                    disabled=busy)
    st.number_input("Steps", *map(int, b["steps"]), step=50, key="training_steps", disabled=busy)
    st.number_input("Warm-up steps", *map(int, b["warmup"]), step=10, key="training_warmup", disabled=busy,
                    help="The paper: 4000 of 100k steps.")
    st.number_input("Learning-rate scale", float(b["lr_scale"][0]), float(b["lr_scale"][1]), step=0.5,
                    format="%g", key="training_lr_scale", disabled=busy,
                    help="Factor in front of the paper's formula. 1 is the paper; try 1e6 to see training diverge.")
    st.slider("Label smoothing", *b["label_smoothing"], step=0.05, key="training_label_smoothing", disabled=busy)
    st.number_input("Seed", *map(int, b["seed"]), step=1, key="training_seed", disabled=busy)
    st.caption("Fixed, as in the paper (section 5.3): Adam with β₁ = 0.9, β₂ = 0.98, ε = 10⁻⁹; dropout on the "
               "embeddings and every sub-layer output. Label smoothing ε_ls moves that share of the target's "
               "probability from the right word to the whole vocabulary.")
with c3:
    st.subheader("Watching")
    st.number_input("Evaluate on held-out pairs every … steps (0: only at the end)", *map(int, b["eval_every"]),
                    step=10, key="training_eval_every", disabled=busy)
    st.number_input("Record the probes' attention every … steps", 1, 5000, step=5, key="training_probe_every",
                    disabled=busy)
    data_now, _, _ = chosen_data()
    auto = "\n".join(jobs.default_probes(direction, data_now))
    if ss.get("training_probes") in (None, ss.get("_training_probes_auto")):
        ss["training_probes"] = auto  # follow the direction / corpus until the student edits it
    ss["_training_probes_auto"] = auto
    st.text_area(f"Probe sentences ({src_lang}, one per line, at most {jobs.MAX_PROBES})", key="training_probes",
                 height=100, disabled=busy)
    st.toggle("Train without the look-ahead mask", key="training_no_mask", disabled=busy,
              help="The decoder may then read the word it must predict: training loss near zero, held-out "
                   "translations failing, decoder attention above the diagonal.")

problem = None
try:
    tcfg = jobs.make_config(settings())
except jobs.SettingsError as e:
    tcfg, problem = None, str(e)
if problem:
    st.error(problem)
else:
    prof = corpus_profile(corpus()[0]) if data_now is not None else toy
    mem = jobs.estimate_memory(tcfg, prof, n_probes=max(1, len(probes())))
    worst = jobs.worst_case(direction)
    manager = jobs.get_manager()
    st.markdown(
        f"**This model:** d_k = d_model / heads = {tcfg.d_model} / {tcfg.n_heads} = {tcfg.d_model // tcfg.n_heads}; "
        f"{mem.parameters:,} parameters; peak learning rate {tcfg.peak_lr:.2e} at step {tcfg.warmup}.  \n"
        f"**Memory (estimate):** {mem.total / 1e6:,.0f} MB for this run: weights, gradients, Adam's two moments "
        f"and copies {mem.state_bytes / 1e6:,.1f} MB, activations kept for the backward pass of the largest batch "
        f"{mem.activation_bytes / 1e6:,.1f} MB, attention snapshots ≤ {mem.snapshot_bytes / 1e6:,.1f} MB. "
        f"The largest allowed settings need about {worst.total / 1e6:,.0f} MB; a run above "
        f"{jobs.MAX_JOB_BYTES / 1e6:,.0f} MB is refused.  \n"
        f"**This server** trains at most {manager.max_running} model(s) at once (one CPU thread each, at a lower "
        f"priority than the pages; more wait in a queue) and stops a run after {manager.max_seconds / 60:.0f} "
        f"minutes.")
    with st.expander("The learning-rate schedule of these settings", expanded=job is None):
        st.latex(r"\text{lrate} = \text{scale}\cdot d_{\text{model}}^{-0.5}\cdot"
                 r"\min\left(\text{step}^{-0.5},\ \text{step}\cdot\text{warmup}^{-1.5}\right)")
        st.plotly_chart(vt.lr_figure(tcfg.steps, tcfg.d_model, tcfg.warmup, tcfg.lr_scale), key="training_lr_preview",
                        config={"displayModeBar": False})

b1, b2, _ = st.columns([1, 1, 4])
b1.button("Start", type="primary", on_click=on_start, disabled=busy, key="training_start", icon=":material/play_arrow:")
b2.button("Stop", on_click=on_stop, disabled=not busy, key="training_stop", icon=":material/stop:")
if ss.get(ERROR):
    st.error(ss[ERROR])

# --- 3. Training (live) ---------------------------------------------------------------------------

st.header("3. Training")


def step_slider(steps: list[int]) -> int:
    """The snapshot to show: the newest one, unless the student moved the slider back.

    While following, the slider is a new widget (its key names the newest step) each time a snapshot
    arrives, so the server never overwrites a value the browser holds; a move pins a step.
    """
    if len(steps) == 1:
        return steps[0]
    pinned = ss.get("training_probe_pick")
    follow = ss.get("training_probe_follow", True) or pinned not in steps
    key = f"training_probe_step_{steps[-1]}" if follow else "training_probe_step_pinned"

    def picked() -> None:
        ss["training_probe_pick"] = ss[key]
        ss["training_probe_follow"] = ss[key] == steps[-1]  # back at the end: follow again

    return st.select_slider("Training step", options=steps, value=steps[-1] if follow else pinned, key=key,
                            on_change=picked, help="Move it back to see the attention earlier in training; move it "
                                                   "to the end to follow the newest snapshot again.")


def attention_section(v: jobs.JobView) -> None:
    """The probe sentences' attention, recorded during training, with a slider through the steps."""
    if not v.snapshots:
        return
    st.subheader("Attention forming")
    st.caption(f"Every {v.probe_every} steps the job runs the probe sentences through the model and keeps "
               "its attention weights. The decoder reads the reference translation when the data has one, as "
               "in training. Move the slider to scrub through training.")
    c = st.columns([3, 3, 1, 1])
    pi = c[0].selectbox("Probe sentence", range(len(v.probes)), format_func=lambda i: v.probes[i],
                        key="training_probe")
    kind = c[1].selectbox("Attention", list(KINDS), format_func=KINDS.get, key="training_probe_kind")
    mine = [s for s in v.snapshots if s.probe == pi]
    if not mine:
        return
    n_layers, n_heads = mine[0].enc_self.shape[:2] if kind == "enc_self" else mine[0].dec_self.shape[:2]
    if ss.get("training_probe_layer", 0) >= n_layers:
        ss["training_probe_layer"] = 0
    if ss.get("training_probe_head", "mean") not in ["mean", *range(n_heads)]:
        ss["training_probe_head"] = "mean"
    layer = c[2].selectbox("Layer", range(n_layers), key="training_probe_layer")
    choice = c[3].selectbox("Head", ["mean", *range(n_heads)], key="training_probe_head", format_func=str)
    head = None if choice == "mean" else choice
    steps = [s.step for s in mine]
    step = step_slider(steps)
    snap = mine[steps.index(step)]
    queries, keys = snap.labels(kind)
    w = vt.head_weights(snap.weights(kind), layer, head)
    L, H, Tq, Tk = snap.weights(kind).shape
    left, right = st.columns([3, 2])
    with left:
        matrix(w, list(keys), list(queries), "weights", key="training_probe_heatmap",
               title=f"{KINDS[kind]}, layer {layer}, {'mean of the heads' if head is None else f'head {head}'}, "
                     f"step {snap.step}",
               shape=f"[{Tq}, {Tk}] of [{L}, {H}, {Tq}, {Tk}]", x_title="key (attended to)", y_title="query")
        st.markdown(f"**Translation at step {snap.step}:** {md(snap.translation) or '*(empty)*'}")
    with right:
        pronoun, candidates = COREF[src_lang]
        qi = vt.find_token(snap.src_labels, pronoun)
        cols = {f"{pronoun} → {word}": vt.find_token(snap.src_labels, word) for word in candidates}
        if kind == "enc_self" and qi is not None and all(k is not None for k in cols.values()):
            xs, series = vt.attention_timeline(mine, "enc_self", layer, head, qi, cols)
            st.plotly_chart(vt.timeline_figure(xs, series, f"Where does “{pronoun}” look? (layer {layer})",
                                               "attention weight", current=snap.step),
                            key="training_coref_timeline", config={"displayModeBar": False})
            st.caption(f"The row of “{pronoun}” in the encoder's self-attention: its weight on "
                       f"“{candidates[0]}” and on “{candidates[1]}” at every recorded step.")
        elif kind == "dec_self":
            xs, ys = vt.future_timeline(mine, layer, head)
            st.plotly_chart(vt.timeline_figure(xs, {"weight above the diagonal": ys},
                                               f"Looking ahead (decoder layer {layer})", "mean weight on later words",
                                               current=snap.step),
                            key="training_future_timeline", config={"displayModeBar": False})
            st.caption("Mean over query rows of the attention on later positions: exactly 0 with the look-ahead "
                       "mask; a decoder trained without it learns to read the word it should predict.")


def live_status() -> None:
    """The job's state, progress bar and headline numbers: cheap, so it polls every second while running."""
    job = ss.get(JOB)
    if job is None:
        st.info("No training yet in this session. Choose the settings above and press **Start**.")
        return
    if job.done and ss.get(ADOPTED) != job.id:
        adopt_finished()
        st.rerun()  # the whole page: polling off, "My model" in the sidebar
    v = job.view()
    t = v.tcfg
    if v.state == "queued":
        running, queued = jobs.get_manager().counts()
        st.info(f"Waiting for a free slot: you are **number {v.position}** in the queue ({running} job(s) "
                f"training, {queued} waiting). Training starts by itself.")
        return
    if v.state == "running":
        left = f" · about {v.eta_s:,.0f} s left" if v.eta_s is not None else ""
        rate = f" · {v.steps_per_s:.1f} steps/s" if v.steps_per_s else ""
        st.progress(v.progress, text=f"Step {v.step} of {t.steps}{rate}{left}")
    elif v.state == "finished":
        st.success(f"Training finished: {v.step} steps in {v.seconds:.0f} s. Your model is **My model** in the "
                   "sidebar.")
    elif v.state == "stopped":
        st.warning(f"Training stopped ({v.reason}) after {v.step} of {t.steps} steps."
                   + (" The model as it was is **My model** in the sidebar." if job.result is not None else ""))
    elif v.state == "failed":
        st.error(v.error or "Training failed.")
        st.info("Nothing was lost: change the settings (for example a learning-rate scale of 1 and a warm-up of a "
                "few hundred steps) and press Start again.")
    if v.state != "running" and v.step:
        st.progress(v.progress, text=f"Step {v.step} of {t.steps}")
    st.caption(f"Data: {md(v.data_label)} · {DIRECTIONS[t.direction]} · {t.n_layers}+{t.n_layers} layers, "
               f"{t.n_heads} heads, d_model {t.d_model}, d_ff {t.d_ff} · batch {t.batch_size} · "
               f"{v.parameters or 0:,} parameters · look-ahead mask {'on' if t.look_ahead_mask else 'OFF'}")
    if not t.look_ahead_mask:
        st.warning("This run trains **without the look-ahead mask**: the decoder can read the very word it must "
                   "predict. Watch the training loss drop towards its floor while the held-out translations "
                   "(which must be produced word by word, without the future) fail.")
    if not v.steps:
        st.caption("Building the model…")
        return
    last = v.evals[-1] if v.evals else None
    m = st.columns(5)
    m[0].metric("step", f"{v.step} / {t.steps}")
    m[1].metric("training loss (smoothed)", f"{vt.ema(v.losses)[-1]:.3f}")
    m[2].metric("held-out exact match", f"{100 * last.exact_match:.1f} %" if last else "—")
    m[3].metric("held-out BLEU", f"{last.bleu:.1f}" if last else "—")
    m[4].metric("steps / s", f"{v.steps_per_s:.1f}" if v.steps_per_s else "—")


def live_figures() -> None:
    """Curves, translations and attention: redrawn every 3 s while running (each redraw builds ~6 figures)."""
    job = ss.get(JOB)
    if job is None or job.state == "queued":
        return
    v = job.view()
    t = v.tcfg
    if not v.steps:
        return
    ev_steps = [e.step for e in v.evals]
    c1, c2 = st.columns(2)
    with c1:
        st.plotly_chart(vt.loss_figure(v.steps, v.losses, ev_steps, [e.heldout_loss for e in v.evals]),
                        key="training_loss", config={"displayModeBar": False})
    with c2:
        st.plotly_chart(vt.loss_figure(v.steps, v.cross_entropy, ev_steps,
                                       [e.heldout_cross_entropy for e in v.evals],
                                       title="Cross-entropy without smoothing (can reach 0)",
                                       what="cross-entropy"),
                        key="training_ce", config={"displayModeBar": False})
    st.caption("The optimiser minimises the label-smoothed loss (left): with smoothing it cannot go below the "
               "entropy of the smoothed target. The plain cross-entropy (right) reaches 0 when the model is sure "
               "and right. Held-out losses are teacher-forced, like training.")
    c3, c4 = st.columns(2)
    with c3:
        st.plotly_chart(vt.lr_figure(t.steps, t.d_model, t.warmup, t.lr_scale, current=v.step), key="training_lr",
                        config={"displayModeBar": False})
    with c4:
        if v.evals:
            st.plotly_chart(vt.metrics_figure(ev_steps, [e.exact_match for e in v.evals], [e.bleu for e in v.evals],
                                              [e.coref_accuracy for e in v.evals]),
                            key="training_metrics", config={"displayModeBar": False})
        else:
            st.info(f"Held-out exact match and BLEU appear at the first evaluation (step {t.eval_every or t.steps}).")
    if v.evals:
        st.subheader("Held-out sentences, translated at each evaluation")
        st.dataframe(vt.samples_table(v.evals), hide_index=True)
    if v.snapshots:
        st.subheader("The probe sentences, translated as training goes")
        st.dataframe(vt.probe_table(v.snapshots, v.probes), hide_index=True)
    attention_section(v)


# Polling only while this session's job is queued or running (or has just ended and is not handed over
# yet): the status every second, the figures every 3 s. Idle sessions cost the server nothing. Each
# redraw of the figures costs the browser far more than the server (a training page polling twice as
# often took most of a core in Chromium), so the intervals serve a projector laptop as well.
polling = job is not None and (job.active or (job.done and ss.get(ADOPTED) != job.id))
running = job is not None and job.state == "running"
st.fragment(live_status, run_every=(1.0 if running else 2.0) if polling else None)()
st.fragment(live_figures, run_every=3.0 if running else None)()

# --- 4. My model -----------------------------------------------------------------------------------

st.header("4. My model")
mine = ss.get("my_model")
if mine is None:
    st.caption("No model of your own yet: train one above, or upload one below.")
else:
    cfg = mine.config
    done = (mine.meta.get("training") or {}).get("steps_done")
    metrics = mine.meta.get("metrics") or {}
    st.markdown(f"**{md(mine.name)}** · {DIRECTIONS.get(mine.direction, mine.direction)} · {cfg.n_enc_layers}+"
                f"{cfg.n_dec_layers} layers, {cfg.n_heads} heads, d_model {cfg.d_model}, d_ff {cfg.d_ff}"
                + (f" · {done} steps" if done is not None else "")
                + (f" · held-out exact match {100 * metrics['exact_match']:.1f} % (step {metrics.get('step')})"
                   if metrics.get("exact_match") is not None else ""))
    if ss.get("model") == "mine":
        st.success("Every page now shows **My model** (change it in the sidebar under *Model*).")
    else:
        st.button("Use my model on every page", on_click=on_use_mine, key="training_use_mine",
                  icon=":material/swap_horiz:")
    d1, d2, _ = st.columns(3)
    stem = "my_model"
    d1.download_button("Download weights (.safetensors)", data=lambda b=mine: to_bytes(b)[0],
                       file_name=f"{stem}.safetensors", mime="application/octet-stream", on_click="ignore",
                       key="training_download_weights", icon=":material/download:")
    d2.download_button("Download config (.json)", data=lambda b=mine: to_bytes(b)[1], file_name=f"{stem}.json",
                       mime="application/json", on_click="ignore", key="training_download_json",
                       icon=":material/download:")

st.file_uploader("Upload a model: its .safetensors and .json files together", type=["safetensors", "json"],
                 accept_multiple_files=True, key="training_model_upload", on_change=on_model_upload,
                 max_upload_size=MODEL_MAX_MB,
                 help="Checked before use: format, size, and every tensor's shape against the JSON's config. "
                      "Weights are read with safetensors, never unpickled.")
if ss.get(MODEL_MSG):
    level, text = ss[MODEL_MSG]
    getattr(st, level)(text)
