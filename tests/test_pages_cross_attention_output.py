"""AppTest of the encoder-decoder attention page (pages/cross_attention.py: the padding demo, the cross-attention
weights and their notice) and the output page (pages/output.py: candidates, cross-entropy, label smoothing, greedy
and beam search, notices) with the shipped checkpoint, and the next links from the decoder page on.

Every check compares what the page shows (figure JSON, dataframes, metrics, text) with an independent
computation: the checkpoint loaded here with model.checkpoint.load and run through the model directly.
The decoder page is in tests/test_pages_decoder.py.
"""

import re

import numpy as np
import pytest
import torch

from model import pipeline
from model.data import pad
from model.decoding import beam_search
from model.trace import Interventions
from model.transformer import traced
from model.vocab import BOS_ID, EOS_ID, tokenize
from tests.apptest_util import all_text, chart_spec, decode, heatmap_z, no_exception, run_page, table_with
from tests.pages_decoder_util import (  # noqa: F401 - fixtures base, dec_page, own
    REF,
    SHOWN,
    S,
    base_fixture,
    dec_page_fixture,
    infos,
    metric,
    own_fixture,
    pick_layer_head,
    text_of,
)
from ui.widgets import md


@pytest.fixture(scope="module")
def cross_page():
    at = run_page("cross_attention")
    no_exception(at)
    return at


@pytest.fixture(scope="module")
def out_page():
    at = run_page("output")
    no_exception(at)
    return at


def comparison(at):
    """The greedy-vs-beam table."""
    return table_with(at, "decoding")


def src_ids(bundle, text):
    return list(pipeline.prepare(bundle, text).ids)


# --- Encoder-decoder attention page ---------------------------------------------------------------


def test_padding_demo(cross_page, base):
    on, off = chart_spec(cross_page, "cross_pad_on"), chart_spec(cross_page, "cross_pad_off")
    labels = on["data"][0]["x"]
    n_real = sum(not lab.endswith("<pad>") for lab in labels)
    assert n_real < len(labels)  # there is padding
    z_on, z_off = heatmap_z(on), heatmap_z(off)
    assert np.all(z_on[:, n_real:] == 0.0)
    assert np.all(z_off[:n_real, n_real:] > 0)
    # independent: the user's sentence (short) batched with the partner the page chose (the long one)
    ids = [src_ids(base, S), src_ids(base, "i am a student")]
    short = 1  # the default sentence is the long one; its partner is the short sentence
    src = pad(ids)
    bos = torch.full((2, 1), BOS_ID)
    for iv, z in ((Interventions(), z_on), (Interventions(padding_mask=False), z_off)):
        w = traced(base.model, src, bos, iv)["enc.0.self_attn.weights"][short, 0].double().numpy()
        assert np.allclose(w, z, atol=1e-6)
    mask_text = text_of(chart_spec(cross_page, "cross_pad_mask"))
    assert mask_text.shape == (2, src.size(1))
    assert (mask_text[short, n_real:] == "-inf").all() and (mask_text[1 - short] == "0.000").all()
    assert float(metric(cross_page, "most weight a real token gives to <pad>")) == 0.0
    # the notice: the <pad> columns get exactly 0 with the mask on; what the worst word gives them with it off
    pad_off = z_off[:n_real, n_real:].sum(1)
    worst = labels[int(pad_off.argmax())].split(" ", 1)[1]
    shown = " ".join(i.value for i in cross_page.info)
    assert md(f"{len(labels) - n_real} <pad> columns get exactly 0.000") in shown
    assert md(f"“{worst}” gives {pad_off.max():.3f} of its weight to <pad>") in shown


def test_padding_demo_with_a_short_sentence(base):
    at = run_page("cross_attention", sentence="i am a student")
    no_exception(at)
    z_on, z_off = heatmap_z(chart_spec(at, "cross_pad_on")), heatmap_z(chart_spec(at, "cross_pad_off"))
    assert z_on.shape == (12, 12)  # padded to the long partner's 11 words + <eos>
    assert np.all(z_on[:, 5:] == 0.0) and np.all(z_off[:5, 5:] > 0)
    src = pad([src_ids(base, "i am a student"), src_ids(base, S)])
    w = traced(base.model, src, torch.full((2, 1), BOS_ID))["enc.0.self_attn.weights"][0, 0].double().numpy()
    assert np.allclose(w, z_on, atol=1e-6)


def test_cross_attention(own):
    at = run_page("cross_attention")
    pick_layer_head(at, "cross", 0, 0)
    z = heatmap_z(chart_spec(at, "cross_weights"))
    assert z.shape == (len(own.tgt_labels), len(own.src_labels))
    assert np.allclose(z.sum(1), 1.0, atol=1e-6)
    assert np.allclose(z, own.trace["dec.0.cross_attn.weights"][0, 0].double().numpy(), atol=1e-6)
    f = chart_spec(at, "cross_weights")
    assert f["data"][0]["x"] == own.src_labels and f["data"][0]["y"] == own.tgt_labels
    at = run_page("cross_attention")
    pick_layer_head(at, "cross", 1, -1)
    z = heatmap_z(chart_spec(at, "cross_weights"))
    assert np.allclose(z, own.trace["dec.1.cross_attn.weights"][0].mean(0).double().numpy(), atol=1e-6)
    assert np.allclose(z.sum(1), 1.0, atol=1e-6)


def test_cross_attention_opens_on_the_last_layer_with_its_notice(base):
    """Default view: the last decoder layer, averaged over heads; the notice names, row by row, the source word each
    position reads most. "thinking machines": row les (writing machines) reads machines with about 0.99."""
    at = run_page("cross_attention", sentence="thinking machines")
    no_exception(at)
    a = pipeline.analyse(base, pipeline.prepare(base, "thinking machines"))
    last = base.config.n_dec_layers - 1
    w = a.trace[f"dec.{last}.cross_attn.weights"][0].mean(0)  # [t, m]
    z = heatmap_z(chart_spec(at, "cross_weights"))
    assert np.allclose(z, w.double().numpy(), atol=1e-6)
    assert a.tgt_labels == ["0 <bos>", "1 les", "2 machines", "3 pensantes"]
    top = w.max(-1)
    src_words = [lab.split(" ", 1)[1] for lab in a.src_labels]
    notice = at.info[0].value
    sharp = int((top.values >= 0.5).sum())
    assert notice.startswith("**Notice:** " + md(f"{sharp} of {len(top.values)} rows put at least half their weight"))
    assert "Row by row" in notice
    assert (
        md(f"“les” (writes “machines”) reads “{src_words[int(top.indices[1])]}” {float(top.values[1]):.2f}") in notice
    )
    assert src_words[int(top.indices[1])] == "machines" and float(top.values[1]) > 0.9
    # the last row writes <eos> and reads the source's <eos> most
    assert int(top.indices[-1]) == len(src_words) - 1
    assert md(f"reads the source's <eos> most ({float(w[-1, -1]):.2f})") in notice
    align = table_with(at, "reads most (source word)")
    assert align["predicts"].tolist() == ["les", "machines", "pensantes", "<eos>"]
    assert np.allclose(align["its weight"], top.values.numpy(), atol=1e-3)
    assert "Next: **Output and decoding**" in all_text(at) or "Output and decoding" in all_text(at)


# --- Output page ----------------------------------------------------------------------------------


def test_top_candidates(out_page, own, base):
    itos = base.tgt_vocab.itos
    for pos, at in ((0, out_page), (3, None)):
        if at is None:
            at = run_page("output")
            at.selectbox(key="output_pos").set_value(pos).run()
            no_exception(at)
        f = chart_spec(at, "output_top")
        shown_p = decode(f["data"][0]["x"])
        probs = own.trace["probs"][0, pos]
        p, ids = probs.topk(10)
        assert np.allclose(shown_p, p.numpy(), atol=1e-7)
        assert [w.strip() for w in f["data"][0]["y"]] == [itos[i] for i in ids.tolist()]
        assert shown_p.sum() <= 1.0 + 1e-6
        df = table_with(at, "probability")
        assert np.allclose(df["probability"], p.numpy(), atol=SHOWN)
        assert df["index"].tolist() == ids.tolist()
        assert metric(at, "numbers in the logits") == f"{len(itos)}"
        assert int(metric(at, "argmax index")) == int(own.trace["logits"][0, pos].argmax())
        assert metric(at, "which word") == itos[int(own.trace["logits"][0, pos].argmax())]
        lf = chart_spec(at, "output_logits")
        assert np.allclose(decode(lf["data"][0]["y"]), own.trace["logits"][0, pos].numpy(), atol=1e-5)


def gold_and_probs(base, text, reference):
    """Teacher forcing computed here: BOS + reference in, reference + EOS as gold."""
    ids, _ = base.tgt_vocab.encode(tokenize(reference, "fr"))
    tr = traced(base.model, torch.tensor([src_ids(base, text)]), torch.tensor([[BOS_ID, *ids]]))
    return torch.tensor([*ids, EOS_ID]), tr["probs"][0].double()


def test_cross_entropy(out_page, base):
    at = out_page
    assert at.text_input(key="output_reference").value == REF
    gold, probs = gold_and_probs(base, S, REF)
    logp = probs[torch.arange(len(gold)), gold].log()
    assert metric(at, "mean cross-entropy") == f"{float(-logp.mean()):.4f}"
    df = table_with(at, "-log p(gold)")
    assert np.allclose(df["-log p(gold)"], (-logp).numpy(), atol=SHOWN)
    assert df["gold next word"].tolist() == [base.tgt_vocab.itos[g] for g in gold.tolist()]
    assert df["argmax prediction"].tolist() == [base.tgt_vocab.itos[i] for i in probs.argmax(-1).tolist()]
    one_hot = table_with(at, "thanks")
    assert list(one_hot.columns) == ["a", "am", "I", "thanks", "student", "<eos>"]
    assert one_hot.iloc[0].tolist() == [0, 1, 2, 3, 4, 5] and one_hot.iloc[1].tolist() == [0, 1, 0, 0, 0, 0]
    grad = table_with(at, "gradient p − y")
    assert np.allclose(grad["gradient p − y"], grad["p"] - grad["one-hot y"], atol=2 * SHOWN)


@pytest.mark.parametrize("eps", [0.1, 0.25])
def test_label_smoothing(base, eps):
    """The paper's form (Szegedy et al.), q = (1 − ε)·one-hot + ε/V, which is torch's label_smoothing target."""
    at = run_page("output")
    if eps != 0.1:
        at.slider(key="output_eps").set_value(eps).run()
    no_exception(at)
    V = len(base.tgt_vocab)
    df = table_with(at, "q(gold)")
    assert np.allclose(df["q(gold)"], 1 - eps + eps / V, atol=SHOWN)
    assert np.allclose(df["q(each other word)"], eps / V, atol=SHOWN)
    # the formula line writes q(other) with 3 significant digits (the table's 4 decimals leave it one or two)
    assert rf"q(\text{{other}}) = {eps / V:.3g}" in " ".join(x.value for x in at.latex)
    gold, probs = gold_and_probs(base, S, REF)
    q = torch.full((len(gold), V), eps / V, dtype=torch.float64)
    q[torch.arange(len(gold)), gold] += 1 - eps
    smoothed = float(-(q * probs.log()).sum(-1).mean())
    assert metric(at, "loss vs smoothed target") == f"{smoothed:.4f}"
    assert np.allclose(df["loss vs smoothed"], (-(q * probs.log()).sum(-1)).numpy(), atol=SHOWN)
    # ... equal to what training computes: torch's cross_entropy with label_smoothing=ε
    ids, _ = base.tgt_vocab.encode(tokenize(REF, "fr"))
    logits = traced(base.model, torch.tensor([src_ids(base, S)]), torch.tensor([[BOS_ID, *ids]]))["logits"][0]
    by_torch = float(torch.nn.functional.cross_entropy(logits, gold, label_smoothing=eps))
    assert smoothed == pytest.approx(by_torch, abs=1e-5)
    shown = float(re.search(r"gives (\d+\.\d+) on these positions", all_text(at)).group(1))
    assert shown == pytest.approx(by_torch, abs=2e-6)
    f = chart_spec(at, "output_targets")
    smooth_bars = f["data"][2]
    i = [k for k, x in enumerate(smooth_bars["x"]) if x.endswith("(gold)")][0]
    assert decode(smooth_bars["y"])[i] == pytest.approx(1 - eps + eps / V)
    assert "ε/(V-1)" not in all_text(at) and r"\varepsilon/(V-1)" not in all_text(at)
    assert "section 5.4" in all_text(at)


def test_greedy_steps(out_page, own, base):
    itos = base.tgt_vocab.itos
    df = table_with(out_page, "chosen word")
    assert df["chosen word"].tolist() == [itos[s.chosen] for s in own.greedy.steps]
    assert np.allclose(df["p(chosen)"], [s.candidates[0].prob for s in own.greedy.steps], atol=SHOWN)
    assert df["chosen word"].iloc[-1] == "<eos>"
    at = run_page("output")
    at.select_slider(key="output_greedy_step").set_value(3).run()
    no_exception(at)
    cand = table_with(at, "chosen")
    step = own.greedy.steps[2]
    assert cand["word"].tolist() == [itos[c.token] for c in step.candidates]
    assert np.allclose(cand["probability"], [c.prob for c in step.candidates], atol=SHOWN)
    bars = chart_spec(at, "output_greedy_chart")["data"][0]
    assert np.allclose(decode(bars["x"]), [c.prob for c in step.candidates], rtol=1e-5)


def test_beam_tree_kept_nodes(out_page, base):
    res = beam_search(base.model, pipeline.prepare(base, S).src(), 3, 0.6)
    f = chart_spec(out_page, "output_beam_tree")
    traces = {t["name"]: t for t in f["data"]}
    xs = list(decode(traces["kept"]["x"])) + list(decode(traces["finished"]["x"]))
    finished_before = 0
    for d, step in enumerate(res.steps, start=1):
        kept = sum(e.kept for e in step.expansions)
        assert xs.count(d) == kept
        assert kept == min(3 - finished_before, len(step.expansions))  # k minus those already finished
        finished_before += sum(e.kept and e.hypothesis.finished for e in step.expansions)
    assert len(decode(traces["finished"]["x"])) == len(res.finished)
    comp = comparison(out_page)
    assert comp["total log-prob"].iloc[1] == pytest.approx(res.best.log_prob, abs=SHOWN)
    assert comp["normalised score"].iloc[1] == pytest.approx(res.best.score, abs=SHOWN)


def test_beam_k1_equals_greedy(own):
    at = run_page("output")
    at.slider(key="output_beam_k").set_value(1).run()
    no_exception(at)
    comp = comparison(at)
    assert comp["output"].iloc[0] == comp["output"].iloc[1] == own.translation
    assert comp["total log-prob"].iloc[0] == pytest.approx(comp["total log-prob"].iloc[1], abs=1e-4)
    assert "*is* greedy decoding" in all_text(at)
    traces = {t["name"]: t for t in chart_spec(at, "output_beam_tree")["data"]}
    xs = list(decode(traces["kept"]["x"])) + list(decode(traces["finished"]["x"]))
    assert sorted(xs) == [0] + list(range(1, len(own.greedy.steps) + 1))  # one kept node per step


def test_beam_width_and_alpha(base):
    at = run_page("output")
    at.slider(key="output_beam_k").set_value(5)
    at.slider(key="output_beam_alpha").set_value(0.0)
    at.run()
    no_exception(at)
    res = beam_search(base.model, pipeline.prepare(base, S).src(), 5, 0.0)
    comp = comparison(at)
    assert comp["normalised score"].iloc[1] == pytest.approx(res.best.log_prob, abs=SHOWN)  # α = 0: no normalisation
    traces = {t["name"]: t for t in chart_spec(at, "output_beam_tree")["data"]}
    assert list(decode(traces["kept"]["x"])).count(1) + list(decode(traces["finished"]["x"])).count(1) == 5
    at.select_slider(key="output_beam_step").set_value(2).run()
    step = table_with(at, "fate")
    assert len(step) == len(res.steps[1].expansions)
    assert step["fate"].tolist().count("pruned") == sum(not e.kept for e in res.steps[1].expansions)


def test_run_twice_is_beam_two(out_page, base):
    res = beam_search(base.model, pipeline.prepare(base, S).src(), 2, 0.6)
    df = table_with(out_page, "step 2 word (model run on that prefix)")
    itos = base.tgt_vocab.itos
    assert sorted(set(df["step 1 word"])) == sorted(itos[e.token] for e in res.steps[0].expansions if e.kept)
    ok = df["p(step 2 | step 1)"].notna()
    assert np.allclose(df["p(both)"][ok], (df["p(step 1)"] * df["p(step 2 | step 1)"])[ok], atol=2 * SHOWN)


def test_output_unknown_reference(base):
    at = run_page("output", sentence="i am a student")
    assert at.text_input(key="output_reference").value == "je suis étudiant"
    at.text_input(key="output_reference").input("je suis zorglub <script>").run()
    no_exception(at)
    assert any("zorglub" in w.value for w in at.warning)
    df = table_with(at, "gold next word")
    assert "<unk>" in df["gold next word"].tolist()
    gold, probs = gold_and_probs(base, "i am a student", "je suis zorglub <script>")
    assert metric(at, "mean cross-entropy") == f"{float(-probs[torch.arange(len(gold)), gold].log().mean()):.4f}"


# --- What each page says to look at (notices), folded tables, next links, the fixed facts ------------


def test_next_links(dec_page, cross_page, out_page):
    assert "Next: **Encoder-decoder attention**" in all_text(dec_page)
    assert "Next: **Output and decoding**" in all_text(cross_page)
    assert "Next: **Causal tracing**" in all_text(out_page)  # the walkthrough ends on the tracing page
    from ui import page_list

    assert page_list.next_page("decoder").name == "cross_attention"
    assert page_list.next_page("cross_attention").name == "output"


def test_output_notices_match_the_tensors(out_page, own, base):
    itos = base.tgt_vocab.itos
    shown = infos(out_page)
    probs = own.trace["probs"][0, 0]
    p, ids = probs.topk(2)
    assert md(f"position “<bos>” chooses “{itos[int(ids[0])]}” with p = {float(p[0]):.4f}") in shown
    assert md(f"the runner-up “{itos[int(ids[1])]}” gets {float(p[1]):.4f}") in shown
    logits = own.trace["logits"][0, 0]
    v, _ = logits.topk(2)
    assert md(f"is {float(v[0] - v[1]):.2f} above the next") in shown
    step = own.greedy.steps[0]
    assert (
        md(
            f"“{itos[step.chosen]}”, p = {step.candidates[0].prob:.4f}; runner-up "
            f"“{itos[step.candidates[1].token]}”, p = {step.candidates[1].prob:.4f}"
        )
        in shown
    )
    res = beam_search(base.model, pipeline.prepare(base, S).src(), 3, 0.6)
    n_exp = sum(len(s.expansions) for s in res.steps)
    assert (
        md(f"weighed {n_exp} hypotheses and pruned {sum(not e.kept for s in res.steps for e in s.expansions)}") in shown
    )
    gold, probs_tf = gold_and_probs(base, S, REF)
    pg = probs_tf[torch.arange(len(gold)), gold]
    worst = int(pg.argmin())
    assert md(f"must write “{itos[int(gold[worst])]}” and gives it p = {float(pg[worst]):.4f}") in shown
    V = len(itos)
    assert md(f"1 − ε + ε/V = {1 - 0.1 + 0.1 / V:.5f}") in shown


def test_output_position_convention_and_folded_tables(out_page):
    text = all_text(out_page)
    assert "Decoder position *t* reads word *t* and predicts word *t + 1*" in text
    assert r"\hat y_{t+1}" in text
    labels = {e.label for e in out_page.expander}
    assert {
        "The 10 as a table",
        "Every position: targets and losses",
        "Every expansion of one step, as a table",
    } <= labels


def test_the_page_says_why_the_model_is_surer_than_its_smoothed_target(base):
    """The model gives the gold words more than q(gold) on this page (dropout off); with dropout on, as training ran
    it, it gives them about q(gold). Both averages are the model's own, and the shared model stays in eval mode."""
    from explain.recompute import gold_probability_in_training

    at = run_page("output")
    no_exception(at)
    gold, probs = gold_and_probs(base, S, REF)
    p = float(probs[torch.arange(len(gold)), gold].mean())
    trained = gold_probability_in_training(base.model, torch.tensor([src_ids(base, S)]), gold.tolist())
    q = 1 - 0.1 + 0.1 / len(base.tgt_vocab)
    text = all_text(at).replace("\\", "")
    assert f"the gold word p = {p:.3f} on average, above the smoothed target's q(gold) = {q:.5f}" in text
    assert f"it gives p = {trained:.3f}, near q(gold)" in text and abs(trained - q) <= 0.02 < p - q
    assert not base.model.training
