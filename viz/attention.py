"""One word through one head of attention: its query, keys and values, the scores, the softmax and z, and
the projection x·W^Q + b^Q = q; with the notice line of each figure.

Everything takes tensors from a `Trace` (or the textbook example) and returns pandas DataFrames, plotly
figures or one computed sentence. The only arithmetic here is what the page displays as a step of the
computation (weight × value rows and their sum); the tests compare each step with the model's own recorded
tensors. The other attention builders: viz/heads.py (heads side by side, concat and W^O, heads switched
off), viz/scaling.py (why divide by √d_k), viz/coref.py (the coreference example).

Notice words and their rules (tests/test_notice_rules_pages.py checks them over the toy set's held-out sentences):
"parks" only for a query whose largest weight is on <eos> or a punctuation mark; "itself" only when the
largest weight is on the query's own position; "nearly blank" for rows of weight < 0.01; "points almost
where" only with a cosine ≥ 0.9 (else "points partly where").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from explain.recompute import ColumnForm, Projection, WordSteps
from explain.textbook import WORDS
from model.pipeline import Analysis, label_word
from viz.heatmap import as_array, dims

# The attention modules a page can pick: label -> (stack, kind).
MODULES = {
    "encoder self-attention": ("enc", "self_attn"),
    "decoder self-attention (masked)": ("dec", "self_attn"),
    "decoder cross-attention (encoder-decoder)": ("dec", "cross_attn"),
}


STEP_COLUMNS = ("word", "q·k", "÷√d_k", "softmax weight")


def module_name(stack: str, kind: str, layer: int) -> str:
    """("enc", "self_attn", 0) -> "enc.0.self_attn" (the trace's and the interventions' name)."""
    return f"{stack}.{layer}.{kind}"


def axis_labels(a: Analysis, module: str) -> tuple[list[str], list[str]]:
    """(key labels, query labels) of an attention module: encoder tokens or decoder inputs."""
    stack, _, kind = module.split(".")
    if stack == "enc":
        return a.src_labels, a.src_labels
    return (a.src_labels if kind == "cross_attn" else a.tgt_labels), a.tgt_labels


def textbook_labels() -> list[str]:
    return [f"{i} {w}" for i, w in enumerate(WORDS)]


def step_table(s: WordSteps, key_labels: list[str], digits: int = 4) -> pd.DataFrame:
    """One row per key word: q·k, then ÷√d_k, then the softmax weight (plus the mask when there is one)."""
    df = pd.DataFrame(
        {
            STEP_COLUMNS[0]: list(key_labels),
            STEP_COLUMNS[1]: as_array(s.scores).round(digits),
            STEP_COLUMNS[2]: as_array(s.scaled).round(digits),
        }
    )
    if s.has_mask:
        df["+ mask"] = as_array(s.masked).round(digits)
    df[STEP_COLUMNS[3]] = as_array(s.weights).round(digits)
    return df


def score_name(query: int, key: int) -> str:
    """ "q2·k1": the dot product of query `query` and key `key` (0-based in, 1-based out, as in the book)."""
    return f"q{query + 1}·k{key + 1}"


def textbook_table(s: WordSteps, key_labels: list[str], query: int = 0) -> pd.DataFrame:
    """The seeds' layout: one column per word, rows Score / Divide by √d_k / Softmax (rounded as printed)."""
    return pd.DataFrame(
        {
            label: [
                f"{score_name(query, j)} = {float(s.scores[j]):g}",
                f"{float(s.scaled[j]):g}",
                f"{float(s.weights[j]):.2f}",
            ]
            for j, label in enumerate(key_labels)
        },
        index=["Score", f"Divide by {s.sqrt_dk:g} (√d_k)", "Softmax"],
    )


def worked_line(s: WordSteps, query: int, book: bool) -> str:
    """The worked numbers in one line, saying whose they are (the Illustrated Transformer's or this app's)."""
    source = (
        "From the Illustrated Transformer"
        if book
        else "This app's own construction (the Illustrated Transformer prints only the query of “Thinking”)"
    )
    scores = ", ".join(f"{score_name(query, j)} = {float(s.scores[j]):g}" for j in range(len(s.scores)))
    return (
        f"{source}: {scores} → ÷ √{s.d_k} = {s.sqrt_dk:g} → "
        f"{', '.join(f'{float(x):g}' for x in s.scaled)} → softmax → "
        f"{', '.join(f'{float(x):.2f}' for x in s.weights)}"
    )


def z_table(s: WordSteps, digits: int = 4) -> pd.DataFrame:
    """The weighted sum next to the model's own z (first rows: recomputed sum, then the trace)."""
    rows = {"Σ weight × v (sum of the rows above)": as_array(s.z_sum).round(digits)}
    if s.z_model is not None:
        rows["z recorded by the model"] = as_array(s.z_model).round(digits)
    return pd.DataFrame(rows, index=dims(s.d_k)).T


# --- Notices: one computed sentence per figure, saying what to look at --------------------------

ALMOST = 0.9  # z_matrix_notice: "points almost where" needs a cosine of at least this
PARKING = ("<eos>", ".", ",", "!", "?", ";", ":")  # tokens a head with nothing useful to read parks on


PARKING_WHY = (
    "A head that finds nothing useful to read for this word parks its weight on <eos> (or a punctuation "
    "mark): that token is in every sentence and carries little, so reading it changes the word little."
)


def is_parking(label: str) -> bool:
    return label_word(label) in PARKING


def row_notice(weights, key_labels: list[str], query_label: str) -> str:
    """One query's weights [Tk]: the biggest weight and where it goes, the runner-up, and why when it is <eos>."""
    w = as_array(weights).reshape(-1)
    order = np.argsort(-w, kind="stable")
    j = int(order[0])
    out = f"“{query_label}” gives its largest weight, {w[j]:.2f}, to “{key_labels[j]}”"
    if key_labels[j] == query_label:
        out += " (itself)"
    if len(w) > 1:
        out += f"; next comes “{key_labels[int(order[1])]}” with {w[int(order[1])]:.2f}"
    out += "."
    if is_parking(key_labels[j]):
        out += " " + PARKING_WHY
    return out


def keys_notice(s: WordSteps, key_labels: list[str], query_label: str) -> str:
    """The keys [Tk, d_k]: the one that points most the way q points (the largest q·k), and the one least."""
    qk = as_array(s.scores)
    j, m = int(qk.argmax()), int(qk.argmin())
    return (
        f"The key of “{key_labels[j]}” matches q of “{query_label}” best (q·k = {qk[j]:.2f}), the key of "
        f"“{key_labels[m]}” least ({qk[m]:.2f}): a key matches by its direction and its length."
    )


def values_notice(s: WordSteps, key_labels: list[str]) -> str:
    """The values [Tk, d_k]: what each word would pass on; the longest and shortest."""
    n = as_array(s.v.norm(dim=-1))
    j, m = int(n.argmax()), int(n.argmin())
    if np.isclose(n[j], n[m]):
        return f"What each word would pass on, if chosen: every value has the same length here (‖v‖ = {n[j]:.2f})."
    return (
        f"What each word would pass on, if chosen: the longest value is that of “{key_labels[j]}” "
        f"(‖v‖ = {n[j]:.2f}), the shortest that of “{key_labels[m]}” ({n[m]:.2f})."
    )


def weighted_notice(s: WordSteps, key_labels: list[str]) -> str:
    """The weight × v rows: which row is largest, and how much of z the big-weight rows make up. Rule: "nearly
    blank" rows are those under 0.01; with none, z is "mostly" one word's value when that word has at least half
    of the weight, "a broad mix" only when no word has."""
    norms = as_array(s.weighted.norm(dim=-1))
    j = int(norms.argmax())
    small = int((as_array(s.weights) < 0.01).sum())
    out = f"The row of “{key_labels[j]}” is the largest (‖weight × v‖ = {norms[j]:.2f})"
    if small:
        return out + (
            f"; the {small} of {len(key_labels)} rows with weight under 0.01 are nearly blank, so z is "
            "made of the words that got weight."
        )
    top = int(s.weights.argmax())
    if float(s.weights[top]) >= 0.5:
        return out + (
            f"; “{key_labels[top]}” has {float(s.weights[top]):.2f} of the weight, so z is mostly its value (every "
            f"one of the {len(key_labels)} rows has weight 0.01 or more)."
        )
    return out + (
        f"; no word has half of the weight (the most is {float(s.weights[top]):.2f}) and every one of the "
        f"{len(key_labels)} rows has 0.01 or more: z is a broad mix."
    )


def z_notice(s: WordSteps, textbook: bool = False) -> str:
    """Σ weight × v beside the model's own z (`textbook`: the example's z): the largest difference (0 up to
    rounding)."""
    if s.z_model is None:
        return "z is the sum of the rows above."
    diff = float((s.z_sum - s.z_model).abs().max())
    if not float(s.z_model.abs().max()):
        return "The model's z is 0 (the head is switched off); the sum above is what the head would have passed on."
    whose = "the example's z" if textbook else "the model's own z"
    return f"Adding the rows up by hand gives {whose}: largest difference {diff:.1e} (float rounding)."


def scores_notice(scores, labels: list[str], scaled=None, sqrt_dk: float | None = None) -> str:
    """A [Tq, Tk] score matrix: its range and largest entry; with `scaled`, the range after ÷√d_k."""
    z = as_array(scores)
    finite = np.where(np.isfinite(z), z, np.nan)
    i, j = np.unravel_index(int(np.nanargmax(finite)), z.shape)
    out = (
        f"Scores run from {np.nanmin(finite):.1f} to {np.nanmax(finite):.1f}; the largest is “{labels[i]}” → "
        f"“{labels[j]}”."
    )
    if scaled is not None and sqrt_dk:
        s = np.where(np.isfinite(as_array(scaled)), as_array(scaled), np.nan)
        out += (
            f" Divided by √d_k = {sqrt_dk:.3g} they run from {np.nanmin(s):.2f} to {np.nanmax(s):.2f}: same "
            "pattern, gentler numbers for the softmax."
        )
    return out


def matrix_notice(weights, q_labels: list[str], k_labels: list[str]) -> str:
    """A [Tq, Tk] weight matrix: the biggest weight, the diagonal, and how many rows park on <eos>/punctuation."""
    w = np.nan_to_num(as_array(weights))
    i, j = np.unravel_index(int(w.argmax()), w.shape)
    to = "itself" if q_labels[i] == k_labels[j] else f"“{k_labels[j]}”"
    out = f"The biggest weight, {w[i, j]:.2f}, goes from “{q_labels[i]}” to {to}."
    if w.shape[0] == w.shape[1] and q_labels == k_labels:
        diag = np.diag(w)
        self_rows = int((w.argmax(1) == np.arange(len(w))).sum())
        out += (
            f" The diagonal (each word to itself) holds {diag.mean():.2f} of a row on average; {self_rows} of "
            f"{len(w)} words look most at themselves."
        )
    rows = [i for i, label in enumerate(q_labels) if not is_parking(label)]  # <eos> looking at itself is no parking
    parked = int(sum(is_parking(k_labels[int(w[i].argmax())]) for i in rows))
    if parked:
        out += (
            f" {parked} of the {len(rows)} words that are not <eos> or punctuation put their largest weight on <eos> "
            "or punctuation, where a head parks when it finds nothing useful to read."
        )
    return out


def z_matrix_notice(z, weights, v, labels: list[str]) -> str:
    """Z = weights · V: the row with the largest single weight, and how close its row of Z is to that word's v.

    Rule: "points almost where" only with a cosine of at least ALMOST (0.9); below it, "points only partly"."""
    zz, w, vv = as_array(z), np.nan_to_num(as_array(weights)), as_array(v)
    i = int(w.max(1).argmax())
    j = int(w[i].argmax())
    cos = float(zz[i] @ vv[j] / max(np.linalg.norm(zz[i]) * np.linalg.norm(vv[j]), 1e-12))
    how = "almost" if cos >= ALMOST else "only partly"
    return (
        f"Each row of Z is a weighted average of V's rows. “{labels[i]}” puts {w[i, j]:.2f} on “{labels[j]}”, "
        f"so its row of Z points {how} where v of “{labels[j]}” points (cosine {cos:.2f})."
    )


def plain_notice(plain_weights, learned_weights, labels: list[str]) -> str:
    """softmax(XXᵀ) against a learned head: how much each puts on the diagonal."""
    p, lw = np.nan_to_num(as_array(plain_weights)), np.nan_to_num(as_array(learned_weights))
    n = len(labels)
    p_self = int((p.argmax(1) == np.arange(n)).sum())
    l_self = int((lw.argmax(1) == np.arange(n)).sum())
    return (
        f"Without learned weights, {p_self} of {n} words look most at themselves (diagonal {np.diag(p).mean():.2f} "
        f"on average): a vector matches itself best. The learned head: {l_self} of {n} (diagonal "
        f"{np.diag(lw).mean():.2f})."
    )


# --- The projection: x · W^Q + b^Q = q ------------------------------------------------------------


def projection_notice(p: Projection) -> str:
    q = p.computed("q")
    return (
        f"x has {p.x.numel()} numbers, q has {q.numel()}: W^Q squeezes the word into this head's smaller space. "
        f"x · W^Q + b^Q computed here equals the model's q to {p.error('q'):.1e} (k: {p.error('k'):.1e}, v: "
        f"{p.error('v'):.1e})."
    )


# --- Wang's column form: c_:j = V · softmax(Kᵀ q_:j / √d_k), C = Attn(X, X) -------------------------------

FLOAT_ERROR = 1e-5  # column_notice: "equal within float error" only when no entry of C differs from z by more


def column_notice(c: ColumnForm, labels: list[str], word: int, off: bool = False) -> str:
    """C next to the model's z. Rule: "equal within float error" only when max |C − zᵀ| ≤ FLOAT_ERROR (1e-5)."""
    d_k, T = c.C.shape
    j = int(c.alpha[:, word].argmax())
    text = (
        f"C = Attn(X, X) is {d_k} × {T}: one column c_:j per word, each computed on its own from K, V and that "
        f"word's q_:j. The column of “{label_word(labels[word])}” (position {word}) takes {c.alpha[j, word]:.2f} of "
        f"its mix from the value of “{label_word(labels[j])}” (position {j}). "
    )
    if off:
        return text + (
            f"Head {c.head} is switched off in the sidebar, so the model passes on zeros instead of C (Zᵀ is 0)."
        )
    if c.error <= FLOAT_ERROR:
        return text + f"C is the transpose of the row form's Z, equal within float error ({c.error:.1e})."
    return text + f"C differs from the model's Zᵀ by up to {c.error:.1e}."
