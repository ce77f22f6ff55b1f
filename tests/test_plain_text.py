"""Plain text that seems to ask for logic: the note every interface shows (it never changes
what runs: the text is searched as one dense term, as documented)."""

from __future__ import annotations

import pytest

from pglogic.query import plain_text_note, quoted_form


@pytest.mark.parametrize(
    ("text", "suggestion"),
    [
        ("grain AND NOT wheat", '"grain" AND NOT "wheat"'),
        ("(gold OR silver) AND NOT mining", '("gold" OR "silver") AND NOT "mining"'),
        ("NOT wheat", 'NOT "wheat"'),
        ("oil prices", None),
        ("rock and roll", None),  # lowercase words are words
        ("oil AND", None),  # no query to suggest
        ("ANDROID phones", None),
    ],
)
def test_the_quoted_form_of_operator_words(text: str, suggestion: str | None) -> None:
    assert quoted_form(text) == suggestion


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("grain AND NOT wheat", 'quote the terms: "grain" AND NOT "wheat"'),
        ("what licenses are not GPL?", "cannot exclude anything"),
        ("pasta without tomatoes", "cannot exclude anything"),
        ("museums except the Pergamon", "cannot exclude anything"),
        ("coffee exports from Brazil", None),
        ('"grain" AND NOT "wheat"', None),  # logical: nothing to say
        ("NOT (", None),  # not a query: its own error says so
        ("", None),
    ],
)
def test_the_note_for_plain_text(query: str, says: str | None) -> None:
    note = plain_text_note(query)
    assert (note is None) if says is None else (note is not None and says in note)
