"""The one exception of lesson authoring: a mistake (or a lesson past what a render may cost), located by line.

Its own module so that the renderer's helpers (`render_budget`) raise it without importing the renderer;
`courseapp.rendering` re-exports it, where every caller imports it from.
"""
from __future__ import annotations


class ContentError(Exception):
    """An authoring mistake, located by line (1-based, in the file when `path` is set).

    In a module file, `body_start` is the file line of the lesson's first line: `shown()` then numbers the
    line as the editor does (lesson line 1 is the first line after the front matter), the one numbering the
    authoring pages use; `str()` keeps ``file:line`` for the command line and text editors.
    """

    def __init__(self, message: str, line: int | None = None, path: str | None = None,
                 body_start: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.path = path
        self.body_start = body_start

    def shifted(self, offset: int) -> "ContentError":
        """The same error with its line moved by `offset` (lesson line → file line)."""
        line = self.line + offset if self.line is not None else None
        return ContentError(self.message, line, self.path, body_start=offset + 1)

    def at(self, path: str) -> "ContentError":
        return ContentError(self.message, self.line, path, self.body_start)

    def __str__(self) -> str:
        where = self.path or ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        return f"{where}: {self.message}" if where else self.message

    def shown(self) -> str:
        """As the authoring pages show it: ``intro.md, lesson line 5: …`` (the editor's line 5), or
        ``intro.md, front matter line 2: …`` (the second line after the opening ``---``)."""
        if self.line is None or self.body_start is None:
            return str(self)
        if self.line >= self.body_start:
            where = f"lesson line {self.line - self.body_start + 1}"
        else:
            where = f"front matter line {self.line - 1}" if self.line > 1 else "front matter"
        return f"{self.path}, {where}: {self.message}" if self.path else f"{where.capitalize()}: {self.message}"


class CourseLoadError(Exception):
    """One or more content errors; nothing was written to the database."""

    def __init__(self, errors: list[ContentError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))
