"""The rows of a diff table, rendered in Python: a diff may have thousands of rows, and a template loop costs
a template render per row (about 30 µs each, and far more under the test client's instrumentation)."""
from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

MAX_SHOWN_ROWS = 5_000  # past this the page says how many rows it leaves out; the counts above stay exact
CELL = '<tr class="diff-{}"><td class="diff-no">{}</td><td class="diff-no">{}</td><td><span class="diff-marker" ' \
       'aria-label="{}">{}</span><code>{}</code></td></tr>'


def _row(row) -> tuple:
    return (row.kind, row.label(row.old_line), row.label(row.new_line), row.kind, row.marker, row.text)


@register.simple_tag
def diff_table_rows(rows) -> SafeString:
    """`<tr>`s for `diffs.DiffRow`s: hunk headers and notices span the table, lines show both numbers."""
    if not rows:
        return SafeString('<tr><td colspan="3">No difference.</td></tr>')
    shown = rows[:MAX_SHOWN_ROWS]
    parts = []
    for row in shown:
        if row.kind == "hunk":
            parts.append(format_html('<tr class="diff-hunk"><td colspan="3">{}</td></tr>', row.text))
        elif row.kind == "notice":
            parts.append(format_html('<tr class="diff-notice"><td colspan="3" role="note">{}</td></tr>', row.text))
        else:
            parts.append(format_html(CELL, *_row(row)))
    if len(rows) > len(shown):
        parts.append(format_html('<tr class="diff-notice"><td colspan="3" role="note">{} more rows of this comparison '
                                 'are not shown: compare versions closer together to see them.</td></tr>',
                                 len(rows) - len(shown)))
    return SafeString("".join(parts))
