"""Small tables drawn as text (ui.widgets.small_table): what they write, and the grid kept for big ones."""

import math

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from tests.apptest_util import read_table, tables
from ui.widgets import SMALL_TABLE, markdown_table


def test_numbers_are_written_as_the_grid_writes_them():
    df = pd.DataFrame(
        {
            "word": ["a", "b", "c", "d", "e"],
            "p": [0.95054923, 1.2e-06, -0.0, float("-inf"), float("nan")],
            "n": [1, 2, 3, 4, 5],
        }
    )
    lines = markdown_table(df, index=False).splitlines()
    assert lines[0] == "| word | p | n |"
    assert lines[1] == "| :--- | ---: | ---: |"  # words to the left, numbers to the right
    assert [row.split(" | ")[1] for row in lines[2:]] == ["0.9505", "1.2e-06", "0.0000", "-inf", ""]
    assert [row.split(" | ")[2] for row in lines[2:]] == ["1 |", "2 |", "3 |", "4 |", "5 |"]


def test_a_rounded_column_keeps_its_decimals():
    df = pd.DataFrame(
        {
            "variance": [63.21, 1.5],
            "weight": [0.123456, 0.5],
            "one": [1.0, 0.0],
            "float32": np.array([0.9505, 1.0], dtype=np.float32),
        }
    )
    rows = [line.split(" | ") for line in markdown_table(df, index=False).splitlines()[2:]]
    assert rows[0] == ["| 63.21", "0.123456", "1.0", "0.9505 |"]
    assert rows[1] == ["| 1.50", "0.500000", "0.0", "1.0000 |"]
    assert markdown_table(df[["float32"]] / 3, index=False).splitlines()[2] == "| 0.3168 |"  # not rounded: 4


def test_words_are_shown_literally():
    hostile = ["<script>alert(1)</script>", "a | b", "**bold**", "[link](javascript:x)", "two\nlines", "<eos>"]
    text = markdown_table(pd.DataFrame({"word": hostile, "x": range(len(hostile))}), index=False)
    assert "<script>" not in text and "](javascript" not in text and "**bold**" not in text
    assert len(text.splitlines()) == 2 + len(hostile)  # a newline in a word does not break the table
    back = read_table(text)
    assert back["word"].tolist() == [w.replace("\n", " ") for w in hostile]  # and each reads back as written
    assert "| two\u00a0lines |" in text and "\u00a0" not in markdown_table(pd.DataFrame({"w": ["a " * 9]}))
    assert back["x"].tolist() == list(range(len(hostile)))


def test_index_is_the_first_column_and_reads_back():
    df = pd.DataFrame(
        np.array([[1.23456, -2.0], [0.5, 3.0]]), index=["x + Sublayer(x)", "γ (learned)"], columns=["d0", "d1"]
    )
    text = markdown_table(df)
    assert text.splitlines()[0] == "|  | d0 | d1 |"
    back = read_table(text)
    assert list(back.index) == list(df.index) and list(back.columns) == ["d0", "d1"]
    assert np.allclose(back.to_numpy(), df.to_numpy())  # (d0 was rounded to 5 decimals: written with 5)
    named = markdown_table(df.rename_axis("row"))
    assert named.splitlines()[0] == "| row | d0 | d1 |"


def test_odd_frames():
    dup = pd.DataFrame([[1.5, "a"]], columns=["word", "word"], index=pd.Index(["r"], name="word"))
    assert markdown_table(dup).splitlines()[0] == "| word | word | word |"
    assert read_table(markdown_table(pd.DataFrame({"p": []}, dtype=float), index=False)).shape == (0, 1)


def test_read_table_refuses_prose():
    assert read_table("Some **text** | with a pipe") is None
    assert read_table("| a |\nnot a rule") is None


def _page(rows: int, cols: int) -> AppTest:
    def script(rows: int, cols: int) -> None:
        import pandas as pd

        from ui.widgets import small_table

        small_table(
            pd.DataFrame(
                [[r * c / 7 for c in range(cols)] for r in range(rows)], columns=[f"c{c}" for c in range(cols)]
            ),
            hide_index=True,
        )

    return AppTest.from_function(script, args=(rows, cols), default_timeout=30).run()


def test_a_small_table_is_text_and_a_big_one_a_grid():
    rows, cols = SMALL_TABLE
    small = _page(rows, cols)
    assert not small.exception and len(small.dataframe) == 0 and len(small.markdown) == 1
    assert tables(small)[0].shape == (rows, cols)
    assert math.isclose(tables(small)[0]["c3"].iloc[5], round(5 * 3 / 7, 4))
    for big in (_page(rows + 1, cols), _page(rows, cols + 1), _page(0, 0)):  # (no column: an empty grid)
        assert not big.exception and len(big.dataframe) == 1 and len(big.markdown) == 0
