"""The overview page's builders: the architecture diagram, the sizes table, the model's record.

`architecture_dot` draws the encoder-decoder stack of the paper's Figure 1 as Graphviz DOT (rendered
by Streamlit's frontend), with the depth and widths of the model in use. `BLOCKS` lists the blocks
of the diagram in reading order with the page that opens each one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd

from explain.paper import BASE, BIG
from model.transformer import Config


@dataclass(frozen=True)
class DiagramBlock:
    """One numbered block of the diagram and the page that looks inside it (whose title ui/page_list.py keeps)."""

    number: int
    label: str
    page: str  # path relative to app.py


BLOCKS = (
    DiagramBlock(1, "Embeddings", "pages/tokens.py"),
    DiagramBlock(2, "Positional encoding", "pages/positional.py"),
    DiagramBlock(3, "Self-attention, one head", "pages/self_attention.py"),
    DiagramBlock(4, "Multi-head attention", "pages/multi_head.py"),
    DiagramBlock(5, "Add & Norm, feed-forward", "pages/encoder.py"),
    DiagramBlock(6, "Masked self-attention", "pages/decoder.py"),
    DiagramBlock(7, "Encoder-decoder attention", "pages/cross_attention.py"),
    DiagramBlock(8, "Linear + softmax", "pages/output.py"),
)

_COLOURS = {
    "embed": "#f8cecc",
    "pos": "#ffffff",
    "attn": "#ffe6cc",
    "norm": "#fff2cc",
    "ffn": "#dae8fc",
    "linear": "#e1d5e7",
    "softmax": "#d5e8d4",
    "io": "#f5f5f5",
}

# One font size for every label of the diagram, in the diagram's own units. Streamlit's frontend sets every text of
# a Graphviz chart to one small CSS size, whatever the DOT says; ui/style.py sets them back to this one, so the
# labels are as big as the boxes Graphviz drew around them. Labels are wrapped to a few short lines: the diagram
# is then narrow (about 400 units for the two columns), so a 366 px phone column shows it at 0.9x, 12-13 px text.
FONT_SIZE = 14


def _node(name: str, label: str, kind: str, shape: str = "box") -> str:
    return (
        f'  {name} [label="{label}", shape={shape}, style="rounded,filled", fillcolor="{_COLOURS[kind]}", '
        f'fontname="Helvetica"];'
    )


# The decoder's three residual connections: around masked self-attention, cross-attention and the FFN.
RESIDUAL_EDGES_DEC = tuple(
    f'  {a} -> {b} [style=dashed, color="#999999", arrowhead=none, constraint=false];'
    for a, b in (("tgt_pos", "dec_norm1"), ("dec_norm1", "dec_norm2"), ("dec_norm2", "dec_norm3"))
)


def architecture_dot(cfg: Config) -> str:
    """The Transformer of Figure 1 (bottom to top), labelled with this model's sizes and the page numbers."""
    D, H, dk, F = cfg.d_model, cfg.n_heads, cfg.d_k, cfg.d_ff
    cluster = f'labeljust=l; style="rounded"; color="#888888"; fontname="Helvetica"; fontsize={FONT_SIZE};'
    lines = [
        "digraph transformer {",
        '  rankdir=BT; newrank=true; nodesep=0.25; ranksep=0.25; bgcolor="transparent";',
        f'  node [fontsize={FONT_SIZE}, margin="0.1,0.04"]; edge [arrowsize=0.6];',
        _node("src", "Inputs\\n(English tokens)", "io", "plaintext"),
        _node("src_emb", f"(1) Input embedding\\n[V_src x {D}]", "embed"),
        _node("src_pos", "(2) + positional\\nencoding", "pos", "ellipse"),
        _node("tgt", "Outputs so far\\n(French, shifted\\nright: <bos> ...)", "io", "plaintext"),
        _node("tgt_emb", f"(1) Output embedding\\n[V_tgt x {D}]", "embed"),
        _node("tgt_pos", "(2) + positional\\nencoding", "pos", "ellipse"),
        f'  subgraph cluster_enc {{ label="(5) Encoder layer  x {cfg.n_enc_layers}"; {cluster}',
        _node("enc_attn", f"(3)(4) Multi-head\\nself-attention\\n{H} heads x d_k {dk}", "attn"),
        _node("enc_norm1", "Add & Norm", "norm"),
        _node("enc_ffn", f"Feed-forward\\n{D} -> {F} -> {D}", "ffn"),
        _node("enc_norm2", "Add & Norm", "norm"),
        "  }",
        f'  subgraph cluster_dec {{ label="Decoder layer  x {cfg.n_dec_layers}"; {cluster.replace("=l", "=r")}',
        _node("dec_self", f"(6) Masked multi-head\\nself-attention\\n{H} heads", "attn"),
        _node("dec_norm1", "Add & Norm", "norm"),
        _node("dec_cross", f"(7) Encoder-decoder\\nattention, {H} heads", "attn"),
        _node("dec_norm2", "Add & Norm", "norm"),
        _node("dec_ffn", f"Feed-forward\\n{D} -> {F} -> {D}", "ffn"),
        _node("dec_norm3", "Add & Norm", "norm"),
        "  }",
        _node("linear", f"(8) Linear\\n{D} -> V_tgt", "linear"),
        _node("softmax", "(8) Softmax", "softmax"),
        _node("probs", "Output probabilities\\n(next French word)", "io", "plaintext"),
        "  src -> src_emb -> src_pos -> enc_attn -> enc_norm1 -> enc_ffn -> enc_norm2;",
        "  tgt -> tgt_emb -> tgt_pos -> dec_self -> dec_norm1 -> dec_cross -> dec_norm2 -> dec_ffn -> dec_norm3;",
        "  dec_norm3 -> linear -> softmax -> probs;",
        f'  enc_norm2 -> dec_cross [label=" keys,\\n values", fontsize={FONT_SIZE}, color="#c0504d", '
        'fontcolor="#c0504d"];',
        '  src_pos -> enc_norm1 [style=dashed, color="#999999", arrowhead=none, constraint=false];',
        '  enc_norm1 -> enc_norm2 [style=dashed, color="#999999", arrowhead=none, constraint=false];',
        *RESIDUAL_EDGES_DEC,
        "  { rank=same; src; tgt; }",
        "}",
    ]
    return "\n".join(lines)


def sizes_table(cfg: Config, n_params: int) -> pd.DataFrame:
    """This model's sizes beside the paper's base and big models (strings, one row per quantity)."""
    rows = [
        ("encoder layers (N)", cfg.n_enc_layers, BASE.n_layers, BIG.n_layers),
        ("decoder layers (N)", cfg.n_dec_layers, BASE.n_layers, BIG.n_layers),
        ("d_model", cfg.d_model, BASE.d_model, BIG.d_model),
        ("heads (h)", cfg.n_heads, BASE.n_heads, BIG.n_heads),
        ("d_k = d_v = d_model / h", cfg.d_k, BASE.d_k, BIG.d_k),
        ("d_ff", cfg.d_ff, BASE.d_ff, BIG.d_ff),
        ("dropout (P_drop)", cfg.dropout, BASE.dropout, BIG.dropout),
        ("source vocabulary", cfg.src_vocab, BASE.vocab, BIG.vocab),
        ("target vocabulary", cfg.tgt_vocab, BASE.vocab, BIG.vocab),
        ("max_len (positions)", cfg.max_len, "any (sinusoids; the paper hopes they extrapolate)", "the same"),
        ("parameters", f"{n_params:,}", f"{BASE.params_millions}M", f"{BIG.params_millions}M"),
    ]
    return pd.DataFrame(
        [[str(c) for c in row[1:]] for row in rows],
        index=[r[0] for r in rows],
        columns=["this model", "paper: base", "paper: big"],
    )


def shape_rows(cfg: Config, m: int, t: int) -> list[tuple[str, str, str]]:
    """(what, the paper's base model, this model) with m source and t target positions, in the notes' D x m form."""
    P = BASE
    return [
        ("encoder input X", f"{P.d_model} x m", f"{cfg.d_model} x {m}"),
        (
            "one head's output",
            f"{P.d_k} x m  (each of {P.n_heads} heads)",
            f"{cfg.d_k} x {m}  (each of {cfg.n_heads} heads)",
        ),
        (
            "heads concatenated",
            f"{P.n_heads}·{P.d_k} x m = {P.d_model} x m",
            f"{cfg.n_heads}·{cfg.d_k} x {m} = {cfg.d_model} x {m}",
        ),
        ("encoder output", f"{P.d_model} x m", f"{cfg.d_model} x {m}"),
        ("decoder input X'", f"{P.d_model} x t", f"{cfg.d_model} x {t}"),
        ("decoder output", f"{P.d_model} x t", f"{cfg.d_model} x {t}"),
    ]


def heads_latex(d_model: int, n_heads: int, d_k: int, m) -> str:
    """X (D x m) -> H heads of d_k x m -> concatenated back to D x m, in the notes' column convention."""
    return (
        rf"X \in \mathbb{{R}}^{{{d_model} \times {m}}} \;\xrightarrow{{\;{n_heads} \text{{ heads}}\;}}\; "
        rf"{n_heads} \times ({d_k} \times {m}) \;\xrightarrow{{\text{{concat}}}}\; {n_heads * d_k} \times {m}"
    )


def _pct(v) -> str:
    return f"{100 * v:.1f}%" if isinstance(v, (int, float)) else "-"


def model_record(meta: dict) -> list[tuple[str, str]]:
    """The checkpoint's own account of itself: training steps, data sizes and held-out scores (if recorded)."""
    training = meta.get("training") or {}
    metrics = meta.get("metrics") or {}
    out = []
    if "steps_done" in training:
        out.append(("training steps", f"{training['steps_done']:,}"))
    if "train_seconds" in training:
        out.append(("training time", f"{training['train_seconds']:.0f} s on CPU"))
    if "look_ahead_mask" in training:
        out.append(("look-ahead mask in training", "on" if training["look_ahead_mask"] else "OFF"))
    if "n_train" in training:
        out.append(("training pairs", f"{training['n_train']:,}"))
    if "n_heldout" in training:
        out.append(("held-out pairs", f"{training['n_heldout']:,}"))
    if "exact_match" in metrics:
        out.append(("held-out exact match", _pct(metrics["exact_match"])))
    if "bleu" in metrics and isinstance(metrics["bleu"], (int, float)):
        out.append(("held-out BLEU", f"{metrics['bleu']:.1f}"))
    if metrics.get("coref_accuracy") is not None:
        out.append(("il/elle accuracy (coref sentences)", _pct(metrics["coref_accuracy"])))
    return out


def data_summary(data: dict) -> pd.DataFrame:
    """Pairs per grammar family (tag) and split, with one training example each."""
    train, heldout = data.get("train", []), data.get("heldout", [])
    n_train, n_held = Counter(p.tag for p in train), Counter(p.tag for p in heldout)
    example = {}
    for p in train:
        example.setdefault(p.tag, p)
    tags = list(dict.fromkeys([p.tag for p in train] + [p.tag for p in heldout]))
    return pd.DataFrame(
        {
            "family": tags,
            "training pairs": [n_train[t] for t in tags],
            "held-out pairs": [n_held[t] for t in tags],
            "example (English)": [example[t].src if t in example else "" for t in tags],
            "example (French)": [example[t].tgt if t in example else "" for t in tags],
        }
    )
