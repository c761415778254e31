"""Builders for the encoder-layer page: residual connections, LayerNorm's two steps, the FFN, the stack.

All numbers come from a `Trace`, plus what `explain.experiments` reads or recomputes from the model's
parameters (γ, β: `layer_norm_params`; max(0, x W_1 + b_1): `ffn_hidden`) and what `explain.layers` computes from
them (LayerNorm's statistics and γ · x̂ + β, the norms and cosines of one word through the stack); nothing here runs
the model.
Works for post-LN models (the paper's and the shipped one: LayerNorm(x + Sublayer(x))) and for pre-LN models
(x + Sublayer(LayerNorm(x)), with a final LayerNorm after the stack), which a user may upload.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from explain import layers as el
from model.trace import Trace
from viz.heatmap import as_array, dims

SUBLAYERS = {1: "self-attention", 2: "feed-forward"}


def is_pre_ln(trace: Trace) -> bool:
    """Pre-LN models record the final LayerNorm of the encoder stack; post-LN models have none."""
    return "enc.norm.out" in trace.tensors


def n_enc_layers(trace: Trace) -> int:
    n = 0
    while f"enc.{n}.add_norm2.resid" in trace.tensors:
        n += 1
    return n


def layer_output(trace: Trace, layer: int) -> torch.Tensor:
    """What encoder layer `layer` hands to the next one ([T, D]); layer -1 is the embedding + PE."""
    if layer < 0:
        return trace["src.input"][0]
    return trace[f"enc.{layer}.add_norm2.{'resid' if is_pre_ln(trace) else 'out'}"][0]


def sublayer_input(trace: Trace, layer: int, sub: int) -> torch.Tensor:
    """x in x + Sublayer(x): the layer's input (sub 1) or the output of its first add & norm (sub 2)."""
    if sub == 1:
        return layer_output(trace, layer - 1)
    return trace[f"enc.{layer}.add_norm1.{'resid' if is_pre_ln(trace) else 'out'}"][0]


@dataclass(frozen=True)
class Residual:
    x: torch.Tensor  # [T, D] the sublayer's input
    f: torch.Tensor  # [T, D] Sublayer(x): attention output or FFN output
    resid: torch.Tensor  # [T, D] the model's x + Sublayer(x)


def residual(trace: Trace, layer: int, sub: int) -> Residual:
    f = trace[f"enc.{layer}.{'self_attn' if sub == 1 else 'ffn'}.out"][0]
    return Residual(sublayer_input(trace, layer, sub), f, trace[f"enc.{layer}.add_norm{sub}.resid"][0])


def units(n: int) -> list[str]:
    """Labels of the FFN's hidden units: "h0", "h1", ..."""
    return [f"h{i}" for i in range(n)]


def residual_table(r: Residual, word: int, n_dims: int = 8, digits: int = 4) -> pd.DataFrame:
    """The first dimensions of x, Sublayer(x), their sum, and the model's recorded sum, for one word."""
    rows = {
        "x (input of the sublayer)": r.x[word],
        "Sublayer(x)": r.f[word],
        "x + Sublayer(x), added here": r.x[word] + r.f[word],
        "resid recorded by the model": r.resid[word],
    }
    return pd.DataFrame({name: as_array(v[:n_dims]).round(digits) for name, v in rows.items()}, index=dims(n_dims)).T


@dataclass(frozen=True)
class Norm:
    """LayerNorm in its two steps, as the model ran it."""

    x: torch.Tensor  # [T, D] what is normalised (post-LN: x + Sublayer(x); pre-LN: the sublayer input)
    normed: torch.Tensor  # [T, D] (x - mean) / sqrt(var + eps), per word
    out: torch.Tensor  # [T, D] γ · normed + β
    gamma: torch.Tensor  # [D] learned scale
    beta: torch.Tensor  # [D] learned shift


def layer_norm(trace: Trace, layer: int, sub: int, gamma: torch.Tensor, beta: torch.Tensor) -> Norm:
    """The LayerNorm of encoder layer `layer`, sublayer `sub`, with its learned γ and β ([D] each)."""
    name = f"enc.{layer}.add_norm{sub}"
    x = sublayer_input(trace, layer, sub) if is_pre_ln(trace) else trace[f"{name}.resid"][0]
    return Norm(x, trace[f"{name}.normed"][0], trace[f"{name}.out"][0], gamma, beta)


def norm_stats(n: Norm, labels: list[str], digits: int = 4) -> pd.DataFrame:
    """Per word: mean and variance (over the D features) before and after normalising."""
    before, after = el.row_stats(n.x), el.row_stats(n.normed)
    return pd.DataFrame(
        {
            "word": list(labels),
            "mean before": as_array(before.mean).round(digits),
            "variance before": as_array(before.var).round(digits),
            "mean after": as_array(after.mean).round(digits),
            "variance after": as_array(after.var).round(digits),
        }
    )


def affine(n: Norm) -> torch.Tensor:
    """γ · normed + β, recomputed from the learned parameters ([T, D])."""
    return el.affine(n.normed, n.gamma, n.beta)


def affine_table(n: Norm, word: int, n_dims: int = 8, digits: int = 4) -> pd.DataFrame:
    rows = {
        "normed x̂": n.normed[word],
        "γ (learned)": n.gamma,
        "β (learned)": n.beta,
        "γ · x̂ + β, computed here": affine(n)[word],
        "out recorded by the model": n.out[word],
    }
    return pd.DataFrame({name: as_array(v[:n_dims]).round(digits) for name, v in rows.items()}, index=dims(n_dims)).T


@dataclass(frozen=True)
class FFN:
    x: torch.Tensor  # [T, D] the FFN's input
    hidden: torch.Tensor  # [T, d_ff] the model's max(0, x W_1 + b_1)
    recomputed: torch.Tensor  # [T, d_ff] the same, recomputed here from W_1, b_1
    out: torch.Tensor  # [T, D] hidden W_2 + b_2

    @property
    def zero_fraction(self) -> float:
        return float((self.hidden == 0).double().mean())

    @property
    def max_difference(self) -> float:
        return float((self.hidden - self.recomputed).abs().max())


def ffn_input(trace: Trace, layer: int) -> torch.Tensor:
    """What the FFN of encoder layer `layer` reads ([T, D])."""
    # pre-LN feeds LayerNorm(x) to the FFN; post-LN feeds the output of the first add & norm
    return trace[f"enc.{layer}.add_norm2.out"][0] if is_pre_ln(trace) else sublayer_input(trace, layer, 2)


def ffn(trace: Trace, layer: int, recomputed: torch.Tensor) -> FFN:
    """The FFN of encoder layer `layer` as recorded, beside its hidden layer `recomputed` from W_1, b_1
    (`explain.experiments.ffn_hidden(model, layer, ffn_input(trace, layer))`)."""
    return FFN(
        ffn_input(trace, layer), trace[f"enc.{layer}.ffn.hidden"][0], recomputed, trace[f"enc.{layer}.ffn.out"][0]
    )


def zero_table(f: FFN, labels: list[str]) -> pd.DataFrame:
    """Per word: how many hidden units the ReLU switched off."""
    zeros = (f.hidden == 0).sum(-1)
    return pd.DataFrame(
        {
            "word": list(labels),
            "ReLU zeros": as_array(zeros).astype(int),
            "fraction": as_array(zeros / f.hidden.shape[-1]).round(4),
        }
    )


@dataclass(frozen=True)
class Stages:
    labels: list[str]  # "input (embedding + PE)", "L0 x + attention", ...
    vectors: np.ndarray  # [S, D] one word's vector after each stage


def word_stages(trace: Trace, word: int) -> Stages:
    """One word's vector after the embedding and after every sublayer of every encoder layer."""
    pre = is_pre_ln(trace)
    labels, vecs = ["input (embedding + PE)"], [trace["src.input"][0, word]]
    for layer in range(n_enc_layers(trace)):
        for sub, what in SUBLAYERS.items():
            name = f"enc.{layer}.add_norm{sub}"
            labels.append(f"L{layer} x + {what}")
            vecs.append(trace[f"{name}.resid"][0, word])
            if not pre:
                labels.append(f"L{layer} LayerNorm ({what})")
                vecs.append(trace[f"{name}.out"][0, word])
    if pre:
        labels.append("final LayerNorm")
        vecs.append(trace["enc.norm.out"][0, word])
    return Stages(labels, as_array(torch.stack(vecs)))


def stage_table(s: Stages, digits: int = 4) -> pd.DataFrame:
    """Norm of the word's vector per stage and its cosine similarity to the input and to the stage before."""
    g = el.stage_geometry(s.vectors)
    return pd.DataFrame(
        {
            "stage": s.labels,
            "norm": g.norms.round(digits),
            "cosine to input": g.to_input.round(digits),
            "cosine to previous stage": g.to_prev.round(digits),
        }
    )


def ln_params(n: Norm) -> torch.Tensor:
    """[2, D]: γ in the first row, β in the second (for one heatmap)."""
    return torch.stack([n.gamma, n.beta])


# --- Post-LN and pre-LN, as diagrams (graphviz DOT) -----------------------------------------------
# fontsize 14 = viz/overview.FONT_SIZE, the size ui/style.py gives every diagram's text: laid out for another size,
# the labels overflow their boxes.

POST_LN_DOT = """digraph { rankdir=BT; node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontsize=14];
x [label="x", shape=plaintext, fillcolor=white]; s [label="Sublayer\\n(attention or FFN)"];
add [label="+", shape=circle, fillcolor="#fff3cd"]; ln [label="LayerNorm", fillcolor="#e8f5e9"];
out [label="output", shape=plaintext, fillcolor=white];
x -> s -> add -> ln -> out; x -> add [style=dashed, label=" residual"]; }"""
PRE_LN_DOT = """digraph { rankdir=BT; node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontsize=14];
x [label="x", shape=plaintext, fillcolor=white]; ln [label="LayerNorm", fillcolor="#e8f5e9"];
s [label="Sublayer\\n(attention or FFN)"]; add [label="+", shape=circle, fillcolor="#fff3cd"];
out [label="output (a final LayerNorm\\nafter the last layer)", shape=plaintext, fillcolor=white];
x -> ln -> s -> add -> out; x -> add [style=dashed, label=" residual"]; }"""


def attention_input(trace: Trace, layer: int) -> torch.Tensor:
    """What the self-attention of encoder layer `layer` reads ([T, D]): pre-LN reads LayerNorm(x)."""
    return trace[f"enc.{layer}.add_norm1.out"][0] if is_pre_ln(trace) else sublayer_input(trace, layer, 1)


# --- Notices: one computed sentence per figure ----------------------------------------------------


def norm_notice(n: Norm, labels: list[str], before: bool) -> str:
    """x (before) or x̂ (after): the spread of the per-word means and standard deviations."""
    stats = el.row_stats(n.x if before else n.normed)
    mean, std = as_array(stats.mean), as_array(stats.std)
    if before:  # after: "mean 0 and standard deviation 1" is the definition; the numbers show it to rounding
        i = int(std.argmax())
        return (
            f"Before: the words' means run from {mean.min():.2f} to {mean.max():.2f} and their standard deviations "
            f"from {std.min():.2f} to {std.max():.2f} (largest: “{labels[i]}”)."
        )
    return (
        f"After: every word has mean 0 (largest |mean| {np.abs(mean).max():.1e}) and standard deviation 1 "
        f"({std.min():.4f} to {std.max():.4f}): all rows now have the same size, only their patterns differ."
    )


def gamma_beta_notice(n: Norm) -> str:
    """γ and β: their ranges and the feature γ scales most ("amplified" only when that |γ| > 1, else "shrunk")."""
    g, b = as_array(n.gamma), as_array(n.beta)
    j = int(np.abs(g).argmax())
    how = "amplified" if abs(g[j]) > 1 else "shrunk, like every feature here"
    return (
        f"γ runs from {g.min():.2f} to {g.max():.2f} (mean {g.mean():.2f}; 1 would leave x̂ as it is), β from "
        f"{b.min():.2f} to {b.max():.2f}. The largest |γ| is on d{j} ({g[j]:.2f}): that feature comes out "
        f"of the LayerNorm {how} for every word."
    )


def hidden_notice(f: FFN, labels: list[str]) -> str:
    """The FFN's hidden layer: how many units the ReLU lets through (> 0), per word and over the sentence."""
    h = as_array(f.hidden)
    active = (h > 0).sum(1)
    F = h.shape[1]
    never = int(((h > 0).sum(0) == 0).sum())
    lo, hi = int(active.argmin()), int(active.argmax())
    return (
        f"{int(active.sum()):,} of {h.size:,} hidden values are active (ReLU > 0, {active.sum() / h.size:.0%}): "
        f"from {active[lo]} of {F} units for “{labels[lo]}” to {active[hi]} for “{labels[hi]}”; {never} units stay "
        "0 for every word of this sentence."
    )


def stages_notice(s: Stages) -> str:
    """One word through the stack: the norm after the input and after the last stage, LayerNorm's reset."""
    g = el.stage_geometry(s.vectors)
    norms = g.norms
    ln = [i for i, label in enumerate(s.labels) if "LayerNorm" in label]
    out = (
        f"The vector's length goes from {norms[0]:.1f} (input) to {norms[-1]:.1f} ({s.labels[-1]}); its cosine to "
        f"the input ends at {float(g.to_input[-1]):.2f}."
    )
    if ln:
        out += (
            f" After each LayerNorm the length is between {norms[ln].min():.1f} and {norms[ln].max():.1f} "
            f"(x̂ alone would have √D = {np.sqrt(s.vectors.shape[1]):.1f}; γ and β change it)."
        )
    return out
