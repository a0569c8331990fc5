"""Issue mode: reading a pasted bug report.

A bug report is long, mixes prose with tracebacks and code, and names the files that matter in its stack
frames. It is searched as several variants (title, traceback, fenced code, identifier bag) merged by rank, and
its frames, explicit paths and `backticked` identifiers pin files directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from codeloupe.lanes.tokens import identifiers
from codeloupe.ranking import ISSUE_MIN_IDENTIFIERS

_SOURCE_EXT = r"(?:py|pyi|[cm]?[jt]sx?|go|rb|rs|php|java|kt|swift|cs|c|h|cc|cpp|hpp|lua|sh|ex|exs|scala|dart)"

# Frame shapes, one per language family. Each yields a path and a line; some yield the function too.
# Python prints the innermost frame (where it failed) last; Go, JS, Ruby, Rust and PHP print it first.
_INNERMOST_LAST = 1  # how many of the patterns below, from the top, print innermost last
_FRAMES = [
    re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>[\w<>.]+))?'),  # Python
    re.compile(r"\bat (?:(?P<func>[\w.$<>\[\] ]+?) \()?(?:file://)?(?P<path>[^\s()]+?\.[cm]?[jt]sx?)"
               r":(?P<line>\d+)(?::\d+)?\)?"),  # JS/TS
    re.compile(r"(?P<path>[\w./\\-]+\.rb):(?P<line>\d+)(?::in [`'](?:[\w:]+[#.])?(?P<func>[^'`]+)')?"),  # Ruby
    re.compile(r"(?P<path>[\w./\\-]+\.go):(?P<line>\d+)"),  # Go
    re.compile(r"(?P<path>[\w./\\-]+\.rs):(?P<line>\d+):\d+"),  # Rust
    re.compile(r"(?P<path>[\w./\\-]+\.php)(?:\((?P<line>\d+)\)|:(?P<line2>\d+))"),  # PHP
]
_PATH = re.compile(r"(?<![\w/.-])(?P<path>(?:[\w.-]+/)*[\w.-]+\." + _SOURCE_EXT + r")(?![\w])")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_BACKTICK = re.compile(r"(?<!`)`([^`\n]{2,80})`(?!`)")


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    function: str = ""


@dataclass
class IssueQuery:
    text: str
    variants: list[tuple[str, float]] = field(default_factory=list)  # (text, weight)
    frames: list[Frame] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    backticked: list[str] = field(default_factory=list)


def is_issue(query: str) -> bool:
    """A pasted bug report rather than a question: many identifier tokens, or a traceback."""
    if len(identifiers(query)) > ISSUE_MIN_IDENTIFIERS:
        return True
    return any(rx.search(query) for rx in _FRAMES[:1]) and query.count("\n") >= 2


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
    issue.variants = [(query, full_text_weight)]
    for variant in (title, trace, fenced, bag):
        if variant and variant != query:
            issue.variants.append((variant, 1.0))
    return issue


def frames(text: str) -> list[Frame]:
    """Stack frames named in `text`, innermost (closest to the failure) first."""
    out: list[Frame] = []
    seen: set[tuple[str, int]] = set()
    for i, rx in enumerate(_FRAMES):
        matches = list(rx.finditer(text))
        if i < _INNERMOST_LAST:
            matches.reverse()
        for m in matches:
            groups = m.groupdict()
            line = groups.get("line") or groups.get("line2") or "0"
            path = groups["path"].replace("\\", "/")
            key = (path, int(line))
            if key in seen:
                continue
            seen.add(key)
            out.append(Frame(path, int(line), (groups.get("func") or "").strip()))
    return out


def resolve_suffix(path: str, by_basename: dict[str, list[str]]) -> list[str]:
    """Workspace paths that end with the longest possible suffix of `path` (frames come from other machines).

    `by_basename` maps a file name to the workspace paths that have it.
    """
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    if not parts:
        return []
    known = by_basename.get(parts[-1], [])
    for i in range(len(parts)):
        suffix = "/".join(parts[i:])
        matches = [k for k in known if k == suffix or k.endswith("/" + suffix)]
        if matches:
            return matches
    return []
