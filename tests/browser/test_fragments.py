"""Local pickers rerun only their part of the page (st.fragment), and what they draw is still the real tensor.

The self-attention page's layer / head / query-word pickers and the positional page's offset k live in
fragments: changing one sends a rerun request for that fragment only (the browser's BackMsg carries its
fragment id; a full run carries none). Checked here in Chromium: the request is a fragment's, the numbers
drawn are the new head's (computed independently with the shipped checkpoint), and a sidebar intervention
toggled afterwards is still a full run whose effect reaches the fragment's figures, with the sidebar's
sentence unchanged.
"""

from __future__ import annotations

import math

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg

from explain.positional import block
from model.trace import Interventions
from tests.browser.test_browser import SENTENCE, analyse, assert_numbers_shown, bundle, content, sentence_input

pytestmark = pytest.mark.browser


class Reruns:
    """The rerun requests a tab sends over Streamlit's websocket, decoded: a list of fragment ids ("" = full run)."""

    def __init__(self, page):
        self.sent: list[str] = []
        page.on("websocket", lambda ws: ws.on("framesent", self._on_frame))

    def _on_frame(self, payload) -> None:
        if isinstance(payload, str):
            return
        msg = BackMsg.FromString(payload)
        if msg.WhichOneof("type") == "rerun_script":
            self.sent.append(msg.rerun_script.fragment_id)

    def since(self, n: int) -> list[str]:
        return self.sent[n:]


def flip(app, label: str) -> None:
    switch = app.page.get_by_role("switch", name=label, exact=True)
    app.act(app.sidebar.get_by_test_id("stCheckbox").filter(has=switch).locator("label").click)


def test_self_attention_head_picker_is_a_fragment_and_interventions_still_reach_it(app):
    reruns = Reruns(app.page)
    app.goto("self_attention", s=SENTENCE)
    head0 = analyse(SENTENCE).trace["enc.0.self_attn.weights"][0, 0, 0]  # layer 0, head 0, first word
    assert_numbers_shown(app, head0.tolist(), "softmax weights of layer 0, head 0")

    n = len(reruns.sent)
    app.choose("Head", "head 1")
    assert reruns.since(n) and all(reruns.since(n)), f"the head picker sent a full run: {reruns.since(n)}"
    head1 = analyse(SENTENCE).trace["enc.0.self_attn.weights"][0, 1, 0]
    assert not math.isclose(float(head1.max()), float(head0.max()), abs_tol=1e-3)
    assert_numbers_shown(app, head1.tolist(), "softmax weights of layer 0, head 1 after the picker")
    assert "encoder layer 0, head 1" in app.main_text()

    # an intervention in the sidebar: a full run, drawn into the fragment with the picker's choice kept
    n = len(reruns.sent)
    flip(app, "Positional encoding")
    assert "" in reruns.since(n), f"the sidebar switch did not rerun the page: {reruns.since(n)}"
    no_pe = analyse(SENTENCE, Interventions(positional_encoding=False)).trace["enc.0.self_attn.weights"][0, 1, 0]
    assert float((no_pe - head1).abs().max()) > 1e-3
    assert_numbers_shown(app, no_pe.tolist(), "head 1's weights with positional encoding off")
    assert "encoder layer 0, head 1" in app.main_text()
    assert sentence_input(app).input_value() == SENTENCE
    flip(app, "Positional encoding")  # back on
    assert_numbers_shown(app, head1.tolist(), "head 1's weights with positional encoding on again")


def test_positional_offset_is_a_fragment(app):
    reruns = Reruns(app.page)
    app.goto("positional", s=SENTENCE)
    k_box = app.main.get_by_role("spinbutton", name="Offset k", exact=True)
    n = len(reruns.sent)
    k_box.fill("5")
    app.act(lambda: k_box.press("Enter"))
    assert reruns.since(n) and all(reruns.since(n)), f"the offset sent a full run: {reruns.since(n)}"
    b = block(5, 1, bundle().config.d_model)  # the page's default pair index i = 1
    text = content(app)
    assert "k = 5" in text and f"{float(b[0, 0]):.5f}" in text and f"{float(b[0, 1]):.5f}" in text
    assert sentence_input(app).input_value() == SENTENCE
