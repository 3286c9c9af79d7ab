"""PyYAML's complaints in an author's words, at the line the mistake is on.

PyYAML names its parser's tokens ("expected <block end>, but found '<block mapping start>'") and reports
some mistakes where it noticed them rather than where they are: a line without its ':' is reported on the
*next* line, an unclosed quote at the end of the text. `describe` turns an error into what is wrong, said
plainly, and the line (0-based, within the YAML text) an author has to fix.
"""
from __future__ import annotations

import yaml

# (what the parser says, what an author reads, whether the mistake is where the parser *started* the
# construct it could not finish (its context mark) rather than where it gave up (its problem mark)).
PLAIN = (
    ("could not find expected ':'",
     "this line is not 'key: value': add the ':' after the key, or put a text that runs over several lines "
     "in quotes", True),
    ("mapping values are not allowed",
     "a second ': ' on this line: put a text containing ': ' in quotes (or the line is indented further "
     "than the one above it)", False),
    ("found character '\\t'", "a tab is used for indenting: indent with spaces", False),
    ("found a tab character", "a tab is used for indenting: indent with spaces", False),
    ("found unexpected end of stream", "a quote opened on this line is never closed", True),
    ("expected <block end>, but found '<block sequence start>'",
     "this '- ' item is indented differently from the items above it: line them up with the same number of "
     "spaces", False),
    ("expected <block end>, but found '-'",
     "this '- ' item is indented differently from the items above it: line them up with the same number of "
     "spaces", False),
    ("expected <block end>",
     "this line is indented differently from the lines above it: keys of one block line up with the same "
     "number of spaces", False),
    ("did not find expected key",
     "this line does not line up with the keys above it: check its indentation (or a quote left open)", False),
    ("did not find expected '-' indicator",
     "this line does not line up with the '- ' items above it: check its indentation", False),
    ("expected ',' or ']'", "a list opened with '[' on this line is not closed with ']' (or its items are not "
     "separated by commas)", True),
    ("expected ',' or '}'", "a mapping opened with '{' on this line is not closed with '}' (or its entries are "
     "not separated by commas)", True),
    ("expected a single document", "'---' starts a second document here: remove it", False),
    ("found unhashable key", "a key must be a plain word, not a list or a mapping", False),
    ("could not determine a constructor for the tag", "'!' starts a YAML tag: put the text in quotes", False),
    ("found undefined tag handle", "'!' starts a YAML tag: put the text in quotes", False),
    ("found character '@'", "a value cannot start with '@': put it in quotes", False),
    ("found character '`'", "a value cannot start with '`': put it in quotes", False),
    ("found character '%'", "a value cannot start with '%': put it in quotes", False),
)
# Token names the parser uses, for a complaint `PLAIN` does not know: said as what an author typed.
TOKENS = {
    "'<block mapping start>'": "a more indented 'key: value'", "'<block sequence start>'": "a '- ' item",
    "'<block end>'": "the end of a block", "<block end>": "the end of the block", "'<scalar>'": "a value",
    "'<stream end>'": "the end of the text", "<stream end>": "the end of the text",
    "'<document start>'": "'---'", "<document start>": "'---'", "'<flow mapping end>'": "'}'",
    "'<flow sequence end>'": "']'", "'<block entry>'": "a '- ' item", "'<key>'": "a key", "'<value>'": "':'",
}


def describe(exc: yaml.YAMLError) -> tuple[str, int]:
    """(the mistake in plain words, its 0-based line in the YAML text; 0 when the error has no mark)."""
    problem = getattr(exc, "problem", None) or str(exc)
    problem_mark = getattr(exc, "problem_mark", None)
    context_mark = getattr(exc, "context_mark", None)
    for said, plain, at_context in PLAIN:
        if said in problem:
            mark = (context_mark if at_context else problem_mark) or problem_mark or context_mark
            return plain, mark.line if mark is not None else 0
    for token, words in TOKENS.items():
        problem = problem.replace(token, words)
    mark = problem_mark or context_mark
    return problem, mark.line if mark is not None else 0

