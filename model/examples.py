"""The example sentences the app, its lesson and the lecture notes share: one home for each.

The coreference pair is the Illustrated Transformer's "it" example in the toy data set's template
(assets/make_dataset.py): "the <animal> didn't cross the <place> because it was too <adjective>";
the adjective fits only the animal ("tired": il) or only the place ("wide": elle).
"""

COREFERENCE = "the animal didn't cross the street because it was too tired"  # the app's default sentence
COREFERENCE_WIDE = "the animal didn't cross the street because it was too wide"  # same, "it" = the street
COREFERENCE_FR = "l'animal n'a pas traversé la rue parce qu'il était trop fatigué"
STUDENT = "i am a student"  # the Illustrated Transformer's sentence, in this model's direction
STUDENT_FR = "je suis étudiant"
THINKING = "thinking machines"  # the Illustrated Transformer's self-attention example
