"""The model's words as plain text: any code, HTML or link it wrote is taken out before anything renders it.

A model is told to write prose only, and its answer is untrusted all the same: only code spliced from disk
may ever render as code. `ProseFilter` reads the streamed answer (markdown, as models write it) and passes on
plain text in which nothing is code or markup any more:

- fenced blocks (also inside list items and quotes), indented code blocks, `<pre>`, `<script>`, `<style>`,
  `<code>` ... elements and HTML comments are removed with their content; every other tag is removed;
- an inline code span stays only when it holds one identifier or path (`Parser.parse`, `app/auth.py`);
  a span holding code (`x = f(1)`) is removed, and so is a stray backtick that could open one;
- a link keeps its text, followed by its address only when that is http(s) or relative; an image keeps its
  alt text; an autolink keeps an http(s) address; any other scheme (`javascript:`, `data:`) is removed;
- quote markers go, indentation is at most three spaces (never an indented code block), list markers stay.

Citation markers `[[k]]`/`[[k:a-b]]` and the abstention sentinel pass through untouched for the splicer. The
output does not depend on how the stream was split; every removal is counted in the shared `stats`.
"""

from __future__ import annotations

import re
from collections import Counter

from codeloupe.types import visible

ABSTAIN = "<<ABSTAIN>>"
CITATION_MARKER_MAX = 40  # characters between `[[` and `]]`
CITATION_MARKER = re.compile(rf"\[\[([^\[\]\n]{{0,{CITATION_MARKER_MAX}}})\]\]")

# A line's structure before its text: indentation, quote markers, list markers (in any order).
_HEAD = re.compile(r"(?:[ \t]+|>|(?:[-*+]|\d{1,9}[.)])(?=[ \t]|\Z))*")
_LIST_MARKER = re.compile(r"[-*+]|\d{1,9}[.)]")
_FENCE = re.compile(r"(`{3,}|~{3,})")
_SPECIAL = re.compile(r"[\n\[<`!]")
# One identifier or path, as prose may name it: `name`, `Parser.parse`, `std::io`, `app/auth.py`, `--flag`,
# `@decorator`, `$var`, `run()`.
IDENTIFIER = re.compile(r"(?:--?|[@$])?[A-Za-z_][\w$]*(?:(?:\.|::|->|#|/|-)[A-Za-z_$][\w$]*)*(?:\(\))?")
_IDENTIFIER_MAX = 100
_LINK = re.compile(r"\[([^\[\]\n]*)\]\(\s*<?((?:[^\s()<>]|\([^\s()<>]*\))*)>?"
                   r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)")
_LINK_PREFIX = re.compile(r"\[[^\[\]\n]*(?:\](?:\([^\n]*)?)?")  # a link still being streamed
_SAFE_ADDRESS = re.compile(r"https?://\S+", re.I)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\s]*)>")
_EMAIL = re.compile(r"<([\w.+-]+@[\w-]+(?:\.[\w-]+)+)>")
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)(?:\s(?:[^<>\"']|\"[^\"]*\"|'[^']*')*)?/?>")
_DECLARATION = re.compile(r"<[!?][^<>]*>")
_TAG_START = re.compile(r"<[/!?A-Za-z]")
_TAG_WAIT_MAX = 400  # characters a tag may take to close before the `<` is read as text
# Elements whose content is code or markup, removed with the element.
RAW_ELEMENTS = frozenset({"pre", "code", "script", "style", "textarea", "xmp", "listing", "plaintext", "iframe",
                          "noscript", "template", "svg", "math", "object", "samp", "kbd"})


def is_safe_address(url: str) -> bool:
    """An http(s) address, or a relative one (no scheme, not `//host`)."""
    url = url.strip()
    if _SAFE_ADDRESS.fullmatch(url):
        return True
    return bool(url) and not url.startswith(("//", "\\")) and not _SCHEME.match(url)


def markdown_text(text: str) -> str:
    """Plain prose as markdown that renders as the same text: no link, HTML or image can form in it, and its
    control and bidi characters are shown as escapes (`visible`), as the CLI prints a model's prose."""
    return visible(re.sub(r"([\\\[\]<])", r"\\\1", text))  # after: an escape's backslash is shown as one


def _columns(whitespace: str) -> int:
    cols = 0
    for ch in whitespace:
        cols = cols + 4 - cols % 4 if ch == "\t" else cols + 1
    return cols


class ProseFilter:
    """Streamed model markdown in, plain text out. `feed` each delta, then `finish` once."""

    def __init__(self, stats: Counter[str]) -> None:
        self.stats = stats
        self._buf = ""
        self._fence: str | None = None  # inside a fenced block the model wrote: its fence
        self._raw_close: str | None = None  # inside a removed element or comment: what ends it
        self._dropping_line = False  # the rest of this line is indented code
        self._line_start = True
        self._line_kind = "blank"  # what the current line is so far: blank | text | code
        self._previous = "blank"  # what the previous line was
        self._in_list = False  # a list item is still open: an indented line continues it
        self._code_block_open = False  # the last non-blank line was indented code

    def feed(self, delta: str) -> str:
        self._buf += delta
        return self._drain(final=False)

    def finish(self) -> str:
        return self._drain(final=True)

    def _drain(self, final: bool) -> str:
        out: list[str] = []
        while self._buf:
            if self._fence is not None:
                progressed = self._in_fence(final)
            elif self._raw_close is not None:
                progressed = self._in_raw(final)
            elif self._dropping_line:
                progressed = self._drop_rest_of_line()
            elif self._line_start:
                progressed = self._head(final, out)
            else:
                progressed = self._inline(final, out)
            if not progressed:
                break
        return "".join(out)

    # ------------------------------------------------------------------------------------------ lines

    def _end_line(self) -> None:
        self._previous = self._line_kind
        self._line_kind = "blank"
        self._line_start = True

    def _head(self, final: bool, out: list[str]) -> bool:
        """At a line start: decide what the line is (code to drop, or text) and emit its normalised head."""
        line = self._buf.split("\n", 1)[0]
        complete = "\n" in self._buf or final
        head = _HEAD.match(line)
        assert head is not None  # the pattern matches the empty string
        rest = line[head.end():]
        if not complete and (len(rest) < 3 or rest.isdigit() or _FENCE.match(rest)):
            return False  # the head, a list number or a fence may still grow
        leading = re.match(r"[ \t]*", line)
        cols = _columns(leading.group(0) if leading else "")
        markers = _LIST_MARKER.findall(head.group(0).replace(">", " "))
        fence = _FENCE.match(rest)
        if fence and not (fence.group(1)[0] == "`" and "`" in rest[fence.end():]):
            self._fence = fence.group(1)
            self.stats["code_blocks_removed"] += 1
            self._buf = self._buf[len(line) + 1:]  # the opening line, info string and all
            self._line_start = True
            return True
        self._line_start = False
        self._buf = self._buf[head.end():]
        if not rest.strip() and not markers:
            return True  # a blank line: its newline is handled inline
        continues_list = self._in_list and (cols >= 2 or self._previous == "text")
        if cols >= 4 and not markers and not (continues_list and cols < 8):
            if not self._code_block_open:
                self.stats["indented_code_removed"] += 1
            self._code_block_open = True
            self._line_kind = "code"
            self._dropping_line = True
            return True
        self._code_block_open = False
        self._in_list = bool(markers) or continues_list
        self._line_kind = "text"
        out.append(" " * min(cols, 3) + "".join(f"{m} " for m in markers))
        return True

    def _drop_rest_of_line(self) -> bool:
        newline = self._buf.find("\n")
        if newline < 0:
            self._buf = ""
            return False
        self._buf = self._buf[newline + 1:]
        self.stats["code_lines_removed"] += 1
        self._dropping_line = False
        self._end_line()
        return True

    def _in_fence(self, final: bool) -> bool:
        """Drop one line of a fenced block the model wrote; False when the line is not complete yet."""
        newline = self._buf.find("\n")
        if newline < 0:
            if final:
                self._buf = ""  # an unclosed fence runs to the end: all of it is dropped
                self._fence = None
            return final
        line, self._buf = self._buf[:newline], self._buf[newline + 1:]
        fence = self._fence or "```"
        closing = re.fullmatch(rf"[ \t>]*({re.escape(fence[0])}{{{len(fence)},}})[ \t]*", line)
        if closing:
            self._fence = None
            self._previous, self._line_kind, self._line_start = "blank", "blank", True
        else:
            self.stats["code_lines_removed"] += 1
        return True

    def _in_raw(self, final: bool) -> bool:
        """Drop the content of a removed element (or comment) up to and including its end."""
        close = self._raw_close
        assert close is not None
        at = self._buf.lower().find(close)
        if at < 0:
            keep = len(close) - 1  # the end may be arriving split across deltas
            self._buf = "" if final else self._buf[max(len(self._buf) - keep, 0):]
            return False
        end = at + len(close)
        if close != "-->":  # `</pre` ends at its `>`
            gt = self._buf.find(">", end, at + _TAG_WAIT_MAX)
            if gt < 0 and not final and len(self._buf) < at + _TAG_WAIT_MAX:
                self._buf = self._buf[at:]
                return False
            end = gt + 1 if gt >= 0 else end
        self._buf = self._buf[end:]
        self._raw_close = None
        return True

    # ------------------------------------------------------------------------------------------ inline

    def _inline(self, final: bool, out: list[str]) -> bool:
        at = _SPECIAL.search(self._buf)
        if at is None:
            self._text(self._buf, out)
            self._buf = ""
            return True
        self._text(self._buf[:at.start()], out)
        self._buf = self._buf[at.start():]
        char = self._buf[0]
        if char == "\n":
            out.append("\n")
            self._buf = self._buf[1:]
            self._end_line()
            return True
        handler = {"[": self._bracket, "!": self._bang, "<": self._angle, "`": self._backticks}[char]
        return handler(final, out)

    def _text(self, text: str, out: list[str]) -> None:
        if text:
            out.append(text)
            if text.strip():
                self._line_kind = "text"

    def _take(self, length: int, out: list[str], text: str = "") -> bool:
        """Consume `length` characters of the buffer, emitting `text` in their place."""
        self._buf = self._buf[length:]
        self._text(text, out)
        return True

    def _bracket(self, final: bool, out: list[str]) -> bool:
        marker = CITATION_MARKER.match(self._buf)
        if marker:
            return self._take(marker.end(), out, marker.group(0))
        if self._could_grow(final, marker_too=True):
            return False
        link = _LINK.match(self._buf)
        if link is None:
            return self._take(1, out, "[")
        words, address = _link_text(link.group(1)), link.group(2)
        if is_safe_address(address):
            shown = f"{words} ({address})" if words and words != address else address
        else:
            self.stats["links_removed"] += 1
            shown = words
        return self._take(link.end(), out, shown)

    def _bang(self, final: bool, out: list[str]) -> bool:
        if self._buf == "!" and not final:
            return False
        if not self._buf.startswith("!["):
            return self._take(1, out, "!")
        image = _LINK.match(self._buf, 1)
        if image is None:
            if not final and "\n" not in self._buf and _LINK_PREFIX.fullmatch(self._buf, 1):
                return False
            return self._take(1, out, "!")
        self.stats["images_removed"] += 1
        return self._take(image.end(), out, _link_text(image.group(1)))

    def _could_grow(self, final: bool, *, marker_too: bool) -> bool:
        """True while the `[...` at the buffer's start may still become a citation marker or a link."""
        tail = self._buf
        if final or "\n" in tail:
            return False
        marker = marker_too and tail.startswith("[") and "[[".startswith(tail[:2]) and "]]" not in tail \
            and len(tail) <= CITATION_MARKER_MAX + 4
        return marker or bool(_LINK_PREFIX.fullmatch(tail))

    def _angle(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        if buf.startswith(ABSTAIN):
            return self._take(len(ABSTAIN), out, ABSTAIN)
        if not final and (ABSTAIN.startswith(buf) or "<!--".startswith(buf)):
            return False
        if buf.startswith("<!--"):
            self.stats["html_removed"] += 1
            self._raw_close = "-->"
            return self._take(4, out)
        # A tag is read within one line and `_TAG_WAIT_MAX` characters, so how the stream was split cannot
        # change what it is.
        if not final and "\n" not in buf and len(buf) < _TAG_WAIT_MAX and _TAG_START.match(buf):
            if not (_AUTOLINK.match(buf) or _EMAIL.match(buf) or _TAG.match(buf) or _DECLARATION.match(buf)):
                return False
        window = buf[:_TAG_WAIT_MAX].split("\n", 1)[0]
        autolink = _AUTOLINK.match(window)
        if autolink:
            if _SAFE_ADDRESS.fullmatch(autolink.group(1)):
                return self._take(autolink.end(), out, autolink.group(1))
            self.stats["links_removed"] += 1
            return self._take(autolink.end(), out)
        email = _EMAIL.match(window)
        if email:
            return self._take(email.end(), out, email.group(1))
        tag = _TAG.match(window) or _DECLARATION.match(window)
        if tag:
            self.stats["html_removed"] += 1
            name = tag.group(2).lower() if tag.re is _TAG else ""
            if name in RAW_ELEMENTS and not tag.group(1) and not tag.group(0).endswith("/>"):
                self._raw_close = f"</{name}"
            return self._take(tag.end(), out)
        return self._take(1, out, "<")

    def _backticks(self, final: bool, out: list[str]) -> bool:
        run = len(self._buf) - len(self._buf.lstrip("`"))
        line = self._buf.split("\n", 1)[0]
        complete = "\n" in self._buf or final
        if run == len(line) and not complete:
            return False
        close = re.compile(rf"(?<!`)`{{{run}}}(?!`)").search(line, run)
        if close is None or (close.end() == len(line) and not complete):
            if not complete:
                return False  # the closing run may still arrive on this line
            self.stats["backticks_removed"] += 1  # a stray run: it could pair with one on a later line
            return self._take(run, out)
        content = line[run:close.start()].strip()
        if len(content) <= _IDENTIFIER_MAX and IDENTIFIER.fullmatch(content):
            return self._take(close.end(), out, f"`{content}`")
        self.stats["inline_code_removed"] += 1
        return self._take(close.end(), out)


def _link_text(text: str) -> str:
    """A link's words as plain text (markup characters dropped)."""
    return " ".join(re.sub(r"[`<>\[\]*_]", "", text).split())
