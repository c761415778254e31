"""The encoder-decoder attention page's prose (pages/cross_attention.py lays it out). Texts that state a number
are functions of it."""

INTRO = (
    "The second sub-layer of every decoder block is where the translation meets the source sentence. Its "
    "**queries** come from the decoder (its stream after the masked self-attention, Y below), its **keys and "
    "values** from the encoder output "
    "`enc.out`: decoder position *t*, which reads word *t* and must write word *t + 1*, asks which source words "
    "matter for the word it is about to write. The weights form a target × source *alignment* matrix. The "
    "source's **padding mask** decides which of its keys exist at all. In the lecture's letters (W2): the "
    "decoder's first sublayer gives C = Attn(X′, X′) (masked self-attention over the French words X′), and this "
    "sublayer computes Attn(X₍₆₎, C): keys and values from the encoder's last output X₍₆₎ (after the paper's 6 "
    "layers; here `enc.out`), queries from C (here Y: C after its add & norm)."
)
CROSS_LATEX = (
    r"\begin{gathered}"
    r"\mathrm{Attention}(Q_{\text{dec}},K_{\text{enc}},V_{\text{enc}})=\mathrm{softmax}\!\left("
    r"\frac{Q_{\text{dec}}K_{\text{enc}}^{\top}}{\sqrt{d_k}}\right)V_{\text{enc}} \\[4pt] "
    r"Q_{\text{dec}}=YW^Q,\; K_{\text{enc}}=\mathrm{enc.out}\,W^K,\; V_{\text{enc}}=\mathrm{enc.out}\,W^V"
    r"\end{gathered}"
)


def cross_caption(n_src: int) -> str:
    return (
        "Rows: decoder positions, labelled with their input word; row *t* is writing word *t + 1*. Columns: "
        f"the {n_src} source positions (the encoder's output, ending with <eos>). Every row sums to 1. Pick the "
        "layer and head with the sharpest rows: on some sentences it is not the last layer."
    )


ALIGNMENT = "The alignment row by row (exact numbers)"

PADDING = (
    "Training runs on batches, and the sentences of a batch differ in length. Shorter ones are filled up with "
    "`<pad>` tokens so that the batch is a rectangle. The padding mask, shape [B, 1, 1, T], hides the `<pad>` "
    "*keys* from every query (in encoder self-attention, in encoder-decoder attention, and in the decoder), so "
    "a padded sentence is encoded exactly as if it were alone. Here your sentence shares a batch with another one."
)
PADDING_CAPTION = (
    "With the mask on, the <pad> columns are exactly 0 and the shorter sentence's encoding equals its encoding "
    "alone (up to rounding). With the mask off, its words also attend to <pad>, and its encoding (and possibly its "
    "translation) changes just because it was batched with a longer sentence."
)
WHO = "The three kinds of attention in the Transformer:"
OUTRO = (
    "After the last block, a linear layer and a softmax turn each decoder position into a probability for every "
    "word of the target vocabulary. In the lecture's letters (W2), one decoder block, its three sublayers "
    "(masked self-attention, this encoder-decoder attention, the dense feed-forward net) together, maps "
    "(X̃, X′) to H: X̃ the encoder's output (`enc.out`, the X₍₆₎ above), X′ the block's input (the French words "
    "so far, or the block below), H its output (`dec.{i}.add_norm3.out`).\n\n"
    "The paper's own code was released in Google Brain's Tensor2Tensor library (T2T); the lecture notes (DD) "
    "point to its notebook, hello_t2t.ipynb (github.com/tensorflow/tensor2tensor, "
    "tensor2tensor/notebooks), for a trained Transformer at full size."
)
