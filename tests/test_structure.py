"""The house's rules, read from the code: what each package may import, no import circle, no file too long.

The table is docs/contributors.md's ("How it is built"); a change to it is a deliberate act in both places.
Imports are read with `ast` (every `import` and `from ... import`, inside functions too, but not under
`if TYPE_CHECKING:`), so a lazy import cannot hide an arrow.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> the packages of ours it may import (itself always). Top-level modules count as packages.
MAY_IMPORT = {
    "model": set(),
    "explain": {"model"},
    "viz": {"model", "explain"},
    "serving": set(),
    "classroom": {"serving"},
    "study": {"serving"},
    "training": {"model", "serving"},
    "ui": {"model", "explain", "viz", "serving", "classroom", "study", "training"},
    "pages": {"ui", "viz", "explain", "model"},
    "app": {"ui"},
    "tools": set(),
    "bench": {"model", "explain", "viz", "serving", "classroom", "study", "training", "ui", "tools", "pages"},
    "assets": {"model", "explain", "viz", "serving", "classroom", "ui", "tools"},
    "deploy": {"serving", "tools"},
    "tests": None,  # anything
}
OURS = set(MAY_IMPORT)
# third-party packages only some rooms may use
STREAMLIT_ROOMS = {"ui", "pages", "app", "tests", "bench", "assets", "tools"}  # tools: ws_client speaks its protocol
DRAWING = {"plotly", "pandas"}
DRAWING_ROOMS = {"viz", "ui", "pages", "tests", "bench", "assets"}
MAX_LINES = 600
MAX_PAGE_LINES = 180  # a page is widgets -> one call -> a viz builder -> render (DESIGN.md); its sections live in ui/


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every Python file of ours."""
    found = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in (".venv", ".git") or rel.parts[0].startswith("."):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = modules()


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _main_block(node: ast.If) -> bool:
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def imports(path: Path, name: str, main_block: bool = True) -> set[str]:
    """The modules `path` imports (dotted), resolved to our modules where they are ours; without `main_block`,
    not those of its `if __name__ == "__main__":` block (run as a script, the module is `__main__`: no circle)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and (_type_checking(node) or (not main_block and _main_block(node)))
        for body in node.body
        for n in ast.walk(body)
    }
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: up from this module's package
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in MODULES else base)
    return out


def room(name: str) -> str:
    return name.split(".")[0]


GRAPH = {name: imports(path, name) for name, path in MODULES.items()}
ON_IMPORT = {name: imports(path, name, main_block=False) for name, path in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_import_follows_the_table(name):
    here = room(name)
    assert here in MAY_IMPORT, f"{name}: a new top-level room; add it to MAY_IMPORT and docs/contributors.md's table"
    allowed = MAY_IMPORT[here]
    wrong = sorted(
        i for i in GRAPH[name] if room(i) in OURS and room(i) != here and allowed is not None and room(i) not in allowed
    )
    assert not wrong, f"{name} imports {wrong}: {here}/ may import only {sorted(allowed)}"
    if here not in STREAMLIT_ROOMS:
        assert not any(room(i) == "streamlit" for i in GRAPH[name]), f"{name} imports streamlit"
    if here not in DRAWING_ROOMS:
        assert not any(room(i) in DRAWING for i in GRAPH[name]), f"{name} imports plotly or pandas"


def test_no_pickle_outside_tests():
    users = sorted(n for n, deps in GRAPH.items() if "pickle" in deps and room(n) != "tests")
    assert not users, f"pickle is imported by {users}: nothing may be unpickled (training/messages.py)"


def test_no_import_circle():
    """No cycle among our modules (a package's __init__ importing its own modules is not one)."""
    ours = {n: {d for d in deps if d in MODULES and d != n} for n, deps in ON_IMPORT.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in ours[n]:
            if n == d.rpartition(".")[0] or d == n.rpartition(".")[0]:
                continue  # a package and its own module
            if state.get(d) == 1:
                cycle = stack[stack.index(d) :] + [d]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(ours):
        if n not in state:
            visit(n)


def test_no_file_is_too_long():
    """Every Python file of ours: the app's, its tests', the benchmarks', the dataset's maker."""
    long = sorted((name, n) for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES)
    assert not long, f"over {MAX_LINES} lines: {long} (split by concern)"


def test_no_page_is_too_long():
    long = sorted(
        (name, n)
        for name, path in MODULES.items()
        if name.startswith("pages.")
        and ".content" not in name
        and (n := len(path.read_text().splitlines())) > MAX_PAGE_LINES
    )
    assert not long, f"pages over {MAX_PAGE_LINES} lines: {long} (move a section into ui/)"


def test_the_readme_states_the_table():
    readme = (ROOT / "docs" / "contributors.md").read_text()
    for pkg, allowed in MAY_IMPORT.items():
        if pkg in ("tests", "app", "bench", "assets"):
            continue
        row = f"| `{pkg}/` | " + (", ".join(f"`{a}/`" for a in sorted(allowed)) if allowed else "nothing of ours")
        assert row in readme, f"docs/contributors.md's import table lacks: {row}"


# What viz/ never calls, not even for a notice line: the network's layers and losses (explain/recompute.py recomputes
# the ones a page sets beside the model's numbers) and the functions of its formulas (the sinusoidal encoding, the
# one-hot rows, the activations): those are explain/'s and model/'s.
RECOMPUTES = {
    *("softmax", "log_softmax", "cross_entropy", "nll_loss", "layer_norm", "linear", "one_hot"),
    *("sin", "cos", "tan", "tanh", "sigmoid", "relu", "gelu"),
}
# Arithmetic a notice line may do to state a number about what its figure draws ("a sentence that states a number
# computes it", DESIGN.md), but a builder of a figure, table or record may not: a matrix product (a lookup, a
# rotation, a cosine), e^x, a power, a square root, a variance or standard deviation. A mean along the last axis (one
# number per word over its features, as LayerNorm takes it) counts too; a mean over heads or words, drawn, does not.
ARITHMETIC = {
    "matmul",
    "mm",
    "bmm",
    "mv",
    "einsum",
    "dot",
    "inner",
    "outer",
    "tensordot",
    "exp",
    "pow",
    "var",
    "std",
    "sqrt",
}
MATH_MODULES = {"math", "numpy", "torch", "scipy"}  # a bare name imported from these is their function
# Formulas still drawn where they are computed, to move to explain/ with their files' next change (an entry that
# no longer flags anything fails, so the list only shrinks).
NOT_YET_MOVED: dict[str, str] = {}


def _is_notice(function: str) -> bool:
    return function.endswith("_notice") or function.startswith("notice_")


def _last_axis(call: ast.Call) -> bool:
    """mean(-1), mean(dim=-1), mean(axis=-1): the per-word statistic over the features."""
    args = [*call.args, *(k.value for k in call.keywords if k.arg in ("dim", "axis"))]
    return any(
        isinstance(a, ast.UnaryOp)
        and isinstance(a.op, ast.USub)
        and isinstance(a.operand, ast.Constant)
        and a.operand.value == 1
        for a in args
    )


def formulas_in(source: str, module: str = "viz.example") -> list[str]:
    """The formulas a viz/ module computes itself, each as "module:function:line what" (see RECOMPUTES and
    ARITHMETIC). Functions are named by their qualified name (Class.method); a lambda counts as its function. A
    function of ours (`one_hot` from explain/, `el.affine`) is drawn, not computed, whatever its name."""
    tree = ast.parse(source)
    imported = [
        (node.module or "" if isinstance(node, ast.ImportFrom) else alias.name, alias.asname or alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    theirs = {name for origin, name in imported if origin.split(".")[0] in MATH_MODULES}  # from math import sin
    ours = {name.split(".")[0] for origin, name in imported if origin.split(".")[0] in OURS}  # from explain import x
    found: list[str] = []

    def called(call: ast.Call) -> str:
        """The name a call is made by, or "" for a function of ours or a builtin (max, sum, round)."""
        func, root = call.func, call.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and (root.id in ours or (func is root and root.id not in theirs)):
            return ""
        return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, f"{where}.{child.name}" if where else child.name)
                continue
            name = called(child) if isinstance(child, ast.Call) else ""
            matmul = isinstance(child, ast.BinOp) and isinstance(child.op, ast.MatMult)
            summary = (
                matmul or name in ARITHMETIC or (isinstance(child, ast.Call) and name == "mean" and _last_axis(child))
            )
            if name in RECOMPUTES or (summary and not _is_notice(where.rpartition(".")[2])):
                found.append(f"{module}:{where or '<module>'}:{child.lineno} {'@' if matmul else name + '(...)'}")
            visit(child, where)

    visit(tree, "")
    return found


def test_viz_only_draws():
    """viz/ draws what model/ and explain/ computed: no softmax, loss, layer or encoding of its own, and outside the
    notice lines no matrix product, variance, square root or per-word mean (explain/positional.py,
    explain/embeddings.py and explain/layers.py compute the encoding's table and its rotation, the embedding lookup
    and LayerNorm's numbers; explain/recompute.py one word's steps through a head)."""
    found = [f for name, path in MODULES.items() if room(name) == "viz" for f in formulas_in(path.read_text(), name)]
    left = [f for f in found if f.rsplit(":", 1)[0] not in NOT_YET_MOVED]  # "module:function"
    assert not left, f"a formula computed in viz/ (move it to explain/): {left}"
    stale = [k for k in NOT_YET_MOVED if not any(f.startswith(k + ":") for f in found)]
    assert not stale, f"NOT_YET_MOVED lists what no longer computes a formula (drop it): {stale}"


@pytest.mark.parametrize(
    "source",
    [
        "def rotation(a):\n    return torch.cos(a), torch.sin(a)",  # the encoding rebuilt (viz/positional.py's, moved)
        "from math import sin\ndef worked(a):\n    return sin(a)",
        "def lookup(oh, E):\n    return oh @ E",  # the embedding lookup (viz/embeddings.py's, moved)
        "def norm_stats(x):\n    return x.mean(-1), x.var(-1, unbiased=False)",  # LayerNorm's statistics
        "def stats(x):\n    return x.mean(dim=-1) + x.mean(-n)",
        "def stage_table(unit):\n    return np.dot(unit, unit[0])",  # cosines (viz/layers.py's, moved)
        "def weights(s):\n    return s.softmax(-1)",
        "def histogram(s, d_k):\n    return s / math.sqrt(d_k)",  # ÷ √d_k (viz/scaling.py's, moved)
        "def weights_notice(s):\n    return f'{s.softmax(-1).max():.2f}'",  # no softmax even in a notice
        "def frequencies(d):\n    return torch.pow(10000.0, torch.arange(d) / d)",
        "class Step:\n    def computed(self):\n        return self.x @ self.W",
        "def figure(x):\n    return go.Figure(go.Scatter(y=[v.exp() for v in x]))",
    ],
)
def test_the_viz_rule_catches_a_formula(source):
    assert formulas_in(source), f"not flagged: {source!r}"


@pytest.mark.parametrize(
    "source",
    [
        "def figure(w):\n    fig = go.Figure(go.Heatmap(z=w.tolist()))\n    return fig.update_layout(height=3)",
        "def head_average(w):\n    return w.mean(0)",  # drawn: the heads' average pattern
        "def table(x):\n    return pd.DataFrame({'max': x.abs().max(-1).values, 'norm': x.norm(dim=-1)})",
        "def cos_notice(u, v):\n    return f'{float(u @ v / np.linalg.norm(u)):.2f} {u.std():.1f} {u.mean(-1)}'",
        "from explain.embeddings import one_hot\ndef rows(ids):\n    return one_hot(ids, 5)",  # explain's, drawn
        "from explain import layers as el\ndef table(n):\n    return el.row_stats(n).std, el.affine(n.normed, 1, 0)",
        "import explain.embeddings\ndef rows(ids):\n    return explain.embeddings.one_hot(ids, 5)",
    ],
)
def test_the_viz_rule_lets_drawing_pass(source):
    assert not formulas_in(source), source


def test_every_setting_is_in_the_operators_table():
    """Every GLASS_* variable the app, its services and its deployment read has its row in docs/operators.md."""
    used = set()
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT).parts
        if (
            not path.is_file()
            or rel[0] in (".venv", ".git", "tests", "bench", "assets", "docs", "data")
            or path.suffix not in (".py", ".sh", ".yaml", ".cfg", ".in", "")
        ):
            continue
        used |= set(re.findall(r"\bGLASS_[A-Z_]*[A-Z]\b", path.read_text(errors="ignore")))
    table = set(re.findall(r"^\| `(GLASS_[A-Z_]+)` \|", (ROOT / "docs" / "operators.md").read_text(), re.M))
    assert used, "no setting found: the scan is broken"
    assert not used - table, f"settings without a row in docs/operators.md: {sorted(used - table)}"
    assert not table - used, f"rows for settings nothing reads: {sorted(table - used)}"


def test_shipped_model_names_are_the_checkpoints():
    """The shipped models' names live in model/checkpoint.py (SHIPPED_MODELS); classroom/ may not import model/, so
    its list of models a class may share is a copy, held to the original here, as are the sidebar's labels."""
    from classroom.rules import SHAREABLE_MODELS
    from model.checkpoint import SHIPPED_MODELS
    from ui.state import MODELS

    assert SHAREABLE_MODELS == tuple(SHIPPED_MODELS)
    assert list(MODELS) == [*SHIPPED_MODELS, "mine"]


def test_the_option_limit_is_the_class_stores():
    """A class's question options are made in explain/questions.py and checked by the class store
    (classroom/rules.py); neither room may import the other, so explain's limit is a copy, held to the store's."""
    from classroom.rules import MAX_OPTION as STORE_LIMIT
    from explain.questions import MAX_OPTION

    assert MAX_OPTION == STORE_LIMIT
