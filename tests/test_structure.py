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
SIZE_LIMITED = ("model", "explain", "viz", "ui", "pages", "serving", "classroom", "study", "training")


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
    long = sorted(
        (name, n)
        for name, path in MODULES.items()
        if room(name) in SIZE_LIMITED and (n := len(path.read_text().splitlines())) > MAX_LINES
    )
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


RECOMPUTES = {"softmax", "log_softmax", "cross_entropy", "nll_loss", "layer_norm", "linear"}


def test_viz_only_draws():
    """viz/ draws what model/ and explain/ computed: no softmax, loss or layer of its own (explain/recompute.py
    recomputes the formulas the pages set beside the model's numbers)."""
    found = []
    for name, path in MODULES.items():
        if room(name) != "viz":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RECOMPUTES:
                found.append(f"{name}:{node.lineno} .{node.func.attr}(...)")
    assert not found, f"a formula computed in viz/ (move it to explain/): {found}"


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
