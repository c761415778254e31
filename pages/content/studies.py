"""The Study page's prose."""

INTRO = (
    "Did anyone learn? A **study** measures it: participants answer a short concept test, follow the lesson, "
    "answer the test again on other sentences, then a few questions about the app. The test's questions are written "
    "and answered by the model itself, so every right answer is this model's real numbers. The report shows the "
    "class's gain, which questions and which steps of the lesson failed, and which misconceptions were chosen; "
    "figures of fewer than 5 people are never shown."
)
