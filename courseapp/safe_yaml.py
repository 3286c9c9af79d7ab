"""The YAML loader for everything an author writes (front matter, quizzes, tracks.yaml): safe and bounded.

`yaml.SafeLoader` refuses arbitrary objects but not amplification: an alias repeats a whole subtree, so a
445-byte "billion laughs" text of nested aliases expands to millions of nodes, and a mapping reused through
an alias is one shared object that later code may mutate twice. `BoundedLoader` therefore refuses anchors
and aliases outright (course files never need them: write the value out), nesting deeper than
`MAX_NESTING` (the composer recurses once per level), integers longer than `MAX_DIGITS`, and texts longer
than `MAX_YAML_CHARS` (the pure-Python parser's cost is linear but not small). Each refusal is
a `yaml.MarkedYAMLError` at the offending line, so callers report it like any other YAML mistake. The
composed document is then at most as large as its text.
"""
from __future__ import annotations

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.error import MarkedYAMLError

from .input_limits import MAX_DIGITS, MAX_NESTING

# An int scalar may carry a sign, `_` separators or a 0x/0o prefix: allow for them beyond the digits.
MAX_INT_CHARS = MAX_DIGITS + 8
# PyYAML parses about 300 KB per second of CPU; the longest quiz in the course is under 5 KB.
MAX_YAML_CHARS = 100_000


class BoundedLoader(yaml.SafeLoader):
    """A `yaml.SafeLoader` for texts of at most `MAX_YAML_CHARS` whose documents hold no anchors or aliases,
    nest at most `MAX_NESTING` levels, and have integers of at most `MAX_DIGITS` digits."""

    def __init__(self, stream):
        if len(stream) > MAX_YAML_CHARS:
            raise MarkedYAMLError(problem=f"this YAML is {len(stream):,} characters long; at most {MAX_YAML_CHARS:,} "
                                  "are read (split it up)")
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ComposerError(None, None, "anchors (&name) and aliases (*name) are not allowed here: "
                                "write the value out in full", event.start_mark)
        if self._depth >= MAX_NESTING:
            raise ComposerError(None, None, f"nested more than {MAX_NESTING} levels deep", event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node):
        if len(node.value) > MAX_INT_CHARS:
            raise ConstructorError(None, None, f"the number {node.value[:20]}… is too long: at most "
                                   f"{MAX_DIGITS} digits", node.start_mark)
        return super().construct_yaml_int(node)


BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)


def load(text: str):
    """The document in `text`, through `BoundedLoader`; raises `yaml.YAMLError` (with a mark) on refusal."""
    return yaml.load(text, Loader=BoundedLoader)  # noqa: S506 (a SafeLoader subclass)
