"""The questionnaires after the post-test, versioned with the instrument: SUS, raw NASA-TLX, and one item on how
much a participant feels they learned (set beside the measured gain in the report: Deslauriers et al. 2019 found
the two can point in opposite directions).

Each question is (key, text, scale): SUS answers 1-5 (Brooke 1996, "the system" read as "this app"), TLX answers
0-100 in steps of 5 (Hart & Staveland 1988; "performance" runs from perfect, 0, to failure, 100), the feeling of
learning 1-7.
"""

from __future__ import annotations

from collections.abc import Iterable

SUS_SCALE = (1, 5, "Strongly disagree", "Strongly agree")
SUS = (
    ("sus1", "I think that I would like to use this app frequently."),
    ("sus2", "I found the app unnecessarily complex."),
    ("sus3", "I thought the app was easy to use."),
    ("sus4", "I think that I would need the support of a technical person to be able to use this app."),
    ("sus5", "I found the various functions in this app were well integrated."),
    ("sus6", "I thought there was too much inconsistency in this app."),
    ("sus7", "I would imagine that most people would learn to use this app very quickly."),
    ("sus8", "I found the app very cumbersome to use."),
    ("sus9", "I felt very confident using the app."),
    ("sus10", "I needed to learn a lot of things before I could get going with this app."),
)
TLX_SCALE = (0, 100, "Very low", "Very high")
TLX = (
    ("tlx_mental", "Mental demand: how mentally demanding was the lesson?"),
    ("tlx_physical", "Physical demand: how physically demanding was it?"),
    ("tlx_temporal", "Temporal demand: how hurried or rushed was the pace?"),
    ("tlx_performance", "Performance: how successful were you in doing what you were asked? (0 perfect, 100 failure)"),
    ("tlx_effort", "Effort: how hard did you have to work to reach your level of performance?"),
    ("tlx_frustration", "Frustration: how insecure, discouraged, irritated, stressed and annoyed were you?"),
)
FEEL_SCALE = (1, 7, "Nothing at all", "A great deal")
FEEL = (("feel", "How much do you feel you learned about the Transformer from this lesson?"),)
CONFIDENCE = {1: "1 · a guess", 2: "2 · unsure", 3: "3 · fairly sure", 4: "4 · certain"}


def scale_of(key: str) -> tuple[int, int, int]:
    """(lowest, highest, step) of a questionnaire answer."""
    if key.startswith("sus"):
        return SUS_SCALE[0], SUS_SCALE[1], 1
    if key.startswith("tlx_"):
        return TLX_SCALE[0], TLX_SCALE[1], 5
    if key == "feel":
        return FEEL_SCALE[0], FEEL_SCALE[1], 1
    raise KeyError(key)


KEYS = tuple(k for k, _ in (*SUS, *TLX, *FEEL))


def unanswered(keys: Iterable[str]) -> str:
    """The questions `keys` as the survey names them, in its order: "using the app, questions 2, 5; workload:
    Effort; how much you learned"."""
    left = set(keys)
    sus = [k.removeprefix("sus") for k, _ in SUS if k in left]
    tlx = [text.split(":")[0] for k, text in TLX if k in left]
    parts = [
        *([f"using the app, question{'s' * (len(sus) > 1)} {', '.join(sus)}"] if sus else []),
        *([f"workload: {', '.join(tlx)}"] if tlx else []),
        *(["how much you learned"] if any(k in left for k, _ in FEEL) else []),
    ]
    return "; ".join(parts)
