"""Issue mode: reading a pasted bug report.

A bug report is long, mixes prose with tracebacks and code, and names the files that matter in its stack
frames. It is searched as several variants (title, traceback, fenced code, identifier bag) merged by rank, and
its frames, explicit paths and `backticked` identifiers pin files directly.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from codeloupe import ranking as R
from codeloupe.lanes.tokens import identifiers

_SOURCE_EXT = r"(?:py|pyi|[cm]?[jt]sx?|go|rb|rs|php|java|kt|swift|cs|c|h|cc|cpp|hpp|lua|sh|ex|exs|scala|dart)"


@dataclass(frozen=True)
class TraceShape:
    """How one language prints a stack trace.

    `frame` yields a path (or, for the JVM, a qualified name and a file name) and a line, sometimes the
    function. A text is a trace of this shape when it holds `alone` frames, or one frame and the `header`
    (the line a runtime prints before its frames: `panic:`, `Traceback`, `panicked at`, `Exception in`).
    `innermost_last`: Python prints the frame where it failed last; the others print it first.
    """

    language: str
    frame: re.Pattern[str]
    header: re.Pattern[str]
    alone: int
    innermost_last: bool = False


# A frame's path starts where a run of path characters does: tried from inside the run too, each of a long
# run's positions scanned to its end (a query of one 20,000-character word took seconds, holding the server).
_PATH_START = r"(?<![\w./\\-])"
_ERROR_LINE = r"(?m)^\s*(?:Uncaught |Exception in thread \S+ )?[\w.$]*(?:Error|Exception)\b"
TRACE_SHAPES = [
    TraceShape("python", re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>[\w<>.]+))?'),
               re.compile(r"Traceback \(most recent call last\)"), alone=1, innermost_last=True),
    # Node prints `at fn (file.js:L:C)`, or `at file.js:L:C` for anonymous code. The function name is bounded
    # for the same reason as `_PATH_START`: "at " repeated was quadratic.
    TraceShape("javascript", re.compile(r"\bat (?:(?P<func>[\w.$<>\[\] ]{1,200}?) \()?(?:file://)?"
                                        r"(?P<path>[^\s()]+?\.[cm]?[jt]sx?):(?P<line>\d+)(?::(?P<column>\d+))?\)?"),
               re.compile(_ERROR_LINE), alone=2),
    TraceShape("ruby", re.compile(_PATH_START + r"(?P<path>[\w./\\-]+\.rb):(?P<line>\d+)"
                                  r"(?::in [`'](?:[\w:]+[#.])?(?P<func>[^'`]+)')?"),
               re.compile(r"\.rb:\d+:in [`']"), alone=2),
    # Go: `panic: ...`, `goroutine 1 [running]:`, then `pkg.fn(...)` over a tab-indented `file.go:NN +0x1d`.
    TraceShape("go", re.compile(_PATH_START + r"(?P<path>[\w./\\-]+\.go):(?P<line>\d+)"),
               re.compile(r"(?m)^(?:panic: |fatal error: |goroutine \d+ \[)|\.go:\d+ \+0x"), alone=3),
    TraceShape("rust", re.compile(_PATH_START + r"(?P<path>[\w./\\-]+\.rs):(?P<line>\d+):\d+"),
               re.compile(r"panicked at|stack backtrace:"), alone=2),
    TraceShape("php", re.compile(_PATH_START + r"(?P<path>[\w./\\-]+\.php)(?:\((?P<line>\d+)\)|:(?P<line2>\d+))"),
               re.compile(r"(?m)^#\d+ \S+\.php\(\d+\)|PHP (?:Fatal|Warning|Notice)|Stack trace:"), alone=2),
    # The JVM names the class, not the path: `at com.acme.Cart.total(Cart.java:42)`; the package is the folder.
    TraceShape("java", re.compile(r"\bat (?P<func>[\w$.]+)\((?P<path>[\w$]+\.(?:java|kt|scala|groovy)):"
                                  r"(?P<line>\d+)\)"),
               re.compile(_ERROR_LINE), alone=2),
]
_NUMBER_DIGITS_MAX = 9  # a line or column past a billion is none of a real file
_PATH = re.compile(r"(?<![\w/.-])(?P<path>(?:[\w.-]+/)*[\w.-]+\." + _SOURCE_EXT + r")(?![\w])")
# The info string after the opening fence is bounded and stops at a backtick, for the same reason as above.
_FENCE = re.compile(r"```[^\n`]{0,200}\n(.*?)```", re.S)
_BACKTICK = re.compile(r"(?<!`)`([^`\n]{2,80})`(?!`)")


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str = ""
    column: int = 0  # where the trace gives one (Node's `file.js:L:C`): a compiled line holds many source lines


@dataclass(frozen=True)
class Variant:
    """One way of reading the query, searched by every lane and fused by rank with the others."""

    name: str  # query (a question: the only variant) | full | title | trace | fenced | identifiers
    text: str
    weight: float = 1.0


@dataclass
class IssueQuery:
    text: str
    variants: list[Variant] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    backticked: list[str] = field(default_factory=list)


def is_issue(query: str) -> bool:
    """A pasted bug report rather than a question: many identifier tokens, or a stack trace of any length."""
    if len(identifiers(query)) > R.ISSUE_MIN_IDENTIFIERS:
        return True
    return any(is_trace(query, shape) for shape in TRACE_SHAPES)


def is_trace(text: str, shape: TraceShape) -> bool:
    count = sum(1 for _ in itertools.islice(shape.frame.finditer(text), shape.alone))
    return count >= shape.alone or (count > 0 and shape.header.search(text) is not None)


def parse_issue(query: str, full_text_weight: float) -> IssueQuery:
    issue = IssueQuery(text=query)
    issue.frames = frames(query)
    seen_paths = {f.path for f in issue.frames}
    issue.paths = [p for p in dict.fromkeys(m.group("path") for m in _PATH.finditer(query)) if p not in seen_paths]
    issue.backticked = list(dict.fromkeys(
        m.group(1).strip("()") for m in _BACKTICK.finditer(query) if re.fullmatch(r"[\w.:#$]+\(?\)?", m.group(1))
    ))
    title = next((line.strip() for line in query.splitlines() if line.strip()), "")
    fenced = "\n".join(_FENCE.findall(query))
    trace = "\n".join(f"{f.path} {f.function}" for f in issue.frames)
    bag = " ".join(dict.fromkeys(identifiers(query)))
    issue.variants = [Variant("full", query, full_text_weight)]
    for name, text in (("title", title), ("trace", trace), ("fenced", fenced), ("identifiers", bag)):
        if text and text != query and name in R.ISSUE_VARIANTS:
            issue.variants.append(Variant(name, text))
    return issue


def frames(text: str) -> list[Frame]:
    """Stack frames named in `text`, innermost (closest to the failure) first."""
    out: list[Frame] = []
    seen: set[tuple[str, int, int]] = set()
    for shape in TRACE_SHAPES:
        matches = list(shape.frame.finditer(text))
        if shape.innermost_last:
            matches.reverse()
        for m in matches:
            groups = m.groupdict()
            line = _number(groups.get("line") or groups.get("line2"))
            path = groups["path"].replace("\\", "/")
            if shape.language == "java":
                path = _jvm_path(groups["func"], path)
            column = _number(groups.get("column"))
            key = (path, line, column)  # a minified bundle is one line: its frames differ in their columns only
            if key in seen:
                continue
            seen.add(key)
            out.append(Frame(path, line, (groups.get("func") or "").strip(), column))
    return out


def _number(digits: str | None) -> int:
    """A frame's line or column; 0 (unknown) for none, or for more digits than a file's line has (the report is
    the user's text: 5,000 digits raised from `int`, 20 overflowed the index's 64-bit lines)."""
    return int(digits) if digits and len(digits) <= _NUMBER_DIGITS_MAX else 0


def _jvm_path(qualified: str, file_name: str) -> str:
    """`com.acme.cart.Cart.total` + `Cart.java` -> `com/acme/cart/Cart.java` (the package's lower-case parts)."""
    package = []
    for part in qualified.split(".")[:-1]:
        if not part[:1].islower():
            break
        package.append(part)
    return "/".join([*package, file_name])


def resolve_suffix(path: str, by_basename: Mapping[str, list[str]]) -> str | None:
    """The one workspace path that ends with the longest suffix of `path` any does (frames come from other
    machines); None when none does, or when several tie (a bare `__init__.py` names no file in particular).

    `by_basename` maps a file name to the workspace paths that have it.
    """
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    if not parts:
        return None
    known = by_basename.get(parts[-1], [])
    for i in range(len(parts)):
        suffix = "/".join(parts[i:])
        matches = [k for k in known if k == suffix or k.endswith("/" + suffix)]
        if matches:
            return matches[0] if len(matches) == 1 else None
    return None
