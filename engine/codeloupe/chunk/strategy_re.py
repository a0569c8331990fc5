"""The `re` a chunk strategy imports: Python's `re` functions, run on RE2, whose matching takes time linear in
the text.

Python's own engine backtracks: one pattern such as `(a+)+$` takes hours on a line of forty `a`s and a `b`.
On a process's main thread the strategy's time bound interrupts it, but on any other thread (the language
server's writer, a served workspace's refresh) nothing can: the regex engine keeps the interpreter lock until
it returns. A strategy is code a model wrote from the repository's own files, so its patterns are as untrusted
as the files. Here a pattern is translated to RE2's syntax with Python's meaning kept (`\\Z`, `$` without
MULTILINE, the Unicode classes `\\d \\w \\s`), and one RE2 cannot run (a backreference, a lookaround, an atomic
group) raises `error` saying so, when it is compiled.
"""

from __future__ import annotations

import ast
import re as python_re
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import re2

# Python's flag values, so `re.M | re.I` means what it means in Python.
NOFLAG = 0
IGNORECASE = I = int(python_re.IGNORECASE)  # noqa: E741 - the name Python's `re` gives it
MULTILINE = M = int(python_re.MULTILINE)
DOTALL = S = int(python_re.DOTALL)
ASCII = A = int(python_re.ASCII)
UNICODE = U = int(python_re.UNICODE)
VERBOSE = X = int(python_re.VERBOSE)
_KNOWN_FLAGS = I | M | S | A | U | X

# Python's `\s` on str is `str.isspace`; RE2's is ASCII (and lacks \v).
_UNICODE_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
_CLASS_BODIES = {  # (Unicode, ASCII) bodies of a class escape, as they go inside [...]
    "d": (r"\p{Nd}", "0-9"),
    "w": (r"\p{L}\p{N}_", "0-9A-Za-z_"),
    "s": (_UNICODE_SPACE, r"\t\n\x0b\x0c\r "),
}
_NO_RE2 = ("RE2 (linear time) cannot run {pattern!r}: {why}. A strategy's patterns may not use backreferences, "
           "lookahead or lookbehind, atomic groups, possessive quantifiers or re.VERBOSE")


class error(Exception):  # noqa: N801 - the name Python's `re` gives it
    """A pattern that is not valid, or that RE2 cannot run."""


def _refuse(pattern: str, why: str) -> error:
    return error(_NO_RE2.format(pattern=pattern, why=why))


class _Translation:
    """A Python pattern in RE2's syntax. `$` outside MULTILINE matches at the end and before a final newline;
    RE2 has no such anchor, so a pattern using it gets two forms: one with `(?m:$)` (the same where the text
    has no newline but a last one) and one with `\\z` (the same where it does not end with a newline)."""

    def __init__(self, pattern: str, flags: int) -> None:
        if flags & ~_KNOWN_FLAGS:
            raise error(f"unsupported flags {flags:#x}")
        if flags & X:
            raise _refuse(pattern, "re.VERBOSE is not supported")
        self.pattern = pattern
        self.ascii = bool(flags & A)
        self.dollar_at_end = False  # a `$` outside MULTILINE occurs
        multiline = [bool(flags & M)]  # per open group
        out: list[str] = ["(?" + "".join(f for f, v in (("i", I), ("m", M), ("s", S)) if flags & v) + ")"
                          if flags & (I | M | S) else ""]
        i, n, in_class = 0, len(pattern), False
        while i < n:
            c = pattern[i]
            if c == "\\":
                piece, i = self._escape(pattern, i + 1, in_class)
                out.append(piece)
                continue
            if in_class:
                in_class = c != "]"
                out.append(r"\[" if c == "[" else c)  # RE2 would read [[:alpha:]] as a named class
            elif c == "[":
                in_class = True
                negated = pattern.startswith("^", i + 1)
                out.append("[^" if negated else "[")
                i += 1 + negated
                if pattern.startswith("]", i):  # a leading ] is a literal
                    out.append(r"\]")
                    i += 1
                continue
            elif c == "(":
                piece, i = self._group(pattern, i, multiline)
                out.append(piece)
                continue
            elif c == ")":
                if len(multiline) > 1:
                    multiline.pop()
                out.append(c)
            elif c == "$" and not multiline[-1]:
                self.dollar_at_end = True
                out.append("\0DOLLAR\0")
            else:
                out.append(c)
            i += 1
        if in_class:
            raise error(f"unterminated character set in {pattern!r}")
        self.translated = "".join(out)

    def forms(self) -> tuple[str, str]:
        """(where the text has no newline but a last one, where it does not end with a newline)."""
        return self.translated.replace("\0DOLLAR\0", "(?m:$)"), self.translated.replace("\0DOLLAR\0", r"\z")

    def _group(self, pattern: str, i: int, multiline: list[bool]) -> tuple[str, int]:
        if not pattern.startswith("(?", i):
            multiline.append(multiline[-1])
            return "(", i + 1
        rest = pattern[i + 2:i + 4]
        if rest[:1] in ("=", "!") or rest in ("<=", "<!"):
            raise _refuse(pattern, "lookahead and lookbehind are not supported")
        if rest[:1] == ">":
            raise _refuse(pattern, "atomic groups are not supported")
        if rest[:2] == "P=":
            raise _refuse(pattern, "backreferences are not supported")
        if rest[:1] == "(":
            raise _refuse(pattern, "conditional groups are not supported")
        if rest[:1] == "#":
            end = pattern.find(")", i)
            return "", (end + 1 if end >= 0 else len(pattern))
        if rest[:1] in ("P", "<", ":"):  # a named or plain group: RE2 spells them the same
            multiline.append(multiline[-1])
            return "(?", i + 2
        flags = python_re.match(r"([aiLmsux]*)(?:-([imsx]*))?([:)])", pattern[i + 2:])
        if flags is None:
            raise error(f"unknown extension at position {i} of {pattern!r}")
        on, off, end = flags.group(1), flags.group(2) or "", flags.group(3)
        if "x" in on or "L" in on:
            raise _refuse(pattern, "the flags x (VERBOSE) and L (LOCALE) are not supported")
        if "a" in on:
            if end != ")" or i != 0:
                raise _refuse(pattern, "the flag a (ASCII) is supported only for the whole pattern")
            self.ascii = True
        kept_on = "".join(f for f in on if f in "ims")
        mode = True if "m" in on else False if "m" in off else multiline[-1]
        spelled = kept_on + ("-" + off if off else "")
        if end == ")":  # flags for the rest of the pattern
            multiline[-1] = mode
            return (f"(?{spelled})" if spelled else ""), i + 2 + flags.end()
        multiline.append(mode)
        return f"(?{spelled}:", i + 2 + flags.end()

    def _escape(self, pattern: str, i: int, in_class: bool) -> tuple[str, int]:
        if i >= len(pattern):
            raise error(f"bad escape (end of pattern) in {pattern!r}")
        c = pattern[i]
        if c.lower() in _CLASS_BODIES:
            body = _CLASS_BODIES[c.lower()][self.ascii]
            if c.islower():
                return (body if in_class else f"[{body}]"), i + 1
            if in_class:
                if c == "D" and not self.ascii:
                    return r"\P{Nd}", i + 1
                raise _refuse(pattern, f"\\{c} inside a character set is not supported (write the set negated)")
            return f"[^{body}]", i + 1
        if c == "Z":
            return r"\z", i + 1
        if c.isdigit() and c != "0" and not in_class:
            raise _refuse(pattern, "backreferences are not supported")
        if c in "0123456789":  # an octal character code (RE2 takes \0 and up to three digits the same way)
            digits = python_re.match(r"[0-7]{1,3}", pattern[i:])
            code = int(digits.group(), 8) if digits else 0
            return f"\\x{{{code:x}}}", i + (len(digits.group()) if digits else 1)
        if c == "x":
            digits = python_re.match(r"[0-9a-fA-F]{2}", pattern[i + 1:])
            if digits is None:
                raise error(f"incomplete escape \\x in {pattern!r}")
            return f"\\x{{{digits.group()}}}", i + 3
        if c in "uU":
            width = 4 if c == "u" else 8
            digits = python_re.match(f"[0-9a-fA-F]{{{width}}}", pattern[i + 1:])
            if digits is None:
                raise error(f"incomplete escape \\{c} in {pattern!r}")
            return f"\\x{{{digits.group()}}}", i + 1 + width
        if c == "N":
            name = python_re.match(r"\{([^}]*)\}", pattern[i + 1:])
            try:
                code = ord(unicodedata.lookup(name.group(1))) if name else None
            except KeyError:
                code = None
            if code is None:
                raise error(f"bad character name in {pattern!r}")
            return f"\\x{{{code:x}}}", i + 1 + name.end()
        if c == "b" and in_class:
            return r"\x08", i + 1
        if not c.isascii():
            return f"\\x{{{ord(c):x}}}", i + 1
        if not c.isalnum() or c in "AbBafnrtv":
            return "\\" + c, i + 1
        raise error(f"bad escape \\{c} in {pattern!r}")


class _Subject:
    """A text as RE2 reads it (UTF-8), with the map between character and byte offsets: encoded once per text,
    so a strategy that matches at many positions of one large text stays linear."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode("utf-8", "surrogatepass")
        self._starts: np.ndarray | None = None  # byte offset of each character, and of the end
        if len(self.data) != len(text):
            points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
            extra = (points >= 0x80).astype(np.int64) + (points >= 0x800) + (points >= 0x10000)
            self._starts = np.concatenate(([0], np.cumsum(extra + 1)))

    def byte(self, char: int) -> int:
        return char if self._starts is None else int(self._starts[char])

    def char(self, byte: int) -> int:
        return byte if self._starts is None else int(np.searchsorted(self._starts, byte))


_last_subject: list[_Subject] = []


def _subject(text: str) -> _Subject:
    held = _last_subject[:1]
    if held and held[0].text is text:
        return held[0]
    subject = _Subject(text)
    _last_subject[:] = [subject]
    return subject


_ANCHOR = re2._re2.RE2.Anchor
_REPLACEMENT = python_re.compile(r"\\(?:g<([^>]*)>|([0-9]{1,2})|(.))", python_re.S)
_REPLACEMENT_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "b": "\b", "\\": "\\"}


class Pattern:
    """A compiled pattern, with the methods and attributes of Python's `re.Pattern`."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        if not isinstance(pattern, str):
            raise error("a strategy's patterns are str")
        translation = _Translation(pattern, int(flags))
        self.pattern, self.flags = pattern, int(flags) | (U if not translation.ascii else 0)
        self._dollar = translation.dollar_at_end
        options = re2.Options()
        options.log_errors = False
        self._programs = []
        for form in (translation.forms() if self._dollar else translation.forms()[:1]):
            program = re2._re2.RE2(form.encode("utf-8"), options)
            if not program.ok():
                why = program.error()
                raise _refuse(pattern, why.decode("utf-8", "replace") if isinstance(why, bytes) else why)
            self._programs.append(program)
        first = self._programs[0]
        self.groups = first.NumberOfCapturingGroups()
        self.groupindex = {name.decode(): index for name, index in first.NamedCapturingGroups()}

    def _program(self, text: str, pos: int, end: int) -> Any:
        if not self._dollar or "\n" not in text[pos:end - 1]:
            return self._programs[0]
        if not text.endswith("\n", pos, end):
            return self._programs[1]
        raise error(f"{self.pattern!r}: `$` without re.MULTILINE in a text of several lines ending in a newline "
                    "has no RE2 form; use \\Z for the end of the text, or re.MULTILINE for the end of each line")

    def _matches(self, anchor: Any, text: str, pos: int, endpos: int | None) -> Iterator[Match]:
        if not isinstance(text, str):
            raise TypeError("a strategy matches str")
        end = len(text) if endpos is None else max(0, min(endpos, len(text)))
        pos = max(0, min(pos, end))
        source = text if end == len(text) else text[:end]  # Python: as if the text ended at endpos
        program, subject = self._program(source, pos, end), _subject(source)
        at, stop = subject.byte(pos), subject.byte(end)
        while at <= stop:
            spans = program.Match(anchor, subject.data, at, stop)
            if spans[0][0] < 0:
                return
            yield Match(self, text, pos, end, [(subject.char(a), subject.char(b)) if a >= 0 else (-1, -1)
                                                for a, b in spans])
            if spans[0][1] > spans[0][0]:
                at = spans[0][1]
            else:  # an empty match: go on from the next character
                char = subject.char(spans[0][1])
                if char >= end:
                    return
                at = subject.byte(char + 1)

    def search(self, string: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return next(self._matches(_ANCHOR.UNANCHORED, string, pos, endpos), None)

    def match(self, string: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return next(self._matches(_ANCHOR.ANCHOR_START, string, pos, endpos), None)

    def fullmatch(self, string: str, pos: int = 0, endpos: int | None = None) -> Match | None:
        return next(self._matches(_ANCHOR.ANCHOR_BOTH, string, pos, endpos), None)

    def finditer(self, string: str, pos: int = 0, endpos: int | None = None) -> Iterator[Match]:
        return self._matches(_ANCHOR.UNANCHORED, string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int | None = None) -> list[Any]:
        if self.groups == 0:
            return [m.group() for m in self.finditer(string, pos, endpos)]
        found = [m.groups("") for m in self.finditer(string, pos, endpos)]
        return [g[0] for g in found] if self.groups == 1 else found

    def split(self, string: str, maxsplit: int = 0) -> list[Any]:
        pieces: list[Any] = []
        last = 0
        for count, m in enumerate(self.finditer(string)):
            if maxsplit and count >= maxsplit:
                break
            pieces.append(string[last:m.start()])
            pieces.extend(m.groups())
            last = m.end()
        return [*pieces, string[last:]]

    def subn(self, repl: str | Callable[[Match], str], string: str, count: int = 0) -> tuple[str, int]:
        pieces, last, made = [], 0, 0
        for m in self.finditer(string):
            if count and made >= count:
                break
            pieces += [string[last:m.start()], repl(m) if callable(repl) else m.expand(repl)]
            last, made = m.end(), made + 1
        return "".join(pieces) + string[last:], made

    def sub(self, repl: str | Callable[[Match], str], string: str, count: int = 0) -> str:
        return self.subn(repl, string, count)[0]

    def __repr__(self) -> str:
        return f"re.compile({self.pattern!r})"


class Match:
    """One match, with the methods and attributes of Python's `re.Match`."""

    def __init__(self, pattern: Pattern, string: str, pos: int, endpos: int, spans: list[tuple[int, int]]) -> None:
        self.re, self.string, self.pos, self.endpos = pattern, string, pos, endpos
        self._spans = spans
        found = [g for g in range(1, len(spans)) if spans[g][0] >= 0]
        self.lastindex = max(found, key=lambda g: spans[g][1], default=None)
        names = {index: name for name, index in pattern.groupindex.items()}
        self.lastgroup = names.get(self.lastindex) if self.lastindex is not None else None

    def _index(self, group: int | str) -> int:
        index = self.re.groupindex.get(group, -1) if isinstance(group, str) else group
        if not isinstance(index, int) or not 0 <= index < len(self._spans):
            raise IndexError("no such group")
        return index

    def span(self, group: int | str = 0) -> tuple[int, int]:
        return self._spans[self._index(group)]

    def start(self, group: int | str = 0) -> int:
        return self.span(group)[0]

    def end(self, group: int | str = 0) -> int:
        return self.span(group)[1]

    def _text(self, group: int | str, default: Any = None) -> Any:
        start, end = self.span(group)
        return default if start < 0 else self.string[start:end]

    def group(self, *groups: int | str) -> Any:
        if len(groups) <= 1:
            return self._text(groups[0] if groups else 0)
        return tuple(self._text(g) for g in groups)

    def __getitem__(self, group: int | str) -> Any:
        return self._text(group)

    def groups(self, default: Any = None) -> tuple[Any, ...]:
        return tuple(self._text(g, default) for g in range(1, len(self._spans)))

    def groupdict(self, default: Any = None) -> dict[str, Any]:
        return {name: self._text(index, default) for name, index in self.re.groupindex.items()}

    def expand(self, template: str) -> str:
        def one(piece: python_re.Match[str]) -> str:
            named, number, other = piece.groups()
            if other is None:
                group: int | str = int(number) if number is not None else (int(named) if named.isdigit() else named)
                return self._text(group, "")
            if other in _REPLACEMENT_ESCAPES:
                return _REPLACEMENT_ESCAPES[other]
            if other.isascii() and other.isalpha():
                raise error(f"bad escape \\{other} in the replacement {template!r}")
            return "\\" + other

        return _REPLACEMENT.sub(one, template)

    def __repr__(self) -> str:
        return f"<re.Match object; span={self.span()}, match={self.group()!r}>"


def compile(pattern: str | Pattern, flags: int = 0) -> Pattern:  # noqa: A001 - the name Python's `re` gives it
    if isinstance(pattern, Pattern):
        return pattern
    return _compiled(pattern, int(flags))


_cache: dict[tuple[str, int], Pattern] = {}
CACHE_SIZE = 512


def _compiled(pattern: str, flags: int) -> Pattern:
    key = (pattern, flags)
    found = _cache.get(key)
    if found is None:
        found = Pattern(pattern, flags)
        if len(_cache) >= CACHE_SIZE:
            _cache.clear()
        _cache[key] = found
    return found


def search(pattern: str | Pattern, string: str, flags: int = 0) -> Match | None:
    return compile(pattern, flags).search(string)


def match(pattern: str | Pattern, string: str, flags: int = 0) -> Match | None:
    return compile(pattern, flags).match(string)


def fullmatch(pattern: str | Pattern, string: str, flags: int = 0) -> Match | None:
    return compile(pattern, flags).fullmatch(string)


def finditer(pattern: str | Pattern, string: str, flags: int = 0) -> Iterator[Match]:
    return compile(pattern, flags).finditer(string)


def findall(pattern: str | Pattern, string: str, flags: int = 0) -> list[Any]:
    return compile(pattern, flags).findall(string)


def split(pattern: str | Pattern, string: str, maxsplit: int = 0, flags: int = 0) -> list[Any]:
    return compile(pattern, flags).split(string, maxsplit)


def sub(pattern: str | Pattern, repl: str | Callable[[Match], str], string: str, count: int = 0,
        flags: int = 0) -> str:
    return compile(pattern, flags).sub(repl, string, count)


def subn(pattern: str | Pattern, repl: str | Callable[[Match], str], string: str, count: int = 0,
         flags: int = 0) -> tuple[str, int]:
    return compile(pattern, flags).subn(repl, string, count)


def escape(pattern: str) -> str:
    return python_re.escape(pattern)


def purge() -> None:
    _cache.clear()


_FLAG_NAMES = {"NOFLAG": NOFLAG, "I": I, "IGNORECASE": I, "M": M, "MULTILINE": M, "S": S, "DOTALL": S, "A": A,
               "ASCII": A, "U": U, "UNICODE": U, "X": X, "VERBOSE": X}
# function -> where its flags go among the positional arguments
_FLAGS_AT = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "finditer": 2, "findall": 2, "split": 3,
             "sub": 4, "subn": 4}


def literal_pattern_problems(tree: ast.Module) -> list[str]:
    """Why the patterns a strategy's source spells out (a string literal, or a module-level string constant,
    handed to `re.compile`, `re.search`, ...) cannot run on RE2: found before any of the module runs, so forge
    asks the model again and a stored strategy is refused when it is loaded. Patterns made at run time are
    refused when they are compiled."""
    modules: set[str] = set()
    functions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "re"}
        elif isinstance(node, ast.ImportFrom) and node.module == "re" and node.level == 0:
            functions |= {alias.asname or alias.name: alias.name for alias in node.names if alias.name in _FLAGS_AT}
    constants = {node.targets[0].id: node.value.value for node in tree.body
                 if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        called = node.func
        if isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name) and called.value.id in modules:
            name = called.attr
        elif isinstance(called, ast.Name):
            name = functions.get(called.id, "")
        else:
            continue
        first = node.args[0]
        pattern = first.value if isinstance(first, ast.Constant) else (
            constants.get(first.id) if isinstance(first, ast.Name) else None)
        if name not in _FLAGS_AT or not isinstance(pattern, str):
            continue
        given = [k.value for k in node.keywords if k.arg == "flags"]
        at = _FLAGS_AT[name]
        flags = _literal_flags(given[0] if given else node.args[at] if len(node.args) > at else None, modules)
        if flags is None:  # flags computed at run time: the pattern is checked when it is compiled
            continue
        try:
            compile(pattern, flags)
        except error as exc:
            problems.append(f"line {node.lineno}: {exc}")
    return problems


def _literal_flags(node: ast.expr | None, modules: set[str]) -> int | None:
    if node is None:
        return 0
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
        return _FLAG_NAMES.get(node.attr)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _literal_flags(node.left, modules), _literal_flags(node.right, modules)
        return None if left is None or right is None else left | right
    return None


PUBLIC = ("compile", "search", "match", "fullmatch", "finditer", "findall", "split", "sub", "subn", "escape",
          "purge", "error", "Pattern", "Match", "NOFLAG", "I", "IGNORECASE", "M", "MULTILINE", "S", "DOTALL", "A",
          "ASCII", "U", "UNICODE", "X", "VERBOSE")
