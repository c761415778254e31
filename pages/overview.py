"""Overview: the encoder-decoder stack, the sentence's translation, the sizes, and the model in use."""

import streamlit as st

from model.data import DATASET_PATH, data_hash, load_dataset
from model.paper import BASE, CITATION
from ui import shell
from ui.models import analysis, current_model, session_cache
from ui.state import MODELS
from ui.widgets import page_link, sentence_header
from viz.heatmap import shape_text
from viz.overview import (
    STOPS,
    architecture_dot,
    count_parameters,
    data_summary,
    heads_latex,
    model_record,
    shape_rows,
    sizes_table,
)

shell.enter(__file__)  # first: re-enter through app.py if Streamlit ran this page bare


@session_cache(max_entries=4)
def _toy_data(mtime: float):  # keyed on the file's modification time: a regenerated file is read again
    return data_summary(load_dataset()), data_hash(DATASET_PATH)


a = analysis()
cur = current_model()
bundle = cur.bundle
cfg = bundle.config
empty = a.prepared.empty

st.title("The Transformer at a glance")
st.markdown(
    "The Transformer of *Attention Is All You Need* (Vaswani et al., 2017) translates a sentence with an "
    "**encoder** that reads all source words at once and a **decoder** that writes the translation one word at "
    "a time. It is a sequence-to-sequence model, but **not a recurrent network**: it is built only from "
    "attention and dense (feed-forward) layers. Every number in this app comes from a real, small, trained "
    "Transformer running on your sentence."
)

st.header("Your sentence, translated")
if empty:
    st.info("Type a sentence in the sidebar (for example *i am a student*) to follow it through the model.")
else:
    sentence_header(a)

st.header("The encoder-decoder stack")
left, right = st.columns([1, 1])
with left:
    st.graphviz_chart(architecture_dot(cfg), width="stretch")
    st.caption("Read bottom to top, as in the paper's Figure 1. Numbers in brackets are the pages on the right; "
               "dashed lines are the residual (skip) connections around each sub-layer.")
with right:
    st.markdown("**Open each block:**")
    for stop in STOPS:
        page_link(stop.page, f"({stop.number}) {stop.block} → **{stop.title}**")
    st.markdown("**And then:**")
    page_link("pages/why_attention.py", "Attention instead of recurrence → **Why attention**")
    page_link("pages/training.py", "Training a model like this one → **Train your own**")
    st.markdown(
        f"- **Encoder block** = multi-head self-attention + dense (feed-forward) layer, each followed by a skip "
        f"connection and layer normalisation. The paper stacks 6 blocks; this model {cfg.n_enc_layers}.\n"
        f"- **Decoder block** = *masked* multi-head self-attention (over the words written so far) + "
        f"encoder-decoder attention (queries from the decoder, keys and values from the encoder output) + dense "
        f"layer. The paper stacks 6; this model {cfg.n_dec_layers}.\n"
        "- Same structure in every block, different parameters.\n"
        "- The last decoder block feeds a linear layer and a softmax: a probability for every word of the "
        "target vocabulary."
    )

st.header("Why the name “Transformer”?")
st.markdown(
    "Each block **transforms a set of vectors into a new set of vectors of the same dimension**: one vector per "
    "word goes in, one vector per word comes out. The goal is a richer internal representation, in which "
    "each word's vector also carries what the task needs from the other words."
)
if not empty:
    t = a.trace
    c1, c2 = st.columns(2)
    c1.metric("Encoder input (src.input)", shape_text(t["src.input"][0], "m, D"))
    c2.metric("Encoder output (enc.out)", shape_text(t["enc.out"][0], "m, D"))
    st.caption(f"The same m = {t['enc.out'].shape[1]} vectors of D = {cfg.d_model} numbers before and after "
               f"{cfg.n_enc_layers} encoder blocks (the source words and <eos>).")

st.header("Shapes: the paper and this model")
m = a.trace["enc.out"].shape[1] if not empty else "m"
tlen = a.trace["dec.out"].shape[1] if not empty else "t"
st.markdown("The lecture notes write the vectors as columns: a sentence of m words is a D × m matrix. "
            "(The code stores the transpose, [m, D], one row per word.)")
c1, c2 = st.columns(2)
with c1:
    st.markdown("**Paper (base model)**")
    st.latex(heads_latex(BASE.d_model, BASE.n_heads, BASE.d_k, "m"))
with c2:
    st.markdown("**This model, on your sentence**")
    st.latex(heads_latex(cfg.d_model, cfg.n_heads, cfg.d_k, m))
st.table({"": [r[0] for r in shape_rows(cfg, m, tlen)],
          "paper (base)": [r[1] for r in shape_rows(cfg, m, tlen)],
          "this model": [r[2] for r in shape_rows(cfg, m, tlen)]})
if not empty:
    st.caption(f"Measured in the trace: one head's output enc.0.self_attn.z is "
               f"{shape_text(a.trace['enc.0.self_attn.z'], 'B, H, m, d_k')}, the concatenation "
               f"enc.0.self_attn.concat is {shape_text(a.trace['enc.0.self_attn.concat'], 'B, m, D')}.")

st.header("Sizes: this model beside the paper")
n_params = count_parameters(bundle.model)
st.dataframe(sizes_table(cfg, n_params), height="content")
st.caption(f"Paper figures from {CITATION} (Table 3). The base model has about "
           f"{BASE.params_millions * 1e6 / n_params:,.0f} times as many parameters as this one, which is small "
           "enough to train on two CPU cores in about a minute, on a toy data set.")

st.header("The model in use")
st.markdown(f"**{MODELS.get({'my model': 'mine'}.get(cur.label, cur.label), cur.label)}** "
            f"(`{bundle.name}`), translating {bundle.langs[0]} → {bundle.langs[1]}. "
            "Change it in the sidebar.")
record = model_record(bundle.meta)
if record:
    st.table({"": [r[0] for r in record], "value": [r[1] for r in record]})
else:
    st.caption("This checkpoint records no training metadata.")

st.subheader("What it was trained on")
summary, toy_hash = _toy_data(DATASET_PATH.stat().st_mtime)
trained_hash = bundle.meta.get("data_sha256")
if cur.label != "my model" or trained_hash in (None, toy_hash):
    st.markdown(
        "The toy English→French set (`assets/toy_en_fr.tsv`, made by `assets/make_dataset.py`): sentences "
        "generated from a small grammar, one right translation each, lower case. Held-out sentences use "
        "subject/verb/object combinations never seen in training, so the held-out score measures generalisation "
        "to new combinations of known words."
    )
    st.dataframe(summary, hide_index=True, height="content")
    if trained_hash not in (None, toy_hash):
        st.caption("The data file has changed since this checkpoint was trained (its recorded hash differs); "
                   "the counts above are those of the current file.")
else:
    st.markdown("A corpus uploaded in *Train your own* (not the shipped toy set).")
