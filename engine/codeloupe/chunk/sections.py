"""Prose (and prose-shaped code) chunked at scored cut points.

Every line gets a score for starting a chunk there: headings score by level (H1 100 down to H6 50), fence
boundaries 80, paragraph starts 20; a line inside a fence may not start a chunk. From each chunk start,
the chunker looks at every cut that keeps the chunk within budget and takes the best one, weighting the
score by how full the chunk would be so that a heading near the target beats one right at the start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from codeloupe.chunk.lines import Lines
from codeloupe.chunk.syntax import Piece

FORBIDDEN = -1
PARAGRAPH = 20
FENCE = 80


def heading_score(level: int) -> int:
    return max(50, 100 - 10 * (level - 1))


@dataclass
class CutPlan:
    """Per line (0-based): the score of starting a chunk there, and the headings found."""

    scores: list[int]
    headings: dict[int, tuple[int, str]] = field(default_factory=dict)  # line index -> (level, title)


def _paragraph_scores(lines: list[str]) -> list[int]:
    scores = [0] * len(lines)
    for index in range(1, len(lines)):
        if lines[index].strip() and not lines[index - 1].strip():
            scores[index] = PARAGRAPH
    return scores


# ---------------------------------------------------------------------------------------- markdown

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t#]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def markdown_plan(lines: list[str]) -> CutPlan:
    plan = CutPlan(_paragraph_scores(lines))
    scores = plan.scores
    fence: str | None = None
    index = 0
    if lines and lines[0].rstrip() == "---":  # YAML front matter behaves like a fence
        for end in range(1, len(lines)):
            if lines[end].rstrip() in ("---", "..."):
                for inside in range(1, end + 1):
                    scores[inside] = FORBIDDEN
                index = end + 1
                break
    while index < len(lines):
        line = lines[index].rstrip("\r\n")
        if fence is not None:
            scores[index] = FORBIDDEN
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
                if index + 1 < len(lines):
                    scores[index + 1] = max(scores[index + 1], FENCE)
            index += 1
            continue
        opened = _FENCE_OPEN.match(line)
        if opened:
            fence = opened.group(1)
            scores[index] = max(scores[index], FENCE)
            index += 1
            continue
        atx = _ATX.match(line)
        if atx:
            level = len(atx.group(1))
            plan.headings[index] = (level, (atx.group(2) or "").strip())
            scores[index] = heading_score(level)
        elif (line.strip() and index + 1 < len(lines) and _SETEXT.match(lines[index + 1].rstrip("\r\n"))
              and not _FENCE_OPEN.match(line)):
            level = 1 if lines[index + 1].strip().startswith("=") else 2
            plan.headings[index] = (level, line.strip())
            scores[index] = heading_score(level)
            scores[index + 1] = FORBIDDEN
            index += 1
        index += 1
    return plan


# ---------------------------------------------------------------------------- reStructuredText / text

_ADORNMENT = re.compile(r"^([=\-`:'\"~^_*+#<>.!$%&(),/;?@\[\]\\{|}])\1{2,}[ \t]*$")


def rst_plan(lines: list[str]) -> CutPlan:
    """Section titles underlined (optionally overlined) by a repeated punctuation character.

    Levels follow the order in which adornment styles first appear, as reStructuredText defines them.
    An indented block after a line ending in `::` is a literal block: no cuts inside.
    """
    plan = CutPlan(_paragraph_scores(lines))
    scores = plan.scores
    styles: list[tuple[str, bool]] = []
    literal_indent: int | None = None
    for index, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        if literal_indent is not None:
            if not line.strip() or len(line) - len(line.lstrip()) > literal_indent:
                if line.strip():
                    scores[index] = FORBIDDEN
                continue
            literal_indent = None
        if line.rstrip().endswith("::"):
            literal_indent = len(line) - len(line.lstrip())
            continue
        under = _ADORNMENT.match(lines[index + 1].rstrip("\r\n")) if index + 1 < len(lines) else None
        title = line.strip()
        if not under or not title or _ADORNMENT.match(line) or len(under.group(0).rstrip()) < len(title):
            continue
        over = index > 0 and lines[index - 1].strip() == under.group(0).strip()
        style = (under.group(1), over)
        if style not in styles:
            styles.append(style)
        level = styles.index(style) + 1
        start = index - 1 if over else index
        plan.headings[start] = (level, title)
        scores[start] = heading_score(level)
        for following in range(start + 1, index + 2):
            scores[following] = FORBIDDEN
    return plan


# ----------------------------------------------------------------------------------------- AsciiDoc

_ADOC_HEADING = re.compile(r"^(={1,6}|#{1,6})[ \t]+(\S.*?)[ \t]*$")
_ADOC_DELIMITER = re.compile(r"^(-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|`{3,})[ \t]*$")


def asciidoc_plan(lines: list[str]) -> CutPlan:
    plan = CutPlan(_paragraph_scores(lines))
    scores = plan.scores
    block: str | None = None
    for index, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        if block is not None:
            scores[index] = FORBIDDEN
            if line.rstrip() == block:
                block = None
                if index + 1 < len(lines):
                    scores[index + 1] = max(scores[index + 1], FENCE)
            continue
        delimiter = _ADOC_DELIMITER.match(line)
        if delimiter:
            block = delimiter.group(1)
            scores[index] = max(scores[index], FENCE)
            continue
        heading = _ADOC_HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            plan.headings[index] = (level, heading.group(2))
            scores[index] = heading_score(level)
    return plan


# ------------------------------------------------------------------------------------ the cut itself


def cut(lines: Lines, plan: CutPlan, budget: int) -> list[tuple[int, int]]:
    """1-based inclusive ranges covering every line: greedy best-scored cuts within the budget."""
    ranges: list[tuple[int, int]] = []
    count = lines.count
    start = 1
    while start <= count:
        acc = lines.sizes[start - 1]
        stop = start + 1  # first line that does not fit
        while stop <= count and acc + lines.sizes[stop - 1] <= budget:
            acc += lines.sizes[stop - 1]
            stop += 1
        if stop > count:
            ranges.append((start, count))
            break
        best_cut, best_value = stop, -1.0
        for candidate in range(start + 1, stop + 1):
            score = plan.scores[candidate - 1]
            if score == FORBIDDEN:
                continue
            fill = lines.size(start, candidate - 1) / budget
            value = score * (0.5 + 0.5 * fill)
            if value >= best_value:
                best_cut, best_value = candidate, value
        ranges.append((start, best_cut - 1))
        start = best_cut
    return ranges


def section_pieces(lines: Lines, plan: CutPlan, budget: int, path: str) -> list[Piece]:
    """`section` pieces named by the heading in effect at their start (else the first heading inside)."""
    pieces: list[Piece] = []
    heading_lines = sorted(plan.headings)
    trail: list[tuple[int, str]] = []  # the open headings: (level, title)
    next_heading = 0
    for start, end in cut(lines, plan, budget):
        while next_heading < len(heading_lines) and heading_lines[next_heading] <= start - 1:
            _open(trail, plan.headings[heading_lines[next_heading]])
            next_heading += 1
        if trail:
            title = trail[-1][1]
        elif next_heading < len(heading_lines) and heading_lines[next_heading] <= end - 1:
            title = plan.headings[heading_lines[next_heading]][1]
        else:
            title = ""
        pieces.append(Piece(start, end, "section", title, (path, *(t for _, t in trail if t))))
    return pieces


def _open(trail: list[tuple[int, str]], heading: tuple[int, str]) -> None:
    while trail and trail[-1][0] >= heading[0]:
        trail.pop()
    trail.append(heading)
