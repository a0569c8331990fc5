"""What one file says about its neighbours, extracted from its syntax tree alone.

Facts depend on nothing but the file's own text, so they are extracted once per content version and kept in
the store; resolving them against the rest of the workspace (`resolve.py`) is cheap and is redone whenever the
file set changes. Bumping `EXTRACTOR_VERSION` re-extracts every file's facts without re-chunking or
re-embedding it.
"""

from __future__ import annotations

import json
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import TYPE_CHECKING, NamedTuple

from codeloupe.types import lone_cr_line_starts

if TYPE_CHECKING:
    from tree_sitter import Node

# 2: lines are the editor's in a file with a lone CR (they were tree-sitter's rows, which count "\n" only).
# 3: names holding a character past U+FFFF as written (they read `xxxx`, the parsed copy's: `FactsBuilder.text`).
EXTRACTOR_VERSION = 3


# The three per-row fact types are named tuples, not dataclasses: a save re-resolves hundreds of files at 40K
# files, each decoded into ~240 of them, and a tuple is made from its stored row in C (a frozen dataclass's
# `__init__` cost ~6x as much) and, holding only strings and numbers, drops out of the cyclic collector's
# passes over the decoded facts a resolution keeps.


class Definition(NamedTuple):
    name: str
    kind: str  # function | class | method | type | constant | module | ...
    start_line: int
    end_line: int
    parent: str = ""  # qualified name of the enclosing definition; "" at top level

    @property
    def qualified_name(self) -> str:
        return f"{self.parent}.{self.name}" if self.parent else self.name


class ImportFact(NamedTuple):
    """One import-like statement. `names` are (imported, local) pairs; ("*", "*") is a star import.

    An empty `names` binds nothing (a side-effect import); `local` alone with imported "" binds the module
    itself (`import x.y as z`, `const z = require("./z")`).
    """

    kind: str  # import | from | side | dynamic | require | reexport | use | mod | include | load
    spec: str  # the raw specifier as written
    line: int
    names: tuple[tuple[str, str], ...] = ()
    level: int = 0  # Python relative-import dots

    @property
    def written(self) -> str:
        """The specifier as the source spells it (Python's relative dots included)."""
        return "." * self.level + self.spec

    @property
    def is_star(self) -> bool:
        return any(imported == "*" for imported, _ in self.names)


class UseFact(NamedTuple):
    """A reference to a name defined elsewhere: a call site, a constructor, a base class, a decorator.

    `receiver` is the qualifier as written (`mod` in `mod.f()`, `a::b` in `a::b::f()`), "" for a bare name.
    `scope` is the lexical namespace the use sits in, for languages that resolve names through it (Ruby).
    """

    name: str
    line: int
    receiver: str = ""
    scope: str = ""
    kind: str = "call"  # call | ref


@dataclass
class FileFacts:
    language: str
    package: str = ""  # Go package clause, PHP namespace
    definitions: list[Definition] = field(default_factory=list)
    imports: list[ImportFact] = field(default_factory=list)
    uses: list[UseFact] = field(default_factory=list)

    def top_level(self) -> dict[str, Definition]:
        """Top-level definitions by name (the first of a name wins: later ones are redefinitions)."""
        out: dict[str, Definition] = {}
        for d in self.definitions:
            if not d.parent and d.name not in out:
                out[d.name] = d
        return out

    def to_json(self) -> str:
        return json.dumps({
            "language": self.language,
            "package": self.package,
            "definitions": [[d.name, d.kind, d.start_line, d.end_line, d.parent] for d in self.definitions],
            "imports": [[i.kind, i.spec, i.line, [list(n) for n in i.names], i.level] for i in self.imports],
            "uses": [[u.name, u.line, u.receiver, u.scope, u.kind] for u in self.uses],
        }, separators=(",", ":"))

    @staticmethod
    def definition_rows(text: str) -> list[list]:
        """The definitions of facts stored as `text` (`to_json`), as stored: [name, kind, start line, end line,
        parent] each, without decoding the imports and uses that are most of the text."""
        rows = _stored_part(text, "definitions", "imports")
        return rows if rows is not None else [list(d) for d in FileFacts.from_json(text).definitions]

    @staticmethod
    def stored_imports(text: str) -> list[ImportFact]:
        """The imports of facts stored as `text`, without decoding its definitions and uses."""
        rows = _stored_part(text, "imports", "uses")
        return _imports(rows) if rows is not None else FileFacts.from_json(text).imports

    @classmethod
    def from_json(cls, text: str) -> FileFacts:
        """Facts stored as `text` (`to_json`). Definition and use rows are stored in their tuple's field order
        and become the tuples as they are (`tuple.__new__` over each row, no per-row Python call), once every
        column is checked; facts not as `to_json` writes them (a damaged index) raise ValueError."""
        raw = json.loads(text)
        if not isinstance(raw["language"], str) or not isinstance(raw["package"], str):
            raise ValueError("a language or package that is not a name")
        for rows, of in ((raw["definitions"], Definition), (raw["uses"], UseFact), (raw["imports"], ImportFact)):
            _check_rows(rows, of)
        if not all(type(pair) is list and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is str
                   for row in raw["imports"] for pair in row[3]):
            raise ValueError("imported names that are not (imported, local) pairs of names")
        return cls(
            language=raw["language"],
            package=raw["package"],
            definitions=list(map(tuple.__new__, repeat(Definition), raw["definitions"])),
            imports=_imports(raw["imports"]),
            uses=list(map(tuple.__new__, repeat(UseFact), raw["uses"])),
        )


# The JSON type of each stored row's fields, in the row type's field order. A damaged or foreign row is refused
# when decoded: a row of another length would shift every field, and a number where a name belongs would fail
# resolution long after, far from the row. (JSON's true passes for a number: Python's bool is an int.)
_FIELD_TYPES: dict[type, tuple[type, ...]] = {
    Definition: (str, str, int, int, str),
    UseFact: (str, int, str, str, str),
    ImportFact: (str, str, int, list, int),
}


def _check_rows(rows: object, of: type) -> None:
    """Raise ValueError unless `rows` is a list of lists whose fields have `of`'s stored types (each column
    checked in C: joined when it holds names, packed as 64-bit integers when it holds numbers)."""
    types = _FIELD_TYPES[of]
    if type(rows) is not list or not set(map(type, rows)) <= {list}:
        raise ValueError(f"{of.__name__} rows that are not lists")
    if not set(map(len, rows)) <= {len(types)}:
        raise ValueError(f"{of.__name__} rows of another length than {len(types)}")
    fields = list(chain.from_iterable(rows))
    for at, kind in enumerate(types):
        column = fields[at::len(types)]
        try:
            if kind is str:
                "".join(column)
            elif kind is int:
                array("q", column)
            elif not set(map(type, column)) <= {kind}:
                raise TypeError
        except (TypeError, OverflowError):
            raise ValueError(f"{of.__name__} rows with a field that is not a {kind.__name__}") from None


def _imports(rows: list[list]) -> list[ImportFact]:
    return [ImportFact(kind, spec, line, tuple(map(tuple, names)), level) for kind, spec, line, names, level in rows]


def _stored_part(text: str, key: str, next_key: str) -> list[list] | None:
    """The rows `to_json` wrote under `key` (a list, followed by `next_key`'s), parsed alone; None when `text`
    is not laid out that way. The keys are found as written: a quote inside a JSON string is escaped, so
    `"key":` and `,"next_key":[` occur only as the keys `to_json` writes, in that order."""
    start = text.find(f'"{key}":')
    end = text.find(f',"{next_key}":[', start)
    if start < 0 or end < 0:
        return None
    return json.loads(text[start + len(key) + 3:end])


class FactsBuilder:
    """Collects facts while a language walker visits the tree of `source`; repeated uses keep their first line
    only."""

    def __init__(self, language: str, source: str) -> None:
        self.facts = FileFacts(language)
        self.source = source.encode("utf-8")  # what the walker parses, and reads its names from
        self._seen_uses: set[tuple[str, str, str]] = set()
        self._line_starts = lone_cr_line_starts(source)

    def text(self, node: Node | None) -> str:
        """`node`'s text, read from the file's own bytes by its offsets: not `node.text`, the parsed copy's, where
        each character past U+FFFF reads `xxxx` (`codeloupe.chunk.languages.parse`), so that an import of
        `./😀.js` named `./xxxx.js` and resolved to nothing, and a definition named with one was misnamed."""
        return "" if node is None else self.source[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def line(self, node: Node) -> int:
        """The editor's line (`split_lines`) `node` starts on: tree-sitter's row counts "\\n" only, so in a file
        with a lone CR its start byte is mapped instead."""
        if self._line_starts is None:
            return node.start_point[0] + 1
        return bisect_right(self._line_starts, node.start_byte)

    def end_line(self, node: Node) -> int:
        """The editor's line `node` ends on (as tree-sitter's end row: the next line's after a final newline)."""
        if self._line_starts is None:
            return node.end_point[0] + 1
        return bisect_right(self._line_starts, node.end_byte)

    def define(self, name: str, kind: str, start_line: int, end_line: int, parent: str = "") -> None:
        if name:
            self.facts.definitions.append(Definition(name, kind, start_line, end_line, parent))

    def imports(self, kind: str, spec: str, line: int, names: list[tuple[str, str]] | None = None,
                level: int = 0) -> None:
        self.facts.imports.append(ImportFact(kind, spec, line, tuple(names or ()), level))

    def use(self, name: str, line: int, receiver: str = "", scope: str = "", kind: str = "call") -> None:
        key = (receiver, name, scope)
        if name and key not in self._seen_uses:
            self._seen_uses.add(key)
            self.facts.uses.append(UseFact(name, line, receiver, scope, kind))
