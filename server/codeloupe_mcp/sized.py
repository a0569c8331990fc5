"""Answers sized for a model: every tool result fits a byte budget, and says so (with what to call next)
whenever it cuts. Completeness first: code is cut before any candidate file's map line, and a map line left out
for a small budget is counted.

Outside the code blocks every name (a file's path, a breadcrumb, a symbol) is a code span (`code_span`: one
line, its control and bidi characters escaped) and every other text quoting the workspace is one line
(`one_line`): the answer lands in an agent's context and in clients that render it as markdown, where a newline
in a file's name forged a heading, markdown in it formed a link and a bidi override or an escape sequence
reached the screen. `flat` JSON keeps the bytes (JSON escapes what it must): it is data, what an agent passes
back to `expand`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence

from codeloupe.types import (
    Bundle,
    ChunkHit,
    Expansion,
    FileHit,
    Located,
    PrunedChunk,
    code_fence,
    code_span,
    one_line,
    short_revision,
    split_lines,
)

DEFAULT_BUDGET_BYTES = 24_000  # about 6k tokens: a full CORE of four files fits; more is rarely read
MIN_BUDGET_BYTES = 1_000
MAX_BUDGET_BYTES = 200_000
_LINE_CHARS = 240  # one located line, clipped: minified code must not spend the budget
_ECHO_BYTES = 200  # the text `locate` looked for, as echoed in its answer


class Budget:
    """Bytes left in one answer (UTF-8, as the caller receives them)."""

    def __init__(self, limit: int) -> None:
        self.limit = min(max(limit, MIN_BUDGET_BYTES), MAX_BUDGET_BYTES)
        self.used = 0

    def take(self, text: str) -> bool:
        size = len(text.encode("utf-8"))
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def left(self) -> int:
        return self.limit - self.used


def search_answer(bundle: Bundle, max_bytes: int = DEFAULT_BUDGET_BYTES, *, flat: bool = False) -> str:
    """The `search` tool's answer: the bundle as text, or its ranked chunks as JSON (`flat`)."""
    return flat_json(bundle, max_bytes) if flat else bundle_text(bundle, max_bytes)


def bundle_text(bundle: Bundle, max_bytes: int = DEFAULT_BUDGET_BYTES) -> str:
    """CORE chunks in full, RELATED as a map, within `max_bytes` (UTF-8, newlines counted). What is said whatever
    the budget: the summary, CORE's headings and where each CORE chunk is; then the short list's map lines best
    first, CORE code, and the long tail; what does not fit is counted in a closing note saying what to call."""
    budget = Budget(max_bytes)
    head = [_summary(bundle), *_note_lines(bundle.notes, budget.limit)]
    if not bundle.core:
        return _within("\n".join([*head, "no match"]), budget.limit)
    short = [hit for hit in bundle.related if not hit.tail]
    tail = [hit for hit in bundle.related if hit.tail]
    chunks = [(hit, chunk) for hit in bundle.core for chunk in hit.chunks]
    core_heads = {hit.shown_path: f"## {hit.rank}. {code_span(hit.shown_path)}{_pinned(hit, bundle)}  ({one_line(hit.why)})"
                  for hit in bundle.core}
    # Across repositories a path is `repo:path`, and `expand` reads another repository's file given its `repo`.
    across = any(hit.repository for hit in bundle.files)
    related_head = [f"RELATED (a map: {'repo:' if across else ''}path:best lines, symbols, why; read any with `expand`"
                    f"{', passing its `repo`' if across else ''})"] if bundle.related else []
    # Reserved first: the lines said whatever the budget, and the closing notes at their largest.
    all_code = sum(_line_bytes(_code_block(hit, chunk)) for hit, chunk in chunks)
    budget.take("".join(line + "\n" for line in [*head, "CORE", *core_heads.values(), *related_head,
                                                   _cut_note(len(chunks), all_code, budget.limit, len(chunks), across),
                                                   _tail_note(len(bundle.related), budget.limit)]))
    # Each CORE chunk is at least where it is (path:lines), so that a cut one can be read with `expand`.
    placed = {id(chunk): budget.take(_cut_line(hit, chunk, short=True) + "\n") for hit, chunk in chunks}
    listed = _take_map_lines(short, budget)
    shown: dict[int, str] = {}
    cut, cut_bytes, partly = 0, 0, 0
    for hit, chunk in chunks:
        block = _code_block(hit, chunk)
        brief = _line_bytes(_cut_line(hit, chunk, short=True)) if placed[id(chunk)] else 0
        budget.used -= brief  # the code replaces its placeholder when it fits
        if budget.take(block + "\n"):
            shown[id(chunk)] = block
            continue
        excerpt = _anchor_excerpt(hit, chunk, budget.left() - 1)
        if excerpt and budget.take(excerpt + "\n"):
            shown[id(chunk)] = excerpt
            partly += 1
            continue
        budget.used += brief
        cut += 1
        cut_bytes += _line_bytes(block)
        full = _cut_line(hit, chunk, short=False)
        if placed[id(chunk)] and budget.take(full + "\n"):  # the breadcrumb too when it fits
            budget.used -= brief
            shown[id(chunk)] = full
        elif placed[id(chunk)]:
            shown[id(chunk)] = _cut_line(hit, chunk, short=True)
    # The long tail (candidates past every lane's short list) after the code: as many map lines as fit, once the
    # whole short list is listed (the files left out are then the lowest-ranked, as the closing note says).
    listed_tail = _take_map_lines(tail, budget) if len(listed) == len(short) else []
    out = [*head, "CORE"]
    for hit in bundle.core:
        out.append(core_heads[hit.shown_path])
        out += [shown[id(chunk)] for chunk in hit.chunks if id(chunk) in shown]
    out += [*related_head, *listed, *listed_tail]
    unlisted = len(bundle.related) - len(listed) - len(listed_tail)
    if unlisted:
        out.append(_tail_note(unlisted, budget.limit))
    if cut or partly:
        out.append(_cut_note(cut, cut_bytes, budget.limit, partly, across))
    return _within("\n".join(out), budget.limit)


def _take_map_lines(hits: Sequence[FileHit], budget: Budget) -> list[str]:
    """The map lines of `hits`, best first, as many as the budget holds."""
    lines = []
    for hit in hits:
        line = _map_line(hit)
        if not budget.take(line + "\n"):
            break
        lines.append(line)
    return lines


def _cut_line(hit: FileHit, chunk: ChunkHit, *, short: bool) -> str:
    where = code_span(f"{hit.shown_path}:{chunk.start_line}-{chunk.end_line}")
    return f"{where}  (code cut: budget)" if short else f"{where}  {_crumb(chunk.breadcrumb)}  (code cut: budget)"


def _line_bytes(text: str) -> int:
    return len(text.encode("utf-8")) + 1  # and its newline


def _within(text: str, limit: int) -> str:
    """`text` if it fits `limit` bytes; else its leading whole lines and a line saying the answer was cut (a last
    resort: notes or headings alone over a small budget)."""
    if len(text.encode("utf-8")) <= limit:
        return text
    note = f"[answer cut to stay within {limit} bytes: raise max_bytes]"
    return _lines_within(text, limit - len(note.encode("utf-8")) - 1).rstrip("\n") + "\n" + note


def _tail_note(left_out: int, limit: int) -> str:
    return (f"[{left_out} lower-ranked candidate files not listed to stay within {limit} bytes; "
            "raise max_bytes to list them]")


def flat_json(bundle: Bundle, max_bytes: int = DEFAULT_BUDGET_BYTES) -> str:
    """Ranked chunks, one object each: path, lines, the anchor line (the best-matching line), the text (the
    chunk, or its window around the anchor for RELATED files) and `truncated` when that text is partial. In rank
    order whatever the budget: a chunk with no room for a line of its text keeps its place with an empty `text`,
    and what is left out is what follows the last chunk placed. The candidate files whose content is withheld
    (they look like secrets), which have no chunk, are named in `withheld`; the long tail's (candidates past
    every lane's short list, which have no chunk either) follow the chunks in `tail`, each its rank, path and best
    lines, as many as fit once every chunk is placed, the rest counted in `cut` (rule 2: they were left out
    without a word)."""
    budget = Budget(max_bytes)
    chunks = [(hit, chunk) for hit in bundle.files for chunk in hit.chunks]
    tail = bundle.pruned_files()
    answer: dict = {"query": _echoed(bundle.query, budget.limit // 4),
                    "lanes": [lane.name for lane in bundle.lanes if lane.ready], "chunks": []}
    if withheld := [hit.shown_path for hit in bundle.files if hit.withheld]:
        answer["withheld"] = withheld
    if bundle.notes:
        answer["notes"] = _echoed_notes(bundle.notes, budget.limit // 4, budget.limit)
    # Reserved as it will be written: the query escaped, the lanes, the notes, the tail's key and the cut note at
    # its largest.
    budget.take(json.dumps({**answer, **({"tail": []} if tail else {}),
                            "cut": _flat_cut(len(chunks), len(chunks), budget.limit, len(tail))}, ensure_ascii=False))
    items: list[dict] = []
    for hit, chunk in chunks:
        item = _fitted(dataclasses.asdict(PrunedChunk.of(hit, chunk)), budget)
        if item is None:
            break
        items.append(item)
    answer["chunks"] = items
    listed: list[dict] = []
    for pruned in tail if len(items) == len(chunks) else ():
        entry = dataclasses.asdict(pruned)
        if not budget.take(json.dumps(entry, ensure_ascii=False) + ", "):
            break
        listed.append(entry)
    if listed:
        answer["tail"] = listed
    placed_only = sum(1 for item in items if not item["text"])
    if placed_only or len(items) < len(chunks) or len(listed) < len(tail):
        answer["cut"] = _flat_cut(placed_only, len(chunks) - len(items), budget.limit, len(tail) - len(listed))
    return json.dumps(answer, ensure_ascii=False)


def _fitted(item: dict, budget: Budget) -> dict | None:
    """`item` as it fits what is left of `budget` (taken from it): whole, its text narrowed around its anchor line,
    or its place alone (an empty text, to read with `expand`); None when not even its place fits."""
    if budget.take(json.dumps(item, ensure_ascii=False) + ", "):
        return item
    shortened = _shorten(item, budget.left() - 200)
    if shortened is not None and budget.take(json.dumps(shortened, ensure_ascii=False) + ", "):
        return shortened
    placed = {**item, "text": "", "truncated": True, "text_start_line": item["anchor_line"]}
    return placed if budget.take(json.dumps(placed, ensure_ascii=False) + ", ") else None


def _flat_cut(placed_only: int, left_out: int, limit: int, unlisted: int = 0) -> str:
    cut = [f"{placed_only} chunk{'' if placed_only == 1 else 's'} listed without {'its' if placed_only == 1 else 'their'} "
           "text"] if placed_only else []
    cut += [f"{left_out} lower-ranked chunk{'' if left_out == 1 else 's'} left out"] if left_out else []
    cut += [f"{unlisted} lower-ranked candidate file{'' if unlisted == 1 else 's'} not listed"] if unlisted else []
    return (f"{' and '.join(cut)} to stay within {limit} bytes; read them with `expand` (path, start_line, end_line) "
            "or raise max_bytes")


def _echoed(query: str, room: int) -> str:
    """The query as echoed in a JSON answer: whole when its escaped form takes at most `room` bytes, else its
    start and an ellipsis (a pasted log must not spend the budget meant for the code)."""
    if len(json.dumps(query, ensure_ascii=False).encode("utf-8")) <= room:
        return query
    kept = query[:room]
    while kept and len(json.dumps(kept + "…", ensure_ascii=False).encode("utf-8")) > room:
        kept = kept[:max(len(kept) - max(len(kept) // 8, 1), 0)]
    return kept + "…"


# A note cut to fewer bytes than this says too little to be worth its ellipsis: it is counted instead.
_NOTE_MIN_BYTES = 60


def _echoed_notes(notes: Sequence[str], room: int, limit: int) -> list[str]:
    """The notes as echoed in a JSON answer, within `room` bytes together (notes on how far to trust it: a scope
    quoted whole, a note per repository still being indexed): the shorter ones whole, each longer one cut to its
    start and an ellipsis with an equal share of what is left, and those past what fits counted in a last note."""
    shown = len(notes)
    while True:
        count = len(notes) - shown
        left_out = [f"{count} more note{'' if count == 1 else 's'} not shown to stay within {limit} bytes"] if count \
            else []
        echoed = _shared(notes[:shown], room - _json_bytes(left_out))
        if echoed is not None:
            return [*echoed, *left_out]
        shown -= 1


def _shared(notes: Sequence[str], room: int) -> list[str] | None:
    """`notes` within `room` bytes of JSON, shortest first each whole or cut to an equal share of what is left;
    None when a share falls under `_NOTE_MIN_BYTES` (never for no notes)."""
    echoed: dict[int, str] = {}
    for n, i in enumerate(sorted(range(len(notes)), key=lambda i: len(notes[i]))):
        share = (room - sum(_json_bytes(note) + 2 for note in echoed.values())) // (len(notes) - n) - 2
        if share < _NOTE_MIN_BYTES and _json_bytes(notes[i]) > share:
            return None
        echoed[i] = _echoed(notes[i], share)
    return [echoed[i] for i in range(len(notes))]


def _json_bytes(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))


def located_text(found: Located, max_bytes: int = DEFAULT_BUDGET_BYTES, notes: Sequence[str] = ()) -> str:
    """Each line holding the text, with its place and the definition holding it (else its chunk's breadcrumb), as
    many as fit; `notes` first."""
    budget = Budget(max_bytes)
    kind = "identifier" if found.identifier else "text"
    notes = [*notes, *([_SECRETS_SKIPPED] if found.secrets_skipped else [])]
    noted = "".join(line + "\n" for line in _note_lines(notes, budget.limit))
    text = _clipped_repr(found.text, _ECHO_BYTES)
    if not found.total:
        return _within(f"{noted}no indexed line holds the {kind} {text}", budget.limit)
    holds = "line holds" if found.total == 1 else "lines hold"
    head = f"{noted}{found.total} {holds} the {kind} {text}"
    budget.take(head + "\n" + _cut_note(1, 0, budget.limit))
    lines = []
    for loc in found.locations:
        text = loc.text.strip()
        text = code_span(text) if len(text) <= _LINE_CHARS else code_span(text[:_LINE_CHARS]) + "…"
        # The definition holding the line, where one does: the chunk's breadcrumb names one of a chunk's several.
        held = f"in {code_span(loc.symbol)}" if loc.symbol else _crumb(loc.breadcrumb)
        line = f"{code_span(f'{loc.path}:{loc.line}:{loc.column}')}  {text}  [{held}]"
        if not budget.take(line + "\n"):
            break
        lines.append(line)
    out = [head + (f" (showing {len(lines)})" if len(lines) < found.total else ""), *lines]
    if len(lines) < found.total:
        out.append(f"[{found.total - len(lines)} more not shown: narrow the text, or pass a larger limit/max_bytes]")
    return _within("\n".join(out), budget.limit)


_SECRETS_SKIPPED = "files that look like secrets (keys, credentials, .env files) are not looked in"


def _clipped_repr(text: str, room: int) -> str:
    """`repr(text)`, its end cut (with an ellipsis after it) where the whole would take over `room` bytes."""
    shown = repr(text)
    while len(shown.encode("utf-8")) > room and text:
        text = text[:len(text) * 3 // 4]
        shown = repr(text) + "…"
    return shown


def expansion_text(found: Expansion, max_bytes: int = DEFAULT_BUDGET_BYTES, notes: Sequence[str] = ()) -> str:
    """The lines with their location, `notes` first; a span over budget is cut at a line boundary and says where
    to go on (a first line over the budget on its own is cut inside, and says so)."""
    budget = Budget(max_bytes)
    label = f" ({code_span(found.symbol)})" if found.symbol else ""
    noted = "".join(line + "\n" for line in _note_lines(notes, budget.limit))
    head = f"{noted}{code_span(f'{found.path}:{found.start_line}-{found.end_line}')}{label}"
    fence = code_fence(found.text)  # a part of the text holds no longer run of backticks than the whole
    whole = f"{head}\n{fence}\n{found.text.rstrip(chr(10))}\n{fence}"
    if len(whole.encode("utf-8")) <= budget.limit:
        return whole
    start, end, size = found.start_line, found.end_line, len(found.text.encode("utf-8"))
    if not budget.take(f"{head}\n{fence}\n\n{fence}\n" + max(_expand_cut_note(end - 1, end, budget.limit),
                                                   _long_line_note(start, size, size, end, budget.limit), key=len)):
        return _within(whole, budget.limit)  # the heading alone (a deep path, long notes) leaves no room to go on
    kept = _lines_within(found.text, budget.left())
    if kept:
        last = start + len(split_lines(kept)) - 1
        return f"{head}\n{fence}\n{kept.rstrip(chr(10))}\n{fence}\n{_expand_cut_note(last, end, budget.limit)}"
    # Not even the first line fits: without its start the agent was sent back to the same line for ever.
    first = split_lines(found.text, keepends=False)[0]
    part = _prefix_within(first, budget.left())
    note = _long_line_note(start, len(first.encode("utf-8")), len(part.encode("utf-8")), end, budget.limit)
    return f"{head}\n{fence}\n{part}\n{fence}\n{note}"


def file_text(found: Expansion, max_bytes: int = DEFAULT_BUDGET_BYTES) -> str:
    """The file resource's answer: the file whole when it fits `max_bytes` (a tool's default budget: a resource
    takes no argument to raise it); else its leading whole lines, then a last line saying where it was cut and
    how to read on with `expand` (a first line over the budget on its own is cut inside, and says so). A 149 KB
    file came back whole, as could one of up to the 64 MiB a read allows, into an agent's finite context."""
    limit = Budget(max_bytes).limit
    if len(found.text.encode("utf-8")) <= limit:
        return found.text
    end = found.end_line
    expand = f"the `expand` tool: path {code_span(found.path)},"
    kept = _lines_within(found.text, limit - _line_bytes(_expand_cut_note(end - 1, end, limit, f"read on with {expand}")))
    if kept:  # each of its lines keeps its end: the note is a line of its own after them
        return kept + _expand_cut_note(len(split_lines(kept)), end, limit, f"read on with {expand}")
    first = split_lines(found.text, keepends=False)[0]
    size = len(first.encode("utf-8"))
    whole = f"read it with {expand} start_line=1, end_line=1 and max_bytes up to {MAX_BUDGET_BYTES}"
    part = _prefix_within(first, limit - _line_bytes(_long_line_note(1, size, size, end, limit, whole)))
    return f"{part}\n{_long_line_note(1, size, len(part.encode('utf-8')), end, limit, whole)}"


def _expand_cut_note(last: int, end: int, limit: int, call: str = "call expand again with") -> str:
    return f"[cut at line {last} to stay within {limit} bytes: {call} start_line={last + 1}, end_line={end}]"


def _long_line_note(line: int, size: int, shown: int, end: int, limit: int,
                    whole: str = "raise max_bytes to read it whole") -> str:
    after = f"; the lines after it: start_line={line + 1}, end_line={end}" if end > line else ""
    return (f"[line {line} alone is {size} bytes: its first {shown} bytes shown to stay within {limit} bytes; "
            f"{whole}{after}]")


def _prefix_within(text: str, room: int) -> str:
    """The longest start of `text` within `room` UTF-8 bytes (cut between characters)."""
    return text.encode("utf-8")[:max(room, 0)].decode("utf-8", errors="ignore")


def plain_text(text: str, max_bytes: int = DEFAULT_BUDGET_BYTES, what: str = "answer",
               notes: Sequence[str] = (), next_call: str = "raise max_bytes") -> str:
    """Any text answer (graph, ask) cut at a line boundary within the budget, saying so and what to call next;
    `notes` first."""
    budget = Budget(max_bytes)
    text = "".join(line + "\n" for line in _note_lines(notes, budget.limit)) + text
    if len(text.encode("utf-8")) <= budget.limit:
        return text
    kept = _lines_within(text, budget.limit - 200)  # and room for the line saying it was cut
    return kept.rstrip("\n") + f"\n[{what} cut to stay within {budget.limit} bytes: {next_call}]"


def sectioned_text(title: str, sections: Sequence[tuple[str, Sequence[str]]], max_bytes: int = DEFAULT_BUDGET_BYTES,
                   notes: Sequence[str] = (), next_call: str = "raise max_bytes") -> str:
    """A text of sections under a title (a folder's part of the graph) within the budget. The notes, the title
    and every heading are always said; the sections' lines are taken in turns, one of each, so a long first
    section does not crowd out the ones after it; a section cut ends with a line counting what it left out."""
    budget = Budget(max_bytes)
    whole = "\n".join([*_note_lines(notes, budget.limit), title, *(line for heading, lines in sections
                                                     for line in ("", heading, *lines))])
    if budget.take(whole):
        return whole
    cut_line = f"  [{{}} more not listed to stay within {budget.limit} bytes: {next_call}]"
    widest_cut = cut_line.format(max((len(lines) for _, lines in sections), default=0))
    budget.take("".join(line + "\n" for line in [*_note_lines(notes, budget.limit), title]))
    budget.take("".join(f"\n{heading}\n{widest_cut}\n" for heading, _ in sections))
    kept: list[list[str]] = [[] for _ in sections]
    open_sections = [i for i, (_, lines) in enumerate(sections) if lines]
    while open_sections:
        for i in list(open_sections):
            lines = sections[i][1]
            if not budget.take(lines[len(kept[i])] + "\n"):
                open_sections.remove(i)
                continue
            kept[i].append(lines[len(kept[i])])
            if len(kept[i]) == len(lines):
                open_sections.remove(i)
    out = [*_note_lines(notes, budget.limit), title]
    for (heading, lines), shown in zip(sections, kept, strict=True):
        out += ["", heading, *shown]
        if len(shown) < len(lines):
            out.append(cut_line.format(len(lines) - len(shown)))
    return _within("\n".join(out), budget.limit)


# ----------------------------------------------------------------------------------------------- pieces


def _note_lines(notes: Sequence[str], limit: int) -> list[str]:
    """How far to trust an answer (a lane not ready, an index still being built), one line each, within a quarter
    of the answer's `limit` bytes as flat search echoes them (a quoted scope, a note per repository still being
    indexed): a note longer than its share is cut to its start, so the answer keeps room for what it answers."""
    said = [note for note in notes if note]
    return [f"note: {one_line(note)}" for note in (_echoed_notes(said, limit // 4, limit) if said else [])]


def _summary(bundle: Bundle) -> str:
    lanes = ", ".join(lane.label() for lane in bundle.lanes)
    mode = " · issue mode" if bundle.issue_mode else ""
    files = len(bundle.core) + len(bundle.related)
    pinned = f" · @ {short_revision(bundle.revision)}" if bundle.revision else ""  # each file's, where another
    return f"{files} candidate file{'' if files == 1 else 's'}{pinned} · lanes: {lanes}{mode}"


def _map_line(hit: FileHit) -> str:
    symbols = f"  {code_span(', '.join(hit.symbols[:4]))}" if hit.symbols else ""
    via = " (via graph)" if hit.via == "graph" else ""
    where = code_span(f"{hit.shown_path}:{hit.best_start_line}-{hit.best_end_line}")
    return f"{hit.rank}. {where}{symbols}  {one_line(hit.why)}{via}"


def _pinned(hit: FileHit, bundle: Bundle) -> str:
    """The revision a file was read at, where it is not the bundle's: a search across repositories names none, and
    a queued index run not yet ended has written its files at its commit."""
    return f" @ {short_revision(hit.revision)}" if hit.revision != bundle.revision else ""


def _code_block(hit: FileHit, chunk: ChunkHit) -> str:
    fence = code_fence(chunk.text)
    return (f"{code_span(f'{hit.shown_path}:{chunk.start_line}-{chunk.end_line}')}  {_crumb(chunk.breadcrumb)}\n"
            f"{fence}{hit.language}\n{chunk.text.rstrip(chr(10))}\n{fence}")


def _crumb(breadcrumb: str) -> str:
    """A breadcrumb (its file's path first) as a code span; "" for none (no empty span)."""
    return code_span(breadcrumb) if breadcrumb else ""


def _cut_note(cut: int, cut_bytes: int, limit: int, partly: int = 0, across: bool = False) -> str:
    part = f"{_chunks(partly)} shown only around {'its' if partly == 1 else 'their'} best line" if partly else ""
    whole = f"the code of {_chunks(cut)} ({cut_bytes} bytes) left out" if cut else ""
    return (f"[cut: {', '.join(filter(None, (whole, part)))} to stay within {limit} bytes; "
            f"read them with `expand` ({'repo, ' if across else ''}path, start_line, end_line) or raise max_bytes]")


def _chunks(count: int) -> str:
    return f"{count} chunk{'' if count == 1 else 's'}"


# A chunk too large for what is left of the budget is shown around its best line (the bundle's snippet, at most
# SNIPPET_RADIUS lines either side) rather than not at all: the best-ranked chunk is often the largest, and
# cutting it whole showed the smaller, weaker chunks after it instead. Fewer lines than this say too little.
_EXCERPT_MIN_LINES = 3


def _anchor_excerpt(hit: FileHit, chunk: ChunkHit, room: int) -> str:
    """The widest window of the chunk's snippet around its best line that fits `room` bytes with its heading
    (verbatim lines of the chunk, as read from disk); "" when fewer than `_EXCERPT_MIN_LINES` fit."""
    snippet = chunk.snippet
    if snippet is None or not snippet.text:
        return ""
    lines = split_lines(snippet.text, keepends=False)
    return _widest_window(
        lines, snippet.anchor_line - snippet.start_line, room, _EXCERPT_MIN_LINES,
        lambda lo, hi: _excerpt_block(hit, chunk, snippet.start_line + lo, lines[lo:hi], snippet.anchor_line))


def _widest_window(lines: Sequence[str], anchor: int, room: int, min_lines: int,
                   render: Callable[[int, int], str]) -> str:
    """`render(lo, hi)` of the widest window `lines[lo:hi]` holding line `anchor` whose rendering fits `room`
    UTF-8 bytes, widened a line at a time, two below the anchor for each above (a definition's body follows its
    head); "" when no window of `min_lines` lines (or all of them, if fewer) fits."""
    if not lines:
        return ""
    anchor = min(max(anchor, 0), len(lines) - 1)
    lo, hi = anchor, anchor + 1
    best = ""
    while True:
        text = render(lo, hi)
        if len(text.encode("utf-8")) > room:
            return best
        if hi - lo >= min(min_lines, len(lines)):
            best = text
        if lo == 0 and hi == len(lines):
            return best
        if hi < len(lines) and (hi - anchor <= 2 * (anchor - lo) + 1 or lo == 0):
            hi += 1
        else:
            lo -= 1


def _excerpt_block(hit: FileHit, chunk: ChunkHit, first: int, lines: list[str], anchor: int) -> str:
    last = first + len(lines) - 1
    code = "\n".join(lines)
    fence = code_fence(code)
    where = code_span(f"{hit.shown_path}:{first}-{last}")
    return (f"{where}  {_crumb(chunk.breadcrumb)}  (lines {first}-{last} of {chunk.start_line}-{chunk.end_line}, "
            f"around line {anchor}; the rest cut: budget)\n"
            f"{fence}{hit.language}\n{code}\n{fence}")


def _shorten(item: dict, room: int) -> dict | None:
    """`item` with its text narrowed to the widest window around its anchor line that fits `room` bytes as JSON
    (its leading lines were kept, which could leave the anchor out)."""
    lines = split_lines(item["text"])
    first = item["text_start_line"]

    def narrowed(lo: int, hi: int) -> str:
        return json.dumps({**item, "text": "".join(lines[lo:hi]), "truncated": True,
                           "text_start_line": first + lo}, ensure_ascii=False)

    kept = _widest_window(lines, item["anchor_line"] - first, room, 1, narrowed)
    return json.loads(kept) if kept else None


def _lines_within(text: str, room: int) -> str:
    """The longest run of whole leading lines of `text` within `room` UTF-8 bytes."""
    if len(text.encode("utf-8")) <= room:
        return text
    out: list[str] = []
    used = 0
    for line in split_lines(text):
        size = len(line.encode("utf-8"))
        if used + size > room:
            break
        out.append(line)
        used += size
    return "".join(out)

