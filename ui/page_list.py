"""Every page of the app, in navigation order: plain data, read by app.py (navigation), the pages'
"next" links, the tests, the benchmarks and the screenshot script. Importing it needs no Streamlit.

A page's address is its file's stem (`/positional?s=...`); the `file` is relative to the project root.
`walkthrough` pages form the path from a sentence to its translation, in this order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ICON = ROOT / "assets" / "icon.png"  # the app's icon (the browser tab's), served by the app itself: nothing external


@dataclass(frozen=True)
class PageSpec:
    section: str
    file: str  # "pages/positional.py"
    title: str
    icon: str
    summary: str  # one line: what the page shows (docs/students.md, screenshot captions)
    walkthrough: bool = True
    # The page's pickers a class shares (their session-state keys): a teacher's layer, head or word is every
    # follower's too, so the projector and the laptops show one figure (ui/classroom/session.py `shared_state`).
    # A student's own choice in them keeps them following; the teacher's next change of a picker moves it again.
    view: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The file's stem, "positional": how tests and benchmarks name a page."""
        return Path(self.file).stem

    @property
    def url_path(self) -> str:
        """The page's address, "/self_attention": always the file's stem. On a fresh server Streamlit may
        first serve a deep link as an old-style pages/ app, which names a page by its file; the same name
        then finds the same page (see ui/shell.py)."""
        return self.name

    @property
    def path(self) -> Path:
        return ROOT / self.file


PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        "Start",
        "pages/lesson.py",
        "Guided lesson",
        ":material/school:",
        "One sentence in 25 short steps, from why a Transformer to its translation and how it was trained, "
        "each with one figure and the numbers to notice; Back / Next, and a link to every step",
        walkthrough=False,
    ),
    PageSpec(
        "Start",
        "pages/classroom.py",
        "Classroom",
        ":material/groups:",
        "Teach a class: students join with a code or a QR code and follow your page, sentence and "
        "switches; ask them what the model will do, watch their answers, then reveal the model's",
        walkthrough=False,
    ),
    PageSpec(
        "Start",
        "pages/studies.py",
        "Study",
        ":material/science:",
        "Measure learning: a concept test the model writes and answers, before and after the lesson, with "
        "consent, conditions, retention, and a report of the gain, the items and the lesson's steps",
        walkthrough=False,
    ),
    PageSpec(
        "Start",
        "pages/overview.py",
        "Overview",
        ":material/account_tree:",
        "The sentence and its translation, the encoder-decoder stack block by block, shapes and sizes "
        "beside the paper's base model",
    ),
    PageSpec(
        "Start",
        "pages/before.py",
        "Before the Transformer",
        ":material/history:",
        "Your sentence through a recurrent encoder-decoder with attention: the encoder word by word, one "
        "decoder step's scores, α and context, the alignment matrix; then the same formulas on the "
        "Transformer's encoder-decoder attention, and the two measured side by side",
    ),
    PageSpec(
        "Start",
        "pages/why_attention.py",
        "Why attention",
        ":material/speed:",
        "The paper's Table 1 (complexity, sequential operations, path length), a calculator, and its results",
    ),
    PageSpec(
        "Encoder",
        "pages/tokens.py",
        "Tokens and embeddings",
        ":material/token:",
        "Words to tokens to ids, one-hot vectors times the embedding table, scaled by √d_model",
    ),
    PageSpec(
        "Encoder",
        "pages/positional.py",
        "Positional encoding",
        ":material/waves:",
        "The sine/cosine formula with numbers, the encoding of the sentence, PE(pos + k) as a rotation of "
        "PE(pos), and what happens without it",
    ),
    PageSpec(
        "Encoder",
        "pages/self_attention.py",
        "Self-attention, step by step",
        ":material/visibility:",
        "One word through one head: query, keys and values, scores divided by √d_k, softmax, the weighted sum",
        view=(
            "self_attention_mode",
            "self_attention_layer",
            "self_attention_head",
            "self_attention_word",
            "self_attention_tb_word",
        ),
    ),
    PageSpec(
        "Encoder",
        "pages/multi_head.py",
        "Multi-head attention",
        ":material/view_column:",
        "Every head of a layer side by side, one head in detail, concatenation and W_O, switching heads off",
        view=("multi_head_kind", "multi_head_layer", "multi_head_head", "multi_head_word"),
    ),
    PageSpec(
        "Encoder",
        "pages/encoder.py",
        "The encoder layer",
        ":material/layers:",
        "Residual connection, LayerNorm in two steps, the feed-forward net, one word through the stack",
        view=("encoder_layer", "encoder_sub", "encoder_word"),
    ),
    PageSpec(
        "Decoder",
        "pages/decoder.py",
        "Decoder and masking",
        ":material/masks:",
        "The decoder block, the look-ahead mask added to the scores, and a model trained without it",
        view=("decoder_block_layer", "decoder_renorm_row"),
    ),
    PageSpec(
        "Decoder",
        "pages/cross_attention.py",
        "Encoder-decoder attention",
        ":material/compare_arrows:",
        "Each target position reads the source sentence; the source's padding mask",
        view=("cross_layer", "cross_head"),
    ),
    PageSpec(
        "Decoder",
        "pages/output.py",
        "Output and decoding",
        ":material/output:",
        "Final linear layer and softmax over the French vocabulary, the loss, greedy decoding and beam search",
    ),
    PageSpec(
        "Look inside",
        "pages/tracing.py",
        "Causal tracing",
        ":material/biotech:",
        "Two sentences one word apart: put back one vector of one run into the other, layer by layer and "
        "position by position, and see which parts carry the difference (il or elle)",
    ),
    PageSpec(
        "Train",
        "pages/training.py",
        "Train your own",
        ":material/model_training:",
        "Train a small Transformer in your session: data, model and recipe settings, the learning-rate "
        "schedule, live progress, then every page shows your model",
        walkthrough=False,
    ),
)


_BY_NAME = {p.name: p for p in PAGES}  # (every page's run looks its page up: a dict, not a Path per page)


def by_name(name: str) -> PageSpec:
    """The page whose file stem is `name` ("self_attention"); KeyError for no page."""
    return _BY_NAME[name]


def by_file(file: str) -> PageSpec:
    """The page of `file` ("pages/self_attention.py")."""
    return by_name(Path(file).stem)


DEFAULT = by_name("overview")  # what "/" forwards to (by name: the guided lesson is listed first)


def next_page(name: str) -> PageSpec | None:
    """The walkthrough page after `name`, or None at the end (or for a page outside the walkthrough)."""
    walk = [p for p in PAGES if p.walkthrough]
    names = [p.name for p in walk]
    if name not in names or names.index(name) == len(walk) - 1:
        return None
    return walk[names.index(name) + 1]
