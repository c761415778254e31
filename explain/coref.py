"""The coreference example, measured: where the model decides il or elle.

The toy data set's coreference template (assets/make_dataset.py) is "the <animal> didn't cross the <place>
because it was too <adjective>"; the adjective fits only the animal (tired, scared, hungry, lazy) or only the
place (wide, long, narrow, busy), and the French pronoun (il / elle) is the gender of the noun it fits. So
the model has to use the adjective (and that noun) when it writes the pronoun.

Two places could hold that decision:
- the encoder's self-attention, if a head of "it" read the deciding noun (the Illustrated Transformer's
  picture): `encoder_links` measures every head;
- the decoder's encoder-decoder attention, in the row that writes the pronoun (its input is "qu'"):
  `decision` reads that row's weight on the adjective in every layer and head, then switches off every head
  that reads the adjective (weight >= READS) at once, and each decoder layer's encoder-decoder attention (all
  its heads), and runs the model again, greedy and teacher-forced, to see whether the pronoun survives and
  what else changes. Switching a whole layer off is blunt: it often changes other words too, so it says
  little about the pronoun in particular; explain/pronoun.py traces the pair instead (activation patching).

Pure PyTorch; the app caches the results (ui/models.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from model.checkpoint import Bundle
from model.pipeline import analyse, prepare, teacher_forced
from model.trace import Interventions, Trace
from model.transformer import Config

ANIMAL_STATES = ("tired", "scared", "hungry", "lazy")  # fit only the animal
PLACE_STATES = ("wide", "long", "narrow", "busy")  # fit only the place
PRONOUNS = ("il", "elle")
LINK = 0.5  # an encoder head "links" "it" to a noun: weight >= LINK and >= 2x the other noun's
READS = 0.5  # a cross-attention row "reads" the adjective: head-average weight >= READS


@dataclass(frozen=True)
class Coref:
    it: int  # position of "it"
    animal: int  # position of the animal noun (the first noun)
    place: int  # position of the place noun (after "cross the")
    adjective: int  # position of the adjective that decides
    referent: int  # animal or place: the noun "it" refers to

    @property
    def other(self) -> int:
        return self.place if self.referent == self.animal else self.animal


def coref_parts(tokens: Iterable[str]) -> Coref | None:
    """The positions of the coreference sentence's words, or None for any other sentence."""
    t = list(tokens)
    if (
        len(t) != 11
        or t[0] != "the"
        or t[2:5] != ["didn't", "cross", "the"]
        or t[6:10] != ["because", "it", "was", "too"]
    ):
        return None
    if t[10] not in ANIMAL_STATES + PLACE_STATES:
        return None
    return Coref(it=7, animal=1, place=5, adjective=10, referent=1 if t[10] in ANIMAL_STATES else 5)


def partner(text: str) -> str | None:
    """The same coreference sentence with the adjective of the other kind ("tired" <-> "wide"), or None."""
    words = text.split()
    c = coref_parts(words)
    if c is None:
        return None
    adj = words[c.adjective]
    swap = dict(zip(ANIMAL_STATES, PLACE_STATES, strict=True)) | dict(zip(PLACE_STATES, ANIMAL_STATES, strict=True))
    return " ".join([*words[: c.adjective], swap[adj]])


@dataclass(frozen=True)
class EncoderLinks:
    """Where "it" looks in the encoder's self-attention, every layer and head."""

    referent: float  # the largest weight any head gives the deciding noun
    referent_head: tuple[int, int]  # (layer, head) of it
    other: float  # what that head gives the other noun
    other_max: float  # the largest weight any head gives the other noun
    strongest: tuple[int, int, int, float]  # (layer, head, key position, weight): the largest weight of "it"

    @property
    def links(self) -> bool:
        """Does a head pick out the deciding noun (>= LINK, and at least twice the other noun's weight)?"""
        return self.referent >= LINK and self.referent >= 2 * self.other


def encoder_links(trace: Trace, n_layers: int, c: Coref) -> EncoderLinks:
    rows = [trace[f"enc.{i}.self_attn.weights"][0, :, c.it] for i in range(n_layers)]  # each [H, Ts]
    best = max(
        ((i, h) for i in range(n_layers) for h in range(rows[i].shape[0])),
        key=lambda lh: float(rows[lh[0]][lh[1], c.referent]),
    )
    top = max(
        ((i, h, int(rows[i][h].argmax())) for i in range(n_layers) for h in range(rows[i].shape[0])),
        key=lambda x: float(rows[x[0]][x[1], x[2]]),
    )
    return EncoderLinks(
        float(rows[best[0]][best[1], c.referent]),
        best,
        float(rows[best[0]][best[1], c.other]),
        max(float(r[:, c.other].max()) for r in rows),
        (*top, float(rows[top[0]][top[1], top[2]])),
    )


@dataclass(frozen=True)
class LayerOff:
    """The model again with some encoder-decoder attention heads switched off: every head of one decoder layer
    (`layer`), or (layer -1) every head that reads the adjective."""

    layer: int
    translation: str  # greedy, with the heads off
    pronoun: str | None  # il / elle in that translation (None: neither)
    p_il: float  # teacher-forced on the unmodified translation, at the pronoun's position
    p_elle: float
    changed: tuple[str, ...] = ()  # the translation's other words that changed (position by position), in order


@dataclass(frozen=True)
class Decision:
    """Where il / elle is written: the decoder row, what it reads, and what happens without each layer."""

    text: str
    adjective: str
    adjective_pos: int
    translation: str
    pronoun: str  # il or elle, as the unmodified model writes it
    row: int  # decoder position that writes the pronoun (its input is the word before, "qu'")
    row_input: str
    reads: tuple[tuple[float, ...], ...]  # [layer][head]: the row's weight on the adjective
    p_il: float  # unmodified, at the row
    p_elle: float
    off: tuple[LayerOff, ...]  # one per decoder layer
    readers: tuple[tuple[int, int], ...] = ()  # (layer, head) of every head whose row reads the adjective >= READS
    readers_off: LayerOff | None = None  # all of them switched off at once (None: no head reads it that much)

    def average(self, layer: int) -> float:
        """The row's head-average weight on the adjective in `layer`."""
        return sum(self.reads[layer]) / len(self.reads[layer])

    @property
    def reading_layer(self) -> int:
        """The decoder layer whose row reads the adjective most (head average)."""
        return max(range(len(self.reads)), key=self.average)

    @property
    def flipped(self) -> tuple[int, ...]:
        """The layers without whose encoder-decoder attention the greedy translation loses this pronoun."""
        return tuple(o.layer for o in self.off if o.pronoun != self.pronoun)


def decision(bundle: Bundle, text: str, iv: Interventions | None = None) -> Decision | None:
    """Read and test where the pronoun is decided (None when `text` is not a coreference sentence or the
    model writes neither il nor elle)."""
    iv = iv or Interventions()
    p = prepare(bundle, text)
    c = coref_parts(p.tokens)
    if c is None:
        return None
    a = analyse(bundle, p, iv)
    out = list(a.out_tokens)
    pron = next((w for w in out if w in PRONOUNS), None)
    if pron is None:
        return None
    row = out.index(pron)  # decoder position t predicts out[t]: its input is out[t - 1]
    ids = {w: bundle.tgt_vocab.stoi[w] for w in PRONOUNS}
    cfg = bundle.config
    assert isinstance(cfg, Config), "the decision is read in the Transformer's cross-attention"
    n_dec = cfg.n_dec_layers
    reads = tuple(
        tuple(float(x) for x in a.trace[f"dec.{i}.cross_attn.weights"][0, :, row, c.adjective]) for i in range(n_dec)
    )
    probs = a.trace["probs"][0, row]

    def without(layer: int, heads: set[tuple[str, int]]) -> LayerOff:
        iv_off = replace(iv, heads_off=frozenset(iv.heads_off | heads))
        b = analyse(bundle, p, iv_off)
        tf = teacher_forced(bundle, p, a.translation, iv_off).trace["probs"][0, row]
        changed = tuple(w for i, w in enumerate(b.out_tokens) if i != row and (i >= len(out) or out[i] != w))
        return LayerOff(
            layer,
            b.translation,
            next((w for w in b.out_tokens if w in PRONOUNS), None),
            float(tf[ids["il"]]),
            float(tf[ids["elle"]]),
            changed,
        )

    H = cfg.n_heads
    off = tuple(without(i, {(f"dec.{i}.cross_attn", h) for h in range(H)}) for i in range(n_dec))
    readers = tuple((i, h) for i in range(n_dec) for h in range(H) if reads[i][h] >= READS)
    readers_off = without(-1, {(f"dec.{i}.cross_attn", h) for i, h in readers}) if readers else None
    return Decision(
        p.text,
        p.tokens[c.adjective],
        c.adjective,
        a.translation,
        pron,
        row,
        a.tgt_labels[row],
        reads,
        float(probs[ids["il"]]),
        float(probs[ids["elle"]]),
        off,
        readers,
        readers_off,
    )
