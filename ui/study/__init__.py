"""A study in the app: the participant's flow, the owner's study and report, the lesson's "Check yourself"."""
