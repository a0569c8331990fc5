"""Exact text across the indexed chunks (`Workspace.locate`): every line holding it, counted, the first ones shown.

Only the chunks that can hold the text are read: its words that stand whole in it (every word of an identifier;
for plain text, those with a separator on both sides) are terms the chunk was indexed with, so the lexical
index's postings name the candidates, and an identifier that occurs nowhere costs no read at all (it read and
scanned every chunk of the workspace: 45 ms at the standard library's 11K chunks, seconds at 200K). Lines are
counted, and turned into locations only for the first `limit` in path and line order (`self` as an identifier
over the standard library made 205,707 locations to show 100).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from codeloupe.lanes.tokens import whole_word_terms
from codeloupe.types import Located, Location, split_lines

if TYPE_CHECKING:
    from codeloupe.search import Snapshot

_BATCH = 2_000


def locate_lines(snap: Snapshot, text: str, *, identifier: bool, limit: int,
                 skip: Callable[[str], bool] | None = None) -> Located:
    """Every line of `snap`'s live chunks holding `text` (case-sensitive; `identifier`: as a whole identifier),
    counted, the first `limit` as locations in path and line order; the files whose path `skip` holds are not
    looked in (`secrets_skipped`)."""
    table = snap.table
    whole = _whole_identifier(text) if identifier else None
    terms = whole_word_terms(text, all_runs=identifier)
    holding = snap.bm25.rows_holding(terms) if terms else None
    rows = np.arange(len(table.ids)) if holding is None else np.flatnonzero(holding)
    if snap.live is not None:
        rows = rows[snap.live[rows]]
    counted: list[tuple[str, int, int]] = []  # (path, first line, row) of the chunks holding it
    total = 0
    skipped: dict[str, bool] = {}  # asked of the paths of chunks holding the text only, once each
    for start in range(0, len(rows), _BATCH):
        batch = rows[start:start + _BATCH].tolist()
        for row, chunk in zip(batch, table.texts.many(batch), strict=True):
            if text not in chunk:
                continue
            path = snap.chunk_paths[row]
            if skip is not None and skipped.setdefault(path, skip(path)):
                continue
            found = sum(1 for line in split_lines(chunk, keepends=False) if text in line and (whole is None or whole.search(line)))
            if found:
                total += found
                counted.append((path, int(table.start_lines[row]), row))
    counted.sort()
    hits: list[Location] = []
    for path, first, row in counted:  # read again, the few shown: the texts of every match are not held
        if len(hits) >= limit:
            break
        for offset, line_text in enumerate(split_lines(table.texts[row], keepends=False)):
            column = line_text.find(text) if whole is None else _column(whole.search(line_text))
            if column >= 0:
                hits.append(Location(path, first + offset, column + 1, line_text, first,
                                     int(table.end_lines[row]), table.breadcrumbs[row]))
    return Located(text, identifier, hits[:max(limit, 0)], total, secrets_skipped=skip is not None)


def _whole_identifier(text: str) -> re.Pattern[str]:
    """`text` with no identifier character next to it where its own edge is one: `get(` matches `self.get(k)`,
    where holding both edges to a boundary wanted no identifier after the `(` and found only `def get(self`."""
    left = r"(?<![\w$])" if re.match(r"[\w$]", text) else ""
    right = r"(?![\w$])" if re.search(r"[\w$]\Z", text) else ""
    return re.compile(left + re.escape(text) + right)


def _column(match: re.Match[str] | None) -> int:
    return -1 if match is None else match.start()
