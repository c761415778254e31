"""The prose of the training page (pages/training.py): its introduction, help texts and the summary of a run preview."""

from __future__ import annotations

INTRO = (
    "Press **Start** and watch the paper's recipe teach a small Transformer the toy translation set: Adam, "
    "the warm-up learning-rate schedule, label smoothing and dropout. Training runs in the background for "
    "**your browser only**; you can visit the other pages meanwhile and come back, and a reload or a second tab "
    "of the same browser shows the same run. When it ends (or when you "
    "stop it) the model becomes **My model** in the sidebar, beside the shipped one, and every page can "
    "show its tensors."
)

RECIPE = (
    "As in the paper: Adam with β₁ = 0.9, β₂ = 0.98, ε = 10⁻⁹ (section 5.3), fixed; residual dropout on the "
    "sums of embeddings and positional encodings and on every sub-layer output (section 5.4), at the rate you "
    "choose; this model also drops attention weights and the feed-forward net's hidden layer. Label "
    "smoothing ε_ls moves that share of the target's probability from the right word to the whole "
    "vocabulary. The paper's own recipe (25,000-token batches on 8 P100 GPUs for 12 hours, warm-up 4,000 "
    "steps, the average of the last 5 checkpoints, beam 4 with α = 0.6) is set beside this model's in the "
    "guided lesson's last step."
)

NO_MASK_HELP = (
    "The decoder may then read the word it must predict: training loss near zero, held-out "
    "translations failing, decoder attention above the diagonal."
)

LR_FORMULA = (
    r"\text{lrate} = \text{scale}\cdot d_{\text{model}}^{-0.5}\cdot"
    r"\min\left(\text{step}^{-0.5},\ \text{step}\cdot\text{warmup}^{-1.5}\right)"
)

MODEL_UPLOAD_HELP = (
    "Checked before use: format, size, and every tensor's shape against the JSON's config. "
    "Weights are read with safetensors, never unpickled."
)


def defaults_note(d, shipped) -> str:
    """Where the settings start, and how that compares with the shipped model (both `TrainConfig`s)."""
    return (
        f"The settings start at a small recipe chosen by measurement to learn the toy set within seconds on one "
        f"core: {d.n_layers} encoder and {d.n_layers} decoder layer{'s' if d.n_layers > 1 else ''} of d_model "
        f"{d.d_model}, {d.n_heads} heads, d_ff {d.d_ff}, dropout {d.dropout:g}, batch {d.batch_size}, {d.steps} "
        f"steps. The shipped model has {shipped.n_layers} + {shipped.n_layers} layers of d_model "
        f"{shipped.d_model}, d_ff {shipped.d_ff}, dropout {shipped.dropout:g}, {shipped.steps} steps. What each "
        "setting is worth, measured on one computer: the page *Why attention*, section 5 (your run of the same "
        "recipe can end a few points apart: another processor rounds floats differently)."
    )


def corpus_help(src_lang: str, tgt_lang: str, min_pairs: int, max_mb: int) -> str:
    return (
        f"A UTF-8 text file with one sentence pair per line: **{src_lang}** sentence, then its "
        f"**{tgt_lang}** translation, separated by a tab (.tsv) or a comma (.csv). At least {min_pairs} "
        f"pairs, at most {max_mb} MB; every 10th pair is held out for testing."
    )


def _highest_lr(tcfg) -> str:
    lr, step = tcfg.highest_lr
    if step == tcfg.warmup:
        return f"peak learning rate {lr:.2e} at step {step}"
    return (
        f"the learning rate only rises in this run: its warm-up ({tcfg.warmup:,} steps) is longer than the run "
        f"({tcfg.steps:,} steps), so it ends at {lr:.2e}, below the schedule's peak {tcfg.peak_lr:.2e}"
    )


def summary(preview) -> str:
    """The size, memory and server limits of a `ui.training.session.RunPreview`."""
    tcfg, mem, worst = preview.tcfg, preview.memory, preview.worst
    return (
        f"**This model:** d_k = d_model / heads = {tcfg.d_model} / {tcfg.n_heads} = {tcfg.d_model // tcfg.n_heads}; "
        f"{mem.parameters:,} parameters; {_highest_lr(tcfg)}.  \n"
        f"**Memory (estimate):** {mem.total / 1e6:,.0f} MB for this run: weights, gradients, Adam's two moments "
        f"and copies {mem.state_bytes / 1e6:,.1f} MB, activations kept for the backward pass of the largest batch "
        f"{mem.activation_bytes / 1e6:,.1f} MB (a held-out evaluation batch: {mem.eval_bytes / 1e6:,.1f} MB, "
        f"never at the same time), attention snapshots ≤ {mem.snapshot_bytes / 1e6:,.1f} MB, the data "
        f"{mem.data_bytes / 1e6:,.1f} MB. The largest settings the boxes allow would need about "
        f"{worst.total / 1e6:,.0f} MB; a run above {preview.max_job_bytes / 1e6:,.0f} MB is refused, and a run "
        f"that uses more than its estimate is stopped with a message.  \n"
        f"**Checkpoint:** about {preview.checkpoint_bytes / 2**20:,.1f} MB (4 bytes per parameter, plus the "
        f"vocabularies); a model above {preview.max_checkpoint_bytes / 2**20:,.0f} MB could not be saved and loaded "
        f"again, so such settings are refused.  \n"
        + (
            f"**This server** trains at most {preview.max_running} model(s) at once (one CPU thread each, at a lower "
            f"priority than the pages; more wait in a queue)"
            if preview.max_running
            else "**No training worker is connected** to this server's queue right now: a run waits in the queue until "
            "one is (whoever runs the server starts them with `python -m training.queue_worker`)"
        )
        + f" and stops a run after {preview.max_seconds / 60:.0f} minutes."
    )
