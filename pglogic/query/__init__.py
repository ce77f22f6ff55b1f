"""The logical query language: parse text into a tree, print a tree back, list its terms.

>>> from pglogic.query import parse, positive_terms, to_string
>>> tree = parse('("vitamin D benefits" OR "vitamin D supplements") and not "bone health"')
>>> to_string(tree)
'("vitamin D benefits" OR "vitamin D supplements") AND NOT "bone health"'
>>> positive_terms(tree)
['vitamin D benefits', 'vitamin D supplements']
"""

from pglogic.errors import QuerySyntaxError
from pglogic.query.ast import (
    And,
    Match,
    Node,
    Not,
    Or,
    Term,
    map_terms,
    matches,
    negated_only_terms,
    positive_matches,
    positive_terms,
    semantic_part,
    terms,
)
from pglogic.query.parser import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_TERMS,
    parse,
    plain_text_note,
    quoted_form,
    to_tree,
)
from pglogic.query.printer import quote_term, to_string, to_text

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_TERMS",
    "And",
    "Match",
    "Node",
    "Not",
    "Or",
    "QuerySyntaxError",
    "Term",
    "map_terms",
    "matches",
    "negated_only_terms",
    "parse",
    "plain_text_note",
    "positive_matches",
    "positive_terms",
    "quote_term",
    "quoted_form",
    "semantic_part",
    "terms",
    "to_string",
    "to_text",
    "to_tree",
]
