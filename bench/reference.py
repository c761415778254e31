"""The trusted reference for the benchmarks: torch.nn.Transformer with our embeddings and generator.

Same sizes, the same embeddings (scaled by sqrt(d_model), sinusoidal positions) and the same final
linear as `model.transformer.Transformer`; only the encoder and decoder stacks are torch's. It has
the `encode` / `decode` / `generator` split too, so `model.decoding` (greedy, beam) and
`model.evaluate` run on it unchanged, and `model.train.Trainer(model_factory=TorchReference)` trains
it with exactly our recipe. The initialisation is ours too (Xavier-uniform for every matrix, the
embeddings included), so only the encoder and decoder implementations differ.
"""

from __future__ import annotations

from torch import Tensor, nn

from model.trace import NO_TRACE, Trace
from model.transformer import Config, Embeddings, look_ahead_mask


class TorchReference(nn.Module):
    """nn.Transformer wrapped with the same embeddings, positional encoding and final linear.

    Interventions are not supported (the trace argument is accepted and ignored), except the
    look-ahead mask switch, so the no-mask experiment can be reproduced on it too.
    """

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.src_embed = Embeddings(cfg.src_vocab, cfg, "src")
        self.tgt_embed = Embeddings(cfg.tgt_vocab, cfg, "tgt")
        self.core = nn.Transformer(
            cfg.d_model,
            cfg.n_heads,
            cfg.n_enc_layers,
            cfg.n_dec_layers,
            cfg.d_ff,
            cfg.dropout,
            batch_first=True,
            norm_first=cfg.norm_first,
        )
        self.core.encoder.use_nested_tensor = False  # its prototype fast path (eval only) just warns here
        self.generator = nn.Linear(cfg.d_model, cfg.tgt_vocab)
        for p in self.parameters():  # the same initialisation as model.transformer.Transformer
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """[B, Ts] -> memory [B, Ts, D]."""
        return self.core.encoder(self.src_embed(src, Trace(record=False)), src_key_padding_mask=src == self.cfg.pad_id)

    def decode(self, memory: Tensor, src: Tensor, tgt_in: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """memory [B, Ts, D], src [B, Ts], tgt_in [B, Tt] -> [B, Tt, D]."""
        causal = trace.interventions.look_ahead_mask
        mask = ~look_ahead_mask(tgt_in.size(1), tgt_in.device)[0, 0] if causal else None  # True = may NOT attend
        return self.core.decoder(
            self.tgt_embed(tgt_in, Trace(record=False)),
            memory,
            tgt_mask=mask,
            tgt_key_padding_mask=tgt_in == self.cfg.pad_id,
            memory_key_padding_mask=src == self.cfg.pad_id,
            tgt_is_causal=causal,
        )

    def forward(self, src: Tensor, tgt_in: Tensor, trace: Trace = NO_TRACE) -> Tensor:
        """Teacher-forced logits [B, Tt, V]."""
        return self.generator(self.decode(self.encode(src, trace), src, tgt_in, trace))
