"""Texts of the passage tests: a central-bank paragraph to repeat past the model's window, and a
wheat paragraph that a long story ends with (invisible to one vector per document)."""

FILLER = (
    "The central bank left its benchmark interest rate unchanged on Tuesday, saying inflation "
    "remained within its target range while the currency held steady against the dollar. "
)
WHEAT = (
    "Separately, the agriculture ministry said wheat exports rose sharply as farmers sold "
    "their wheat harvest abroad and grain elevators filled with wheat."
)
