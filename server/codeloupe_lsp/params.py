"""Reading the params of the custom `codeloupe/*` requests and command arguments.

pygls hands custom requests their params as plain JSON (see `server._keep_raw_params`); these helpers check
each field and refuse bad input with -32602 and a message that names the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from codeloupe.types import count_line_breaks, is_blank


def invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message=message)


_SHOWN_CHARS = 80


def shown(value: Any) -> str:
    """A refused value as an error message quotes it: its repr, cut to `_SHOWN_CHARS` (a refused query may be
    20,000 characters, a refused object a whole document)."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[:_SHOWN_CHARS]}... ({len(text):,} characters)"


class Params:
    """One request's params object, read field by field."""

    def __init__(self, raw: Any, method: str) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise invalid(f"{method}: params must be an object, got {type(raw).__name__}")
        self.raw = raw
        self.method = method

    def _bad(self, name: str, expected: str, value: Any) -> JsonRpcInvalidParams:
        return invalid(f"{self.method}: `{name}` must be {expected}, got {shown(value)}")

    def text(self, name: str, *, required: bool = False, non_empty: bool = False, max_chars: int = 0,
             one_line: bool = False) -> str:
        """`max_chars`: the longest value taken (0: any); `one_line`: refuse a value holding a newline."""
        value = self.raw.get(name)
        if value is None:
            if required:
                raise invalid(f"{self.method}: `{name}` is required")
            return ""
        if not isinstance(value, str):
            raise self._bad(name, "a string", value)
        if non_empty and is_blank(value):
            raise self._bad(name, "a non-empty string", value)
        if max_chars and len(value) > max_chars:
            raise invalid(f"{self.method}: `{name}` must be at most {max_chars:,} characters, got {len(value):,}")
        lines = count_line_breaks(value) + 1 if one_line else 1
        if lines > 1:
            raise invalid(f"{self.method}: `{name}` must be one line, got {lines:,} lines")
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value = self.raw.get(name)
        if value is None:
            return default
        if value not in choices:
            raise self._bad(name, "one of " + ", ".join(repr(c) for c in choices), value)
        return value

    def integer(self, name: str, default: int, *, minimum: int = 1, maximum: int | None = None) -> int:
        value = self.raw.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum \
                or (maximum is not None and value > maximum):
            raise self._bad(name, f"an integer >= {minimum}" if maximum is None
                            else f"an integer from {minimum} to {maximum}", value)
        return value

    def flag(self, name: str, default: bool | None) -> bool | None:
        value = self.raw.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._bad(name, "a boolean", value)
        return value

    def token(self, name: str) -> str | int | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self._bad(name, "a string or a number", value)
        return value

    def range(self, name: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
        value = self.raw.get(name)
        if value is None:
            return None
        return read_range(value, f"{self.method}: `{name}`")


def read_range(value: Any, what: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """An LSP Range as ((line, character), (line, character)), checked."""
    if not isinstance(value, Mapping):
        raise invalid(f"{what} must be a Range {{start, end}}, got {shown(value)}")
    ends = []
    for side in ("start", "end"):
        pos = value.get(side)
        if not isinstance(pos, Mapping):
            raise invalid(f"{what}.{side} must be a Position {{line, character}}, got {shown(pos)}")
        coords = []
        for key in ("line", "character"):
            number = pos.get(key)
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise invalid(f"{what}.{side}.{key} must be an integer >= 0, got {shown(number)}")
            coords.append(number)
        ends.append((coords[0], coords[1]))
    if ends[1] < ends[0]:
        raise invalid(f"{what}: end {ends[1]} is before start {ends[0]}")
    return ends[0], ends[1]


def read_uri(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(f"{what} must be a URI string, got {shown(value)}")
    return value
