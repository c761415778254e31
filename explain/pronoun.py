"""il or elle, measured by tracing: where the coreference sentence's adjective reaches the pronoun.

The toy set's coreference sentence, "the <animal> didn't cross the <place> because it was too <adjective>", has a
partner with the adjective of the other kind ("tired" <-> "wide"): one word apart, and when the two nouns differ
in gender the model writes il in one and elle in the other. `story` traces that pair (explain/tracing.py) at the
pronoun: which encoder position's vector brings the pronoun back, where the decoder's stream at the pronoun picks
the difference up, which encoder-decoder heads bring it, and what hiding the adjective from each layer loses.
When both nouns have the same gender the model writes the same pronoun with either adjective: the adjective
cannot change it, and there is nothing to trace at the pronoun.

The judging words of the pages' sentences come from these numbers only, under `explain.tracing.HALF`.
"""

from __future__ import annotations

from dataclasses import dataclass

from explain.coref import PRONOUNS, coref_parts, partner
from explain.tracing import HALF, Pair, Tracing, at_position, pair, trace_pair
from model.checkpoint import Bundle
from model.pipeline import prepare
from model.trace import Interventions

GENDER = {"il": "masculine", "elle": "feminine"}


@dataclass(frozen=True)
class Story:
    """The pronoun of a coreference sentence traced against its partner (tracing None when there is nothing to
    trace: the same pronoun in both, or no pronoun)."""

    text: str
    partner: str
    pronoun: str | None  # what the model writes for `text` (il / elle; None: neither)
    partner_pronoun: str | None
    it: int  # source positions
    adjective: int
    animal: int
    place: int
    tracing: Tracing | None

    @property
    def same_pronoun(self) -> bool:
        return self.pronoun is not None and self.pronoun == self.partner_pronoun

    @property
    def words(self) -> tuple[str, ...]:
        return self.tracing.pair.clean.tokens if self.tracing else tuple(self.text.split())

    # --- the numbers the sentences use, each one cell (or the extreme of a few) of the tracing ---------------

    @property
    def grids(self) -> Tracing:
        """The tracing the numbers below read (a story is told only when it was traced)."""
        assert self.tracing is not None, "this story was not traced"
        return self.tracing

    @property
    def p(self) -> Pair:
        return self.grids.pair

    def encoder_at(self, position: int) -> tuple[float, float]:
        """(least, most) share restored by the encoder's vector at `position`, over its layers."""
        g = self.grids.encoder
        col = [row[position] for row in g.share]
        return min(col), max(col)

    def encoder_elsewhere(self) -> tuple[int, float]:
        """(position, share): the most any position but the adjective brings back, at any encoder layer."""
        g = self.grids.encoder
        return max(
            ((j, row[j]) for row in g.share for j in range(len(g.columns)) if j != self.adjective), key=lambda x: x[1]
        )

    def decoder_after(self, layer: int, part: str) -> float:
        """Share restored by the decoder's stream at the pronoun after `part` ("self-attn", "enc-dec attn", "FFN")
        of decoder `layer`."""
        g = self.grids.decoder
        return g.share[g.rows.index(f"layer {layer} after {part}")][-1]

    def heads_together(self, layer: int) -> float:
        g = self.grids.heads
        return g.share[g.rows.index(f"layer {layer} all heads")][-1]

    def best_head(self, hidden: tuple[str, int] | None = None) -> tuple[int, int, float]:
        """(layer, head, share) of the single encoder-decoder head that brings back the most, leaving out a
        `hidden` (module, head) (a lesson plan's mystery head)."""
        g = self.grids.heads
        out = []
        for r, label in enumerate(g.rows):
            words = label.split()
            if words[2] == "all":
                continue
            layer, head = int(words[1]), int(words[3])
            if hidden != (f"dec.{layer}.cross_attn", head):
                out.append((layer, head, g.share[r][-1]))
        return max(out, key=lambda x: x[2])

    def hidden_loss(self, row: str) -> float:
        """Share lost when the adjective is hidden from one attention layer (a row label of the mask grid, e.g.
        "decoder layer 0 enc-dec attn", or "every layer")."""
        g = self.grids.mask
        return g.share[g.rows.index(row)][self.adjective]

    def first_carrying_layer(self) -> int | None:
        """The first decoder layer after whose encoder-decoder attention the stream at the pronoun carries at least
        HALF of the difference (None: none does)."""
        n = sum(1 for r in self.grids.decoder.rows if r.endswith("enc-dec attn"))
        return next((i for i in range(n) if self.decoder_after(i, "enc-dec attn") >= HALF), None)


def pronoun_in(words: tuple[str, ...]) -> tuple[int, str] | None:
    return next(((i, w) for i, w in enumerate(words) if w in PRONOUNS), None)


def story(bundle: Bundle, text: str, iv: Interventions | None = None) -> Story | None:
    """The pronoun story of a coreference sentence (None for any other sentence, or a model of another language)."""
    tokens = prepare(bundle, text).tokens
    c = coref_parts(tokens)
    if c is None or bundle.langs[1] != "fr":
        return None
    text = " ".join(tokens)
    other = partner(text)
    assert other is not None  # a coreference sentence (c above) always has a partner
    first = pair(bundle, text, other, iv=iv)
    mine, theirs = pronoun_in(first.clean_words), pronoun_in(first.corrupt_words)
    pron, their_pron = (mine[1] if mine else None), (theirs[1] if theirs else None)
    tracing = None
    if mine is not None and their_pron is not None and pron != their_pron:
        p = first if first.position == mine[0] else at_position(bundle, first, mine[0])
        tracing = trace_pair(bundle, p, every_position=False) if p.traceable else None
    return Story(text, other, pron, their_pron, c.it, c.adjective, c.animal, c.place, tracing)
