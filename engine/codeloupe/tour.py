"""The tour: where to start reading a workspace, from the index alone (no model, no graph).

Its entry points, then the top-level names it defines ranked by how many *other* files mention them. A
mention is the identifier appearing in a file's text, not a resolved use: a name that many files say is what
the code base is about, whatever the import system; a common word that happens to be a name is the price (whole
comment lines are left out, docstrings are not).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from codeloupe.lanes.tokens import STOP_WORDS
from codeloupe.search import is_test_path
from codeloupe.types import Tour, TourStop

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext

_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")
# Whole comment lines do not count as mentions: a licence header saying "source code" in every Go file is not
# 92 mentions of a function named `source`.
_COMMENT_LINE = re.compile(r"^[ \t]*(?:#|//|/\*|\*|--|;).*$", re.M)
MIN_NAME_CHARS = 3


def _worth_a_stop(name: str) -> bool:
    return len(name) >= MIN_NAME_CHARS and bool(_IDENTIFIER.fullmatch(name)) and name.lower() not in STOP_WORDS \
        and not name.startswith("__") and name != "main"  # `main` is an entry point, listed above the names


def build_tour(ws: WorkspaceContext, limit: int, entry_point_limit: int) -> Tour:
    snap = ws.searcher().snapshot()
    # name -> (path, line, kind, file id) of each top-level definition; the rows stream (every row at once
    # is 1.35M objects at 200K chunks)
    definitions: dict[str, list[tuple[str, int, str, int]]] = defaultdict(list)
    for s in ws.store.iter_symbol_rows():
        path = snap.file_paths.get(s.file_id)
        if path is None or s.parent or snap.file_is_doc.get(s.file_id) or is_test_path(path) \
                or not _worth_a_stop(s.name):
            continue
        definitions[s.name].append((path, s.start_line, s.kind, s.file_id))
    # A mention counts in a code file of a language the name is defined in (a Lua `list` is not what every
    # Python file means by `list`), other than a file defining it.
    languages = {name: {snap.file_languages[d[3]] for d in found} for name, found in definitions.items()}
    mentioned: Counter[str] = Counter()
    for file_id, whole in snap.file_texts():
        if snap.file_is_doc.get(file_id):
            continue
        language = snap.file_languages.get(file_id)
        text = _COMMENT_LINE.sub("", whole)
        names = set(_IDENTIFIER.findall(text))
        for name in names.intersection(definitions):
            if language in languages[name] and all(d[3] != file_id for d in definitions[name]):
                mentioned[name] += 1
    ranked = sorted(mentioned, key=lambda n: (-mentioned[n], n))  # a name nobody mentions is no stop
    stops = []
    for name in ranked[:max(limit, 0)]:
        path, line, kind, _ = min(definitions[name])
        stops.append(TourStop(name, kind, path, line, mentioned[name], len(definitions[name])))
    points = ws.entry_points()  # strongest signal first
    kept = points[:max(entry_point_limit, 0)]
    return Tour(str(ws.root), kept, stops, len(definitions), len(points) - len(kept))
