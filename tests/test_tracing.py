"""Causal tracing (explain/tracing.py, explain/pronoun.py) and its page (pages/tracing.py).

The shipped model's tracing of the coreference pair is reproduced here from the raw tensors of its safetensors file
by a forward pass of our own, in float64 numpy (no torch module, no trace): every cell of every grid, patched or
hidden, within 1e-4 of what the app draws.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from safetensors.numpy import load_file

import ui.tracing
from explain import pronoun, tracing
from model import checkpoint
from model.examples import COREFERENCE, COREFERENCE_WIDE
from model.trace import Interventions
from tests.apptest_util import all_text, chart_spec, decode, no_exception, run_page
from viz import tracing as vt

TIRED, WIDE = COREFERENCE, COREFERENCE_WIDE


@cache
def bundle():
    return checkpoint.load(checkpoint.SHIPPED)


@cache
def tired_wide() -> tracing.Tracing:
    return tracing.trace_pair(bundle(), tracing.pair(bundle(), TIRED, WIDE))


# --- an independent forward pass: the raw tensors, float64, numpy ------------------------------------------------


@cache
def raw() -> dict[str, np.ndarray]:
    return {k: v.astype(np.float64) for k, v in load_file(str(checkpoint.SHIPPED.with_suffix(".safetensors"))).items()}


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def forward(src: list[int], tgt: list[int], hook=lambda name, x: x) -> np.ndarray:
    """The shipped post-LN model on one sentence, teacher-forced: p(next word) at the last decoder position.
    `hook(name, x)` may replace a stream ([T, D]), a head's weights ([H, Tq, Tk]) or its z ([H, Tq, d])."""
    W, D, H = raw(), 128, 4
    dk = D // H

    def lin(x, n):
        return x @ W[f"{n}.weight"].T + W[f"{n}.bias"]

    def norm(x, n):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * W[f"{n}.weight"] + W[f"{n}.bias"]

    def pe(T):
        pos, i = np.arange(T)[:, None], np.arange(0, D, 2)[None]
        out = np.zeros((T, D))
        out[:, 0::2], out[:, 1::2] = np.sin(pos / 10000 ** (i / D)), np.cos(pos / 10000 ** (i / D))
        return out

    def attend(xq, xkv, n, name, causal=False):
        q, k, v = (
            lin(x, f"{n}.W_{p}").reshape(len(x), H, dk).transpose(1, 0, 2)
            for x, p in ((xq, "q"), (xkv, "k"), (xkv, "v"))
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dk)
        if causal:
            s = np.where(np.tril(np.ones(s.shape[1:], bool)), s, -np.inf)
        w = hook(f"{name}.weights", softmax(s))
        z = hook(f"{name}.z", w @ v)  # [H, Tq, dk]
        return lin(z.transpose(1, 0, 2).reshape(len(xq), D), f"{n}.W_o")

    def ffn(x, n):
        return lin(np.maximum(lin(x, f"{n}.W_1"), 0), f"{n}.W_2")

    x = hook("src.input", W["src_embed.lut.weight"][src] * math.sqrt(D) + pe(len(src)))
    for i in range(2):
        n = f"encoder.{i}"
        x = hook(
            f"enc.{i}.add_norm1.out",
            norm(x + attend(x, x, f"{n}.self_attn", f"enc.{i}.self_attn"), f"{n}.add_norm1.norm"),
        )
        x = hook(f"enc.{i}.add_norm2.out", norm(x + ffn(x, f"{n}.ffn"), f"{n}.add_norm2.norm"))
    y = W["tgt_embed.lut.weight"][tgt] * math.sqrt(D) + pe(len(tgt))
    for i in range(2):
        n = f"decoder.{i}"
        y = hook(
            f"dec.{i}.add_norm1.out",
            norm(y + attend(y, y, f"{n}.self_attn", f"dec.{i}.self_attn", True), f"{n}.add_norm1.norm"),
        )
        y = hook(
            f"dec.{i}.add_norm2.out",
            norm(y + attend(y, x, f"{n}.cross_attn", f"dec.{i}.cross_attn"), f"{n}.add_norm2.norm"),
        )
        y = hook(f"dec.{i}.add_norm3.out", norm(y + ffn(y, f"{n}.ffn"), f"{n}.add_norm3.norm"))
    return softmax(lin(y[-1], "generator"))


def test_the_coreference_tracing_is_reproduced_from_the_raw_tensors():
    t = tired_wide()
    p = t.pair
    src_c, src_w = list(p.clean.ids), list(p.corrupt.ids)
    tgt, word = [1, *p.clean_out[: p.position]], p.word_id
    rec: dict[str, np.ndarray] = {}

    def record(name, x):
        rec[name] = x.copy()
        return x

    p_clean = forward(src_c, tgt, record)[word]
    p_corrupt = forward(src_w, tgt)[word]
    assert p_clean == pytest.approx(p.p_clean, abs=1e-5) and p_corrupt == pytest.approx(p.p_corrupt, abs=1e-5)
    gap = p_clean - p_corrupt

    def patched(name, index) -> float:
        def hook(n, x):
            if n == name:
                x = x.copy()
                x[index] = rec[name][index]
            return x

        return (forward(src_w, tgt, hook)[word] - p_corrupt) / gap

    streams = ["src.input"] + [f"enc.{i}.add_norm{k}.out" for i in range(2) for k in (1, 2)]
    want = [[patched(n, s) for s in range(len(src_c))] for n in streams]
    np.testing.assert_allclose(t.encoder.share, want, atol=1e-4)
    heads = [
        [patched(f"dec.{i}.cross_attn.z", (slice(None) if h is None else h, q)) for q in range(len(tgt))]
        for i in range(2)
        for h in [*range(4), None]
    ]
    np.testing.assert_allclose(t.heads.share, heads, atol=1e-4)
    dec = [[patched(f"dec.{i}.add_norm{k}.out", q) for q in range(len(tgt))] for i in range(2) for k in (1, 2, 3)]
    np.testing.assert_allclose(t.decoder.share, dec, atol=1e-4)

    def hidden(names, key) -> float:
        def hook(n, x):
            if n in names:
                x = x.copy()
                x[..., key] = 0.0
                x = x / x.sum(-1, keepdims=True)  # the rows renormalised: the softmax over the keys left
            return x

        return (p_clean - forward(src_c, tgt, hook)[word]) / gap

    layers = [f"enc.{i}.self_attn.weights" for i in range(2)] + [f"dec.{i}.cross_attn.weights" for i in range(2)]
    mask = [[hidden({n}, s) for s in range(len(src_c))] for n in layers]
    mask.append([hidden(set(layers), s) for s in range(len(src_c))])
    np.testing.assert_allclose(t.mask.share, mask, atol=1e-4)
    # what the story says rests on these cells: "tired" alone carries it, "it" does not, hiding it loses il
    assert min(row[10] for row in want) > 0.99 and max(row[7] for row in want) < 0.01 and mask[2][10] > 0.9


def test_the_grids_are_labelled_and_complete_restorations_are_whole():
    t = tired_wide()
    p = t.pair
    assert (p.word, p.position, p.differs) == ("il", 10, (10,)) and p.traceable
    assert t.encoder.rows[0] == "input (embedding + PE)" and len(t.encoder.columns) == 12
    assert t.heads.rows[4] == "layer 0 all heads" and t.decoder.rows[1] == "layer 0 after enc-dec attn"
    assert t.mask.rows[-1] == "every layer" and t.mask.lost and not t.encoder.lost
    # the input row: every position but "tired" holds the same vector in both runs, so patching it restores nothing
    assert max(abs(v) for j, v in enumerate(t.encoder.share[0]) if j != 10) < 1e-5
    # the decoder's last stream at the followed position is the whole run: everything comes back
    assert t.decoder.share[-1][-1] == pytest.approx(1.0, abs=1e-5)
    # the same, summarised at the pronoun only, is the same numbers
    s = tracing.trace_pair(bundle(), p, every_position=False)
    np.testing.assert_allclose(s.encoder.share, t.encoder.share, atol=1e-6)
    assert [r[0] for r in s.heads.share] == pytest.approx([r[-1] for r in t.heads.share], abs=1e-6)
    np.testing.assert_allclose(s.mask.share, t.mask.share, atol=1e-6)


def test_one_head_part_by_part():
    h = tracing.trace_head(bundle(), tired_wide().pair, "dec.0.cross_attn", 3)
    assert h.query.rows == ("query q", "attention row", "output z") and h.key.rows == ("key k", "value v")
    assert len(h.query.columns) == 11 and len(h.key.columns) == 12  # decoder positions; source positions
    z = h.query.share[2][-1]
    assert z == pytest.approx(tired_wide().heads.share[3][-1], abs=1e-5)  # the same patch as the heads' grid
    enc = tracing.trace_head(bundle(), tired_wide().pair, "enc.1.self_attn", 0)
    assert len(enc.query.columns) == len(enc.key.columns) == 12
    off = tracing.pair(bundle(), TIRED, WIDE, iv=Interventions(heads_off=frozenset({("dec.0.cross_attn", 3)})))
    h_off = tracing.trace_head(bundle(), off, "dec.0.cross_attn", 3)
    assert h_off.off and max(abs(v) for row in h_off.query.share + h_off.key.share for v in row) < 1e-5
    assert "switched off" in vt.head_notice(h_off)


@pytest.mark.parametrize(
    "other, message",
    [
        ("the animal didn't cross the street", "same number of words"),
        (TIRED, "the same to the model"),
        ("the animal didn't cross the street because it was too zorblax", None),  # an unknown word: <unk>, traceable
        ("", "Type two sentences"),
    ],
)
def test_pairs_that_cannot_be_traced_say_why(other, message):
    if message is None:
        p = tracing.pair(bundle(), TIRED, other)
        assert p.differs == (10,)
        return
    with pytest.raises(tracing.NotAPair, match=message):
        tracing.pair(bundle(), TIRED, other)
    long = " ".join(["i am a student"] * 7)
    with pytest.raises(tracing.NotAPair, match="up to 24 words"):
        tracing.pair(bundle(), long, long.replace("student", "teacher", 1))


def test_a_pair_whose_word_barely_moves_is_not_shared_out():
    """Following a word both runs give the same probability: the gap is under MIN_GAP, the shares are not numbers."""
    p = tracing.pair(bundle(), TIRED, WIDE, position=1)  # "animal": the same in both
    assert not p.traceable and abs(p.gap) < tracing.MIN_GAP
    assert "too small to share out" in vt.pair_notice(p)
    t = tracing.trace_pair(bundle(), p)
    assert all(math.isnan(v) for row in t.encoder.share for v in row)


def test_the_story_of_a_same_gender_pair_says_the_adjective_cannot_change_the_pronoun():
    s = pronoun.story(bundle(), "the dog didn't cross the bridge because it was too tired")
    assert s.same_pronoun and s.tracing is None and s.pronoun == "il"
    from viz.pronoun import story_notice

    assert story_notice(s) == (
        "Both nouns are masculine here: the model writes il with “tired” and with “wide”, so "
        "the adjective cannot change the pronoun."
    )
    assert pronoun.story(bundle(), "i am a student") is None


# --- the page ------------------------------------------------------------------------------------------------


def test_the_page_draws_the_models_tracing_with_its_notices():
    at = run_page("tracing")
    no_exception(at)
    t = tired_wide()
    for key, g in (("encoder", t.encoder), ("heads", t.heads), ("decoder", t.decoder), ("mask", t.mask)):
        z = decode(chart_spec(at, f"tracing_{key}")["data"][0]["z"])
        np.testing.assert_allclose(z.reshape(len(g.rows), len(g.columns)), g.share, atol=1e-9)
    text = all_text(at).replace("\\", "")
    for n in (
        vt.pair_notice(t.pair),
        vt.encoder_notice(t),
        vt.heads_notice(t),
        vt.decoder_notice(t),
        vt.mask_notice(t),
    ):
        assert n in text
    assert "Only “tired” carries the difference in the encoder" in text
    # the one-head section opens on the head whose z brings back the most at the pronoun: layer 0 head 3
    single = [(t.heads.share[r][-1], t.heads.rows[r]) for r in range(len(t.heads.rows)) if "all" not in t.heads.rows[r]]
    assert max(single)[1] == "layer 0 head 3"
    assert (at.selectbox(key="tracing_module").value, at.selectbox(key="tracing_head").value) == ("dec.0.cross_attn", 3)
    q = decode(chart_spec(at, "tracing_head_query")["data"][0]["z"]).reshape(3, 11)
    assert q[2, -1] == pytest.approx(t.heads.share[3][-1], abs=1e-5)  # its z: the same patch as the heads' grid


def test_the_page_refuses_bad_pairs_with_a_message():
    for other, says in (
        ("i am a student", "same number of words"),
        ("<b>x</b> " * 11, "same number of words"),
        ("\u202e" + WIDE, None),
        (TIRED, "the same to the model"),
    ):
        at = run_page("tracing", tracing_other=other, tracing_other_for=TIRED)
        no_exception(at)
        if says:
            assert any(says in w.value for w in at.warning), other
    at = run_page("tracing", sentence="i am a student")
    no_exception(at)
    assert "Type a second sentence above" in all_text(at)


def test_the_tracing_is_computed_once_per_pair(monkeypatch):
    calls = []
    real = tracing.trace_pair
    monkeypatch.setattr(tracing, "trace_pair", lambda *a, **k: calls.append(a[1].clean.text) or real(*a, **k))
    other = "the animal didn't cross the road because it was too tired"  # a pair no other test traced
    at = run_page("tracing", sentence=other, tracing_other=other.replace("tired", "narrow"), tracing_other_for=other)
    no_exception(at)
    at.selectbox(key="tracing_head").set_value(2).run()  # another head: the grids are not traced again
    at.selectbox(key="tracing_module").set_value("enc.0.self_attn").run()
    no_exception(at)
    assert calls == [other]


def test_the_mystery_head_is_never_drawn(monkeypatch):
    monkeypatch.setattr(ui.tracing, "hidden_head", lambda: ("dec.0.cross_attn", 3))
    at = run_page("tracing", tracing_module="dec.0.cross_attn", tracing_head=3)
    no_exception(at)
    fig = chart_spec(at, "tracing_heads")
    z = decode(fig["data"][0]["z"]).reshape(10, 11)
    assert np.isnan(z[3]).all() and not np.isnan(z[2]).any() and "mystery" in fig["data"][0]["y"][3]
    text = all_text(at)
    assert "layer 0 head 3" not in text.replace("\\", "") and "Its weights stay hidden" in text
    fresh = run_page("tracing")  # no head preset: the section opens on the best head that is not the mystery one
    no_exception(fresh)
    assert (fresh.selectbox(key="tracing_module").value, fresh.selectbox(key="tracing_head").value) == (
        "dec.1.cross_attn",
        3,
    )


def test_the_mystery_head_is_not_named_on_the_self_attention_page(monkeypatch):
    """While a plan hides decoder layer 1's head 0 (the head that reads "wide" most), the coreference section names
    no encoder-decoder head's own number: the switch-off notice waits for the reveal (ui.attention_steps), and the
    tracing's best single head leaves the mystery head out."""
    import ui.classroom.plans

    hidden = ("dec.1.cross_attn", 0)
    monkeypatch.setattr(ui.classroom.plans, "hidden_head", lambda: hidden)
    monkeypatch.setattr(ui.tracing, "hidden_head", lambda: hidden)
    at = run_page("self_attention", sentence=WIDE)
    no_exception(at)
    text = all_text(at).replace("\\", "")
    assert "heads: 0.69" not in text and "would give the mystery head away" in text
    assert "layer 1 head 0" not in text and "The mystery head is left out until your teacher reveals it" in text
