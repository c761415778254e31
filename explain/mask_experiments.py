"""What the masks do, shown on trained models: the padding mask in a real batch, and a model trained
without the look-ahead mask (the decoder page runs both live; viz/decoder.py draws the results).

- `padding_demo`: the sentence batched with a partner of another length, the shorter one padded with
  <pad>, the unmodified model run with the padding mask on and off, and what changes for the shorter
  sentence against the same sentence run on its own.
- `cheating_story`: the no-mask model and the base model on the same sentence, teacher-forced with a
  reference (where the no-mask model can copy the next word from its input) and generating greedily
  (where there is no next word to copy).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from model.checkpoint import Bundle
from model.data import pad
from model.decoding import greedy_batch, max_output_len
from model.examples import COREFERENCE, COREFERENCE_FR, STUDENT, STUDENT_FR
from model.pipeline import Analysis, TeacherForced, analyse, prepare, teacher_forced, token_labels
from model.trace import Interventions, Trace
from model.transformer import Config, padding_mask, traced
from model.vocab import BOS_ID, detokenize, tokenize

# --- Padding ---------------------------------------------------------------------------------------

LONG_PARTNER = COREFERENCE
SHORT_PARTNER = STUDENT
FRENCH_PARTNERS = (COREFERENCE_FR, STUDENT_FR)  # for fr-en


def padding_partner(n_tokens: int, bundle: Bundle) -> str:
    """A sentence of a different length to batch with a sentence of `n_tokens` tokens."""
    long, short = (LONG_PARTNER, SHORT_PARTNER) if bundle.direction == "en-fr" else FRENCH_PARTNERS
    return long if n_tokens < len(tokenize(long, bundle.langs[0])) else short


@dataclass(frozen=True)
class PaddingDemo:
    """Two sentences in one padded batch, the padding mask, and what it changes for the shorter one."""

    texts: tuple[str, str]
    labels: tuple[tuple[str, ...], ...]  # position-prefixed tokens of each padded row (with <eos>, <pad>)
    src: Tensor  # [B, T] ids, 0 = <pad>
    mask: Tensor  # [B, 1, 1, T] boolean padding mask, True = may attend
    short: int  # row of the shorter sentence
    n_real: int  # its real tokens (with <eos>)
    weights_on: Tensor  # [L, H, T, T] encoder self-attention of the short row, padding mask on
    weights_off: Tensor  # [L, H, T, T] the same with the padding mask off
    cross_on: Tensor  # [L, H, 1, T] encoder-decoder attention of the short row's first decoder step (mask on)
    cross_off: Tensor  # [L, H, 1, T] same, mask off
    out_alone: Tensor  # [n_real, D] encoder output of the short sentence run on its own
    out_on: Tensor  # [n_real, D] its encoder output inside the padded batch, mask on
    out_off: Tensor  # [n_real, D] same, mask off
    translation_alone: str
    translation_on: str
    translation_off: str

    @property
    def n_pad(self) -> int:
        return self.src.size(1) - self.n_real

    def pad_weight(self, on: bool) -> Tensor:
        """[L, H, n_real] total weight each real query of the short row gives to <pad> keys."""
        w = self.weights_on if on else self.weights_off
        return w[:, :, : self.n_real, self.n_real :].sum(-1)

    def out_change(self, on: bool) -> float:
        """Largest |difference| between the short sentence's encoder output in the batch and on its own."""
        return float((self.out_on if on else self.out_off).sub(self.out_alone).abs().max())


def padding_demo(bundle: Bundle, text: str, partner: str) -> PaddingDemo:
    """Batch `text` with `partner`, pad the shorter one, run the unmodified model with the padding mask on and off."""
    p_a, p_b = prepare(bundle, text), prepare(bundle, partner)
    src = pad([list(p_a.ids), list(p_b.ids)])  # [2, T]
    short = 0 if len(p_a.ids) <= len(p_b.ids) else 1
    n_real = len((p_a, p_b)[short].ids)
    tgt_in = torch.full((2, 1), BOS_ID, dtype=torch.long)  # [2, 1]: the first decoder step
    on, off = Interventions(), Interventions(padding_mask=False)
    tr_on, tr_off = traced(bundle.model, src, tgt_in, on), traced(bundle.model, src, tgt_in, off)
    alone = traced(bundle.model, (p_a, p_b)[short].src(), tgt_in[:1], on)
    cfg = bundle.config
    assert isinstance(cfg, Config), "the padding demo draws the Transformer's attention"
    L = cfg.n_enc_layers
    Ld = cfg.n_dec_layers

    def enc(tr: Trace) -> Tensor:
        return torch.stack([tr[f"enc.{i}.self_attn.weights"][short] for i in range(L)])  # [L, H, T, T]

    def cross(tr: Trace) -> Tensor:
        return torch.stack([tr[f"dec.{i}.cross_attn.weights"][short] for i in range(Ld)])  # [L, H, 1, T]

    labels = []
    for row in src.tolist():
        toks = [bundle.src_vocab.itos[i] for i in row]
        labels.append(tuple(token_labels(toks)))
    tgt_lang = bundle.langs[1]
    limit = max_output_len(bundle.model, n_real)  # the same length limit as when translated alone
    out_on = greedy_batch(bundle.model, src, on, limit)[short]
    out_off = greedy_batch(bundle.model, src, off, limit)[short]
    out_alone = greedy_batch(bundle.model, (p_a, p_b)[short].src(), on, limit)[0]

    def say(ids: list[int]) -> str:
        return detokenize(bundle.tgt_vocab.decode(ids), tgt_lang)

    return PaddingDemo(
        texts=(text, partner),
        labels=tuple(labels),
        src=src,
        mask=padding_mask(src, bundle.config.pad_id),
        short=short,
        n_real=n_real,
        weights_on=enc(tr_on),
        weights_off=enc(tr_off),
        cross_on=cross(tr_on),
        cross_off=cross(tr_off),
        out_alone=alone["enc.out"][0],
        out_on=tr_on["enc.out"][short, :n_real],
        out_off=tr_off["enc.out"][short, :n_real],
        translation_alone=say(out_alone),
        translation_on=say(out_on),
        translation_off=say(out_off),
    )


# --- The model trained without the look-ahead mask ---------------------------------------------


@dataclass(frozen=True)
class Cheating:
    """The no-mask model and the base model on the same sentence: teacher forcing vs generation."""

    reference: str
    cheat_tf: TeacherForced  # no-mask model, teacher-forced with the reference, look-ahead mask off (as trained)
    base_tf: TeacherForced  # base model, teacher-forced, mask on
    cheat: Analysis  # no-mask model, greedy generation (mask off, as trained)
    base: Analysis  # base model, greedy generation


CHEAT_IV = Interventions(look_ahead_mask=False)


def cheating_story(base: Bundle, cheat: Bundle, text: str, reference: str) -> Cheating:
    p_cheat, p_base = prepare(cheat, text), prepare(base, text)
    return Cheating(
        reference,
        teacher_forced(cheat, p_cheat, reference, CHEAT_IV),
        teacher_forced(base, p_base, reference, Interventions()),
        analyse(cheat, p_cheat, CHEAT_IV),
        analyse(base, p_base, Interventions()),
    )
