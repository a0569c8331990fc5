"""docs/protocol.md's shapes, read from the doc itself, and a check of real answers against them.

The doc writes a request's params and result as brace shapes, in prose (`{uri, range, text}`,
`{folders: [{uri, state ("indexing" | ...), vectors: {done, total}}]}`) or in jsonc blocks
(`"core": [FileResult, ...]`). `shape_after` reads the first shape after a marker: keys (quoted or not, `?` for an
optional one), nested objects and lists, named shapes (`FileResult`, `Hop`, ...), and `...` for a map of any keys;
parenthesised prose and `//` comments are skipped. `ShapeCheck` then holds every answer to the shape documented
for it: no field the doc does not name, and (once every answer is in) every documented field seen at least once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"

_TOKEN = re.compile(r'\s+|//[^\n]*|"(?:[^"\\\n]|\\.)*"|\.\.\.|[A-Za-z_][\w-]*|-?\d+(?:\.\d+)?|.', re.S)


@dataclass
class Scalar:
    """A leaf: its documented types (`string`, `number`, `boolean`, `enum` for quoted literals, ...)."""

    kinds: frozenset[str]


@dataclass
class ListOf:
    item: Value


@dataclass
class Ref:
    """A shape the doc names and defines elsewhere (`FileResult`, `Neighbour`, `Location`, ...)."""

    name: str
    nullable: bool = False  # `FlowUse | null`


@dataclass
class Shape:
    fields: dict[str, Value] = field(default_factory=dict)
    optional: set[str] = field(default_factory=set)
    open: bool = False  # `{python: 12, ...}`: a map whose keys are data, not fields


Value = Shape | ListOf | Ref | Scalar

# LSP's own shapes, which the doc names without spelling out.
LSP_SHAPES: dict[str, Value] = {
    "Location": Shape({"uri": Scalar(frozenset({"string"})), "range": Ref("Range")}),
    "Range": Shape({"start": Ref("Position"), "end": Ref("Position")}),
    "Position": Shape({"line": Scalar(frozenset({"number"})), "character": Scalar(frozenset({"number"}))}),
}


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def section(heading: str, text: str | None = None) -> str:
    """The doc's text under the heading line that starts with `heading`, up to the next heading."""
    text = doc_text() if text is None else text
    start = text.find(f"\n{heading}")
    assert start >= 0, f"docs/protocol.md has no heading {heading!r}"
    start = text.index("\n", start + 1)
    end = re.search(r"\n#{2,3} ", text[start:])
    return text[start:start + end.start()] if end else text[start:]


def shape_after(text: str, marker: str) -> tuple[Shape, int]:
    """The first `{...}` shape after `marker` in `text`, and where it ends."""
    at = text.find(marker)
    assert at >= 0, f"docs/protocol.md no longer says {marker!r} where this test reads a shape"
    brace = text.index("{", at + len(marker))
    tokens = _Tokens(text, brace)
    shape = tokens.value()
    assert isinstance(shape, Shape), f"the shape after {marker!r} is not an object"
    return shape, tokens.end


def params_and_result(text: str) -> tuple[Shape, Shape]:
    """A request section's `Params: {...} -> {...}`."""
    params, end = shape_after(text, "Params: ")
    result, _ = shape_after(text[end:], "->")
    return params, result


class _Tokens:
    def __init__(self, text: str, start: int) -> None:
        self.items: Iterator[re.Match[str]] = _TOKEN.finditer(text, start)
        self.current: str = ""
        self._current_end = start
        self.end = start  # just past the last token taken
        self._advance()

    def _advance(self) -> None:
        for match in self.items:
            token = match.group()
            if token.isspace() or token.startswith("//") or token == "`":
                continue
            if token == "(":  # prose about the field before it: skipped whole
                depth = 1
                for inner in self.items:
                    depth += {"(": 1, ")": -1}.get(inner.group(), 0)
                    if depth == 0:
                        break
                continue
            self.current, self._current_end = token, match.end()
            return
        self.current = ""

    def take(self, expected: str | None = None) -> str:
        token = self.current
        if expected is not None:
            assert token == expected, f"docs/protocol.md: expected {expected!r} in a shape, found {token!r}"
        self.end = self._current_end
        self._advance()
        return token

    def value(self) -> Value:
        if self.current == "{":
            return self._object()
        if self.current == "[":
            self.take("[")
            item: Value = Scalar(frozenset())
            first = True
            while self.current not in ("]", ""):
                if self.current == "...":
                    self.take()
                else:
                    parsed = self.value()
                    if first:
                        item, first = parsed, False
                if self.current == ",":
                    self.take()
            self.take("]")
            return ListOf(item)
        kinds = set()
        while True:
            token = self.take()
            if token[:1].isupper():
                if self.current != "|":
                    return Ref(token)
                self.take("|")
                self.take("null")  # `FlowUse | null`: the named shape, or nothing
                return Ref(token, nullable=True)
            kinds.add("enum" if token.startswith('"') else token)
            if self.current != "|":
                return Scalar(frozenset(kinds))
            self.take("|")

    def _object(self) -> Shape:
        self.take("{")
        shape = Shape()
        while self.current != "}":
            assert self.current, "docs/protocol.md: a shape is not closed"
            if self.current == "...":
                self.take()
                shape.open = True
            else:
                key = self.take().strip('"')
                if self.current == "?":
                    self.take()
                    shape.optional.add(key)
                value: Value = Scalar(frozenset())
                if self.current == ":":
                    self.take()
                    value = self.value()
                shape.fields[key] = value
            if self.current == ",":
                self.take()
        self.take("}")
        return shape


@dataclass
class ShapeCheck:
    """Real answers held to their documented shapes. `named`: the shapes the doc defines by name."""

    named: dict[str, Value]
    problems: list[str] = field(default_factory=list)
    # Per documented object (by where it sits): its documented fields, its optional ones, the fields seen.
    seen: dict[str, tuple[set[str], set[str], set[str]]] = field(default_factory=dict)
    # Per documented list: whether any answer had an item in it (an always-empty list checks no item).
    lists: dict[str, bool] = field(default_factory=dict)

    def check(self, where: str, value: Any, shape: Value, *, complete: bool = False) -> None:
        """`complete`: this answer must itself carry every documented (not optional) field of its top level."""
        if complete and isinstance(shape, Ref):
            shape = self.named[shape.name]
        if complete and isinstance(shape, Shape) and isinstance(value, dict) and not shape.open:
            missing = sorted(set(shape.fields) - shape.optional - set(value))
            if missing:
                self.problems.append(f"{where}: documented fields this answer lacks: {missing}")
        if isinstance(shape, Ref):
            if value is None and shape.nullable:
                return
            assert shape.name in self.named, f"docs/protocol.md names a shape {shape.name!r} it does not define"
            self.check(shape.name, value, self.named[shape.name])
        elif isinstance(shape, ListOf):
            if not isinstance(value, list):
                self.problems.append(f"{where}: documented as a list, got {value!r:.80}")
                return
            if not isinstance(shape.item, Scalar):  # items with fields of their own
                self.lists[where] = self.lists.get(where, False) or bool(value)
            for item in value:
                self.check(f"{where}[]", item, shape.item)
        elif isinstance(shape, Shape):
            if not isinstance(value, dict):
                self.problems.append(f"{where}: documented as an object, got {value!r:.80}")
                return
            if shape.open:
                return
            documented, optional, seen = self.seen.setdefault(where, (set(shape.fields), set(shape.optional), set()))
            seen.update(value)
            extra = sorted(set(value) - documented)
            if extra:
                self.problems.append(f"{where}: fields the doc does not name: {extra}")
            for key in set(value) & documented:
                self.check(f"{where}.{key}", value[key], shape.fields[key])

    def unseen(self, skip: tuple[str, ...] = ()) -> list[str]:
        """Documented (not optional) fields no answer had, and lists no answer had an item in, outside the
        objects under `skip`."""
        fields = [f"{where}: documented fields no answer had: {sorted(documented - optional - seen)}"
                  for where, (documented, optional, seen) in sorted(self.seen.items())
                  if documented - optional - seen and not where.startswith(skip)]
        return fields + [f"{where}: always empty, so its items were never checked"
                         for where, had_items in sorted(self.lists.items())
                         if not had_items and not where.startswith(skip)]
