"""Prose of the positional-encoding page (pages/positional.py). Texts that state a number take it as an argument."""

INTRO = (
    "Attention compares every word with every other word, but nothing in it knows *where* a word stands: "
    "shuffle the input vectors and the outputs are shuffled the same way. So before the first layer the "
    "Transformer adds to each word's embedding a vector **PE(pos)** that depends only on its position. "
    "The paper uses fixed sine and cosine waves of different frequencies."
)
PE_OFF = (
    "The positional encoding is switched **off** in the sidebar: the whole app now runs the model "
    "without it (see section 5). The tables below show the encoding the model would add."
)
FORMULA = (
    r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right), \qquad "
    r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)"
)


def pairs(d_model: int) -> str:
    return (
        f"Dimensions come in pairs (2i, 2i+1): a sine and a cosine of the same angle, like the two hands of a "
        f"clock. Pair i turns by w_i = 1/10000^(2i/d_model) radians per position: the first pair fast (wavelength "
        f"2π ≈ 6.3 positions), the last slowly (wavelength ≈ 2π·10000). Here d_model = {d_model}, so i runs from 0 "
        f"to {d_model // 2 - 1}."
    )


SENTENCE_CAPTION = (
    "The encoder's input is src.input = src.embed + src.pos: the same PE row is added to whatever "
    "word stands at that position. Left columns (fast waves) change from row to row, right columns "
    "hardly."
)
ROTATION = (
    "For a fixed offset k, adding k to the position turns each (sin, cos) pair by the same angle k·w_i, "
    "whatever pos is. A rotation is a linear map, so one matrix M_k moves every position k steps on. "
    "This is why the paper expected the model to attend easily by *relative* position."
)
ROTATION_LATEX = (
    r"\begin{pmatrix} PE_{(pos+k,\,2i)} \\ PE_{(pos+k,\,2i+1)} \end{pmatrix} = "
    r"\begin{pmatrix} \cos k w_i & \sin k w_i \\ -\sin k w_i & \cos k w_i \end{pmatrix}"
    r"\begin{pmatrix} PE_{(pos,\,2i)} \\ PE_{(pos,\,2i+1)} \end{pmatrix}"
)


def shift_caption(float64_error: float) -> str:
    return (
        f"The same M_k for every pos. The error is the float32 rounding of the stored table: computed in float64, "
        f"the identity holds to {float64_error:.0e}."
    )


LAYOUTS = (
    "The Illustrated Transformer translates French → English and draws the encoding in two halves: all the "
    "sines on the left, all the cosines on the right. This model translates English → French and, like the "
    "paper (and its code), interleaves them: sin in the even dimensions 2i, cos in the odd ones 2i+1. Same "
    "numbers, other columns:"
)


def order_blind(same_translation: bool, max_diff: float) -> str:
    """Why the encoder cannot see word order without the encoding; `same_translation`: both orders translate alike;
    `max_diff`: the largest difference between the outputs, put back in order."""
    ending = (
        ": **both orders get the same translation**."
        if same_translation
        else ". Here the two translations still differ: a rounding-level difference tipped a near-tie between two "
        "candidate words during greedy decoding."
    )
    return (
        "Without the encoding, the encoder output for the permuted sentence is **the same set of vectors, "
        f"permuted** (the largest difference, {max_diff:.0e}, is float rounding). Encoder-decoder attention only "
        "takes weighted sums over the encoder's vectors, and a sum does not depend on the order of its terms, so the "
        "decoder gets the same input either way"
        + ending
        + " With the encoding on, the vectors differ, and the model can tell the two orders apart."
    )


SWITCH_CAPTION = (
    "Switching *Positional encoding* off in the sidebar applies to every page: the model was trained "
    "with it, so without it the decoder also loses track of where it is in its own output."
)
OTHER_CHOICES = (
    "- **Learned position embeddings** (one trained vector per position, as in ConvS2S, Gehring et al. 2017) work "
    "too: the paper tried them and got nearly identical results (its Table 3, row E).\n"
    "- The paper kept the sinusoids because they may let the model **extrapolate** to sentences longer than any "
    "seen in training, and because of the **relative-position** property (both reasons are in section 3.5): "
    "PE(pos+k) is a fixed linear function of PE(pos).\n"
    "- Later models also encode relative positions directly inside attention; the idea stays: attention "
    "alone is blind to order, so order must be put into the vectors."
)
