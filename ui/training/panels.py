"""The training page's live panels: the job's status, its curves, and the probes' attention forming.

Each draws this session's job from a consistent copy (`job.view()`); the page runs `live_status` and
`live_figures` as fragments that poll only while the job is queued or running, and `my_model_card`
for the trained or uploaded model. The figures come from `viz.training`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import streamlit as st

from model.checkpoint import Bundle, to_bytes
from model.data import langs
from model.train_settings import SettingsError, check_corpus_profile
from training import JobView
from ui.classroom.board import share_run
from ui.models import ADOPTED_KEY
from ui.training.session import JOB_KEY, adopt_finished, corpus_profile, on_use_mine, service
from ui.training.session import job as browser_job
from ui.widgets import chart, figure, md, metrics_row
from viz import training as vt
from viz.heatmap import table

DIRECTIONS = {"en-fr": "English → French", "fr-en": "French → English"}
KINDS = {
    "enc_self": "encoder self-attention",
    "dec_self": "decoder self-attention (masked)",
    "cross": "encoder-decoder (cross) attention",
}
COREF = {"en": ("it", ("animal", "street")), "fr": ("il", ("animal", "rue"))}  # pronoun, its two candidates


def step_slider(steps: list[int]) -> int:
    """The snapshot to show: the newest one, unless the student moved the slider back.

    While following, the slider is a new widget (its key names the newest step) each time a snapshot
    arrives, so the server never overwrites a value the browser holds; a move pins a step.
    """
    if len(steps) == 1:
        return steps[0]
    pinned = st.session_state.get("training_probe_pick")
    follow = st.session_state.get("training_probe_follow", True) or pinned not in steps
    key = f"training_probe_step_{steps[-1]}" if follow else "training_probe_step_pinned"

    def picked() -> None:
        st.session_state["training_probe_pick"] = st.session_state[key]
        st.session_state["training_probe_follow"] = st.session_state[key] == steps[-1]  # back at the end: follow again

    return st.select_slider(
        "Training step",
        options=steps,
        value=steps[-1] if follow else pinned,
        key=key,
        on_change=picked,
        help="Move it back to see the attention earlier in training; move it "
        "to the end to follow the newest snapshot again.",
    )


def attention_section(v: JobView) -> None:
    """The probe sentences' attention, recorded during training, with a slider through the steps."""
    if not v.snapshots:
        return
    st.subheader("Attention forming")
    st.caption(
        f"Every {v.probe_every} steps the job runs the probe sentences through the model and keeps "
        "its attention weights. The decoder reads the reference translation when the data has one, as "
        "in training. Move the slider to scrub through training."
    )
    c = st.columns([3, 3, 1, 1])
    pi = c[0].selectbox("Probe sentence", range(len(v.probes)), format_func=lambda i: v.probes[i], key="training_probe")
    kind = c[1].selectbox("Attention", list(KINDS), format_func=KINDS.get, key="training_probe_kind")
    mine = [s for s in v.snapshots if s.probe == pi]
    if not mine:
        return
    n_layers, n_heads = mine[0].enc_self.shape[:2] if kind == "enc_self" else mine[0].dec_self.shape[:2]
    if st.session_state.get("training_probe_layer", 0) >= n_layers:
        st.session_state["training_probe_layer"] = 0
    if st.session_state.get("training_probe_head", "mean") not in ["mean", *range(n_heads)]:
        st.session_state["training_probe_head"] = "mean"
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
        figure(
            w,
            list(keys),
            list(queries),
            "weights",
            key="training_probe_heatmap",
            title=f"{KINDS[kind]}, layer {layer}, {'mean of the heads' if head is None else f'head {head}'}, "
            f"step {snap.step}",
            shape=f"[{Tq}, {Tk}] of [{L}, {H}, {Tq}, {Tk}]",
            x_title="key (attended to)",
            y_title="query",
            numbers=False,
        )
        st.dataframe(table(w, list(keys), list(queries)))
        st.markdown(f"**Translation at step {snap.step}:** {md(snap.translation) or '*(empty)*'}")
    with right:
        pronoun, candidates = COREF[langs(st.session_state["training_direction"])[0]]
        qi = vt.find_token(snap.src_labels, pronoun)
        cols = {f"{pronoun} → {word}": vt.find_token(snap.src_labels, word) for word in candidates}
        if kind == "enc_self" and qi is not None and all(k is not None for k in cols.values()):
            xs, series = vt.attention_timeline(mine, "enc_self", layer, head, qi, cols)
            chart(
                vt.timeline_figure(
                    xs, series, f"Where does “{pronoun}” look? (layer {layer})", "attention weight", current=snap.step
                ),
                key="training_coref_timeline",
                config={"displayModeBar": False},
            )
            st.caption(
                f"The row of “{pronoun}” in the encoder's self-attention: its weight on "
                f"“{candidates[0]}” and on “{candidates[1]}” at every recorded step."
            )
        elif kind == "dec_self":
            xs, ys = vt.future_timeline(mine, layer, head)
            chart(
                vt.timeline_figure(
                    xs,
                    {"weight above the diagonal": ys},
                    f"Looking ahead (decoder layer {layer})",
                    "mean weight on later words",
                    current=snap.step,
                ),
                key="training_future_timeline",
                config={"displayModeBar": False},
            )
            st.caption(
                "Mean over query rows of the attention on later positions: exactly 0 with the look-ahead "
                "mask; a decoder trained without it learns to read the word it should predict."
            )


def live_status() -> None:
    """The job's state, progress bar and headline numbers: cheap, so it polls every second while running."""
    job = browser_job()
    if job is None:
        st.info("No training yet in this session. Choose the settings above and press **Start**.")
        return
    if job.done and st.session_state.get(ADOPTED_KEY) != job.id:
        adopt_finished()
        st.rerun()  # the whole page: polling off, "My model" in the sidebar
    v = job.view()
    share_run(v, job)  # a teacher's run (and then its model) reaches the class that follows (ui/classroom/plans.py)
    t = v.tcfg
    if v.state == "queued":
        svc = service()
        running, queued = svc.counts()
        st.info(
            f"Waiting for a free slot: you are **number {v.position}** in the queue ({running} job(s) "
            f"training, {queued} waiting). Training starts by itself."
        )
        if not svc.max_running:
            st.warning(
                "No training worker is connected to this server's queue right now, so nothing trains yet. "
                "Whoever runs the server starts them with `python -m training.queue_worker`."
            )
        return
    if v.state == "running":
        left = f" · about {v.eta_s:,.0f} s left" if v.eta_s is not None else ""
        rate = f" · {v.steps_per_s:.1f} steps/s" if v.steps_per_s else ""
        st.progress(v.progress, text=f"Step {v.step} of {t.steps}{rate}{left}")
    elif v.state == "finished":
        st.success(
            f"Training finished: {v.step} steps in {v.seconds:.0f} s."
            + (" Your model is **My model** in the sidebar." if job.result is not None else "")
        )
    elif v.state == "stopped":
        st.warning(
            f"Training stopped ({v.reason}) after {v.step} of {t.steps} steps."
            + (" The model as it was is **My model** in the sidebar." if job.result is not None else "")
        )
    elif v.state == "failed":
        st.error(v.error or "Training failed.")
        if job.result is not None:
            st.info(f"The model as it was at step {v.step} is **My model** in the sidebar.")
        else:
            st.info(
                "Nothing was lost: change the settings (for example a learning-rate scale of 1 and a warm-up of "
                "a few hundred steps) and press Start again."
            )
    if v.handover_error and job.result_files is not None:
        handover_downloads(v.handover_error, job.result_files)
    smoothed = vt.ema(v.losses)[-1] if v.losses else None  # the loss the panel writes, and judges a finished run by
    if v.state == "finished" and job.result is not None and smoothed is not None:  # (stopped early: not learned *yet*)
        not_learned(smoothed, len(job.result.tgt_vocab))
    if v.state != "running" and v.step:
        st.progress(v.progress, text=f"Step {v.step} of {t.steps}")
    st.caption(
        f"Data: {md(v.data_label)} · {DIRECTIONS[t.direction]} · {t.n_layers}+{t.n_layers} layers, "
        f"{t.n_heads} heads, d_model {t.d_model}, d_ff {t.d_ff} · batch {t.batch_size} · "
        f"{v.parameters or 0:,} parameters · look-ahead mask {'on' if t.look_ahead_mask else 'OFF'}"
    )
    if not t.look_ahead_mask:
        st.warning(
            "This run trains **without the look-ahead mask**: the decoder can read the very word it must "
            "predict. Watch the training loss drop towards its floor while the held-out translations "
            "(which must be produced word by word, without the future) fail."
        )
    if not v.steps:
        st.caption("Building the model…")
        return
    last = v.evals[-1] if v.evals else None
    with metrics_row():
        st.metric("step", f"{v.step} / {t.steps}")
        st.metric("training loss (smoothed)", f"{smoothed:.3f}")
        st.metric("held-out exact match", f"{100 * last.exact_match:.1f} %" if last else "—")
        st.metric("held-out BLEU", f"{last.bleu:.1f}" if last else "—")
        st.metric("steps / s", f"{v.steps_per_s:.1f}" if v.steps_per_s else "—")


def not_learned(loss: float, vocab: int) -> None:
    """A run that ended with its training loss above chance (ln V: a model that gives every target word the same
    probability) learned nothing: its model is handed over like any other, and the page says what it is (a run at a
    huge learning-rate scale "finished" with a loss of 39,573 and every translation "enfant enfant ...")."""
    chance = math.log(vocab)
    if not loss > chance:
        return
    st.warning(
        f"This run did not learn: its smoothed training loss ends at {loss:,.3f}, above ln V = {chance:.2f}, the loss "
        f"of a model that gives each of the {vocab:,} target words the same probability. Its translations are noise, "
        "and **My model** shows them on every page: choose another model in the sidebar to leave it. A learning-rate "
        "scale of 1, a warm-up of a few hundred steps and a few hundred steps or more train this set.",
        icon=":material/trending_down:",
    )


def handover_downloads(message: str, files: tuple[bytes, bytes]) -> None:
    """A trained model the app could not load: why, and its two files to download all the same."""
    st.warning(message)
    model_downloads(files[0], files[1], "training_rescue")


def model_downloads(weights: bytes | Callable[[], bytes], config: bytes | Callable[[], bytes], key: str) -> None:
    """A model's two files (or the functions that make them, called on the click) as two download buttons, of
    widget keys `key`_weights and `key`_json."""
    files = (
        ("Download weights (.safetensors)", weights, "safetensors", "application/octet-stream", "weights"),
        ("Download config (.json)", config, "json", "application/json", "json"),
    )
    for column, (label, data, ext, mime, name) in zip(st.columns(3), files, strict=False):  # (a third: room)
        column.download_button(
            label,
            data=data,
            file_name=f"my_model.{ext}",
            mime=mime,
            on_click="ignore",
            key=f"{key}_{name}",
            icon=":material/download:",
        )


def live_figures() -> None:
    """Curves, translations and attention: redrawn every 3 s while running (each redraw builds ~6 figures)."""
    job = st.session_state.get(JOB_KEY)
    if job is None or job.state == "queued":
        return
    v = job.view()
    t = v.tcfg
    if not v.steps:
        return
    ev_steps = [e.step for e in v.evals]
    c1, c2 = st.columns(2)
    with c1:
        chart(
            vt.loss_figure(v.steps, v.losses, ev_steps, [e.heldout_loss for e in v.evals]),
            key="training_loss",
            config={"displayModeBar": False},
            narrow=True,
        )
    with c2:
        chart(
            vt.loss_figure(
                v.steps,
                v.cross_entropy,
                ev_steps,
                [e.heldout_cross_entropy for e in v.evals],
                title="Cross-entropy without smoothing (can reach 0)",
                what="cross-entropy",
            ),
            key="training_ce",
            config={"displayModeBar": False},
            narrow=True,
        )
    st.caption(
        "The optimiser minimises the label-smoothed loss (left): with smoothing it cannot go below the "
        "entropy of the smoothed target. The plain cross-entropy (right) reaches 0 when the model is sure "
        "and right. Held-out losses are teacher-forced, like training."
    )
    c3, c4 = st.columns(2)
    with c3:
        chart(
            vt.lr_figure(t.steps, t.d_model, t.warmup, t.lr_scale, current=v.step),
            key="training_lr",
            config={"displayModeBar": False},
            narrow=True,
        )
    with c4:
        if v.evals:
            chart(
                vt.metrics_figure(
                    ev_steps,
                    [e.exact_match for e in v.evals],
                    [e.bleu for e in v.evals],
                    [e.coref_accuracy for e in v.evals],
                ),
                key="training_metrics",
                config={"displayModeBar": False},
                narrow=True,
            )
        elif v.state in ("queued", "running"):
            st.info(f"Held-out exact match and BLEU appear at the first evaluation (step {t.eval_every or t.steps}).")
        else:
            st.info(f"This run ended before its first evaluation (step {t.eval_every or t.steps}): no held-out scores.")
    if v.evals:
        st.subheader("Held-out sentences, translated at each evaluation")
        st.dataframe(vt.samples_table(v.evals), hide_index=True)
    if v.snapshots:
        st.subheader("The probe sentences, translated as training goes")
        st.dataframe(vt.probe_table(v.snapshots, v.probes), hide_index=True)
    attention_section(v)


def corpus_preview(parsed, src_lang: str, tgt_lang: str) -> None:
    """An uploaded corpus: its warnings, its sizes (or why it is refused) and its first pairs."""
    for w in parsed.warnings:
        st.warning(w)
    try:
        prof = corpus_profile(parsed)
        check_corpus_profile(prof)
    except SettingsError as e:
        st.error(str(e))
    else:
        with metrics_row():
            st.metric("pairs", f"{len(parsed.pairs):,}")
            st.metric("training / held out", f"{prof.n_train:,} / {prof.n_heldout:,}")
            st.metric(f"{src_lang} words", f"{prof.src_vocab - 4:,}")
            st.metric(f"{tgt_lang} words", f"{prof.tgt_vocab - 4:,}")
            st.metric("longest (tokens)", prof.longest)
    st.caption(
        f"Preview: the first {min(20, len(parsed.pairs))} pairs "
        f"({'tab' if parsed.delimiter == chr(9) else 'comma'}-separated"
        f"{', header skipped' if parsed.header else ''})."
    )
    st.dataframe({src_lang: [p.src for p in parsed.pairs[:20]], tgt_lang: [p.tgt for p in parsed.pairs[:20]]})


def my_model_card(mine: Bundle | None) -> None:
    """This session's own model: what it is, whether every page shows it, and its download buttons."""
    if mine is None:
        st.caption("No model of your own yet: train one above, or upload one below.")
        return
    cfg = mine.config
    done = (mine.meta.get("training") or {}).get("steps_done")
    metrics = mine.meta.get("metrics") or {}
    st.markdown(
        f"**{md(mine.name)}** · {DIRECTIONS.get(mine.direction, mine.direction)} · {cfg.n_enc_layers}+"
        f"{cfg.n_dec_layers} layers, {cfg.n_heads} heads, d_model {cfg.d_model}, d_ff {cfg.d_ff}"
        + (f" · {done} steps" if done is not None else "")
        + (
            f" · held-out exact match {100 * metrics['exact_match']:.1f} % (step {metrics.get('step')})"
            if metrics.get("exact_match") is not None
            else ""
        )
    )
    if st.session_state.get("model") == "mine":
        st.success("Every page now shows **My model** (change it in the sidebar under *Model*).")
    else:
        st.button(
            "Use my model on every page", on_click=on_use_mine, key="training_use_mine", icon=":material/swap_horiz:"
        )
    model_downloads(lambda b=mine: to_bytes(b)[0], lambda b=mine: to_bytes(b)[1], "training_download")
