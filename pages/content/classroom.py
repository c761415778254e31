"""The classroom page's prose (pages/classroom.py lays it out)."""

INTRO = (
    "Teach with the app on a projector while every student has it open too. Start a class and show its code "
    "or QR code: students who join **follow you**. Your page, sentence, model, switched-off parts and guided-lesson "
    "step appear on their screens within about a second. A student can leave to explore on their own and come "
    "back with one click. Ask the class what the model will do, watch the answers come in, then reveal the "
    "model's own answer."
)
TEACHER_KEY = (
    "Your teacher key. This browser stays the class's teacher after a reload by itself; on another browser or "
    "device, paste the key on this page to take the class back (or open its console). Keep it private: anyone "
    "who has it can lead the class. It is not in the join link or the QR code."
)
CONSOLE = (
    "The console: open this link (or scan its code) on your phone or a second laptop, away from the projector. "
    "It shows the votes of both rounds and the suggested next move as they come in, who follows and who does not, "
    "the snapshots and the board, and it has the plan's Back / Next and pause; it never changes what the projector "
    "shows unless you press one of those. The link holds your teacher key: do not project it."
)
CONSOLE_HERE = (
    "This device is your console: the projector shows the class. Back / Next, a question's moves and “Project "
    "this” here move the projector and the class; nothing else you do on this device reaches them."
)
LOOPBACK = (
    "Students' phones cannot open this link: it names this computer by a loopback address (localhost or "
    "127.0.0.1), which on every other device means that device itself. Open the app by this computer's network "
    "address instead (for example http://192.168.1.20:8501, started with `--server.address 0.0.0.0`: see the "
    "teachers' quick start in docs/teachers.md), and the link and QR code follow."
)
PRIVATE = (
    "Your own sentence and your own trained model stay yours: while you explore, nothing you do reaches "
    "the teacher or the other students."
)
ENDS = (
    "A class ends when its teacher ends it, or after two hours without a teacher action. Then "
    "everything it stored (its state, the question, the answers) is deleted."
)
ASK = (
    "A question is made from what you are showing now (the sentence, the model and what is switched off), "
    "and the model answers it. Students vote on their own; you lock the vote, let them discuss and vote again "
    "if the first vote calls for it, then reveal. Nobody sees the votes until you show them."
)
KINDS = {
    "attention": "Which word does a word attend to most in one head (encoder layer and head below)?",
    "next_word": "Given the first words of the translation, which word does the decoder pick next?",
    "head_off": "Does switching one more head off change the translation?",
    "no_mask": "Does the model trained without the look-ahead mask give the same translation as the shipped model?",
}
MORE_KINDS = {
    "click": "Click the tensor: which cell of one head's attention weights is largest in a word's row?",
    "scaling": "What does dividing the scores by √d_k do to a row of weights?",
    "look_ahead": "Which weights does the decoder's look-ahead mask set to zero?",
    "pos_column": "Which positional-encoding column changes fastest from word to word?",
    "head_zero": "What does switching a head off change inside its layer?",
}
