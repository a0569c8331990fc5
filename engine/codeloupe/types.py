"""The engine's typed, editor-neutral vocabulary.

Every public engine function returns these plain dataclasses. The CLI, the language server and the tests
all stand on this boundary; nothing above it sees SQL rows, numpy arrays or tree-sitter nodes.

Line numbers are 1-based and inclusive everywhere in the engine; the server converts to LSP's 0-based
ranges in exactly one place. A line ends at "\\n", "\\r\\n" or a lone "\\r" and nowhere else (`split_lines`): the
rule of the Language Server Protocol and of the editors, so that line N is the line an editor shows as N.
"""

from __future__ import annotations

import io
import logging
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate

# --------------------------------------------------------------------------------------------- lines

# What `str.splitlines` also ends a line at and editors do not (form feed, U+2028, ...): without them (and
# without a lone CR, which both honour) splitlines already follows the rule, and is the fastest to run.
_SPLITLINES_ONLY = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


# What a chunk with nothing to embed holds only (an empty file has no chunk; one of blank lines has one): the
# embedder gives it, and a file with no other chunk its skeleton, the zero vector without running the model.
# ASCII only, so that SQL (`trim`, `btrim`) and Python agree on it.
BLANK_CHARS = " \t\n\v\f\r"


def split_lines(text: str, *, keepends: bool = True) -> list[str]:
    """The lines of `text` as editors and the LSP count them: each ends at "\\n", "\\r\\n" or a lone "\\r" (kept
    with it unless `keepends` is false), and a last line without a break is a line. A form feed, a vertical tab,
    U+0085, U+2028 or U+2029 is a character of its line, where `str.splitlines` ends the line there and every
    line number after it would point at another line in the user's editor."""
    if not any(c in text for c in _SPLITLINES_ONLY):
        return text.splitlines(keepends)
    lines = io.StringIO(text, newline="").readlines()  # universal newlines, the breaks kept as they are
    return lines if keepends else [line.rstrip("\r\n") for line in lines]  # a line holds one break, at its end


def has_lone_cr(text: str) -> bool:
    """Whether `text` ends a line where tree-sitter's rows do not: at a CR not before a LF (two scans of the
    text in C, where one regular expression over it took a tenth of chunking a file)."""
    return text.count("\r") != text.count("\r\n")


def lone_cr_line_starts(text: str, lines: list[str] | None = None) -> list[int] | None:
    """The UTF-8 byte offset each line of `text` starts at (its `split_lines`, or `lines` where the caller has
    them), to map a tree-sitter node's start byte to its line with `bisect_right`; None when `text` has no lone
    CR, where tree-sitter's rows, which count "\\n" only, already are the lines."""
    if not has_lone_cr(text):
        return None
    lengths = (len(line.encode("utf-8", "surrogatepass")) for line in (split_lines(text) if lines is None else lines))
    return [0, *accumulate(lengths)][:-1]


def count_line_breaks(text: str, start: int = 0, end: int | None = None) -> int:
    """The line breaks in `text[start:end]` (see `split_lines`): a CRLF is one, so a range must not end
    between its CR and LF."""
    end = len(text) if end is None else end
    return text.count("\n", start, end) + text.count("\r", start, end) - text.count("\r\n", start, end)


def is_blank(text: str) -> bool:
    """Whether `text` holds nothing to search for: whitespace, control and format characters only (a NUL, a
    zero-width space). Every surface refuses such a query (`api.check_query`); a search for it answered with
    arbitrary files."""
    return all(c.isspace() or unicodedata.category(c) in ("Cc", "Cf") for c in text)


# --------------------------------------------------------------------------------------------- shown text

# What no surface shows raw of a repository's text (its code, file names, settings): control characters other
# than tab and newline (an escape sequence can retitle a terminal, recolour or hide what follows, or move the
# cursor over lines), and the bidirectional formatting ones, which reorder what is shown (a line of code that reads
# otherwise than it runs, a file name whose end shows first). The CLI, the language server's hovers and notices,
# the web pages (graph/assets/visible.js; tests/serve/test_page.py holds them to it) and the VS Code extension
# (clients/vscode/src/visible.ts; its visible.test.js does) escape this set, as `visible` does; the Neovim plugin
# matches an answer's escaped code with it (clients/neovim/lua/codeloupe/lines.lua; tests/test_neovim_client.py).
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` with its control characters shown as escapes (`\\x1b`); a line's CRLF ending is a line end."""
    return CONTROL_CHARACTERS.sub(_escape, text.replace("\r\n", "\n"))


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: str) -> str:
    """`visible(text)` on one line: a newline in a file name is shown as `\\n`, so a name cannot start a line
    of output of its own (a forged entry of a list)."""
    return visible(text).replace("\n", "\\n")


def package_version() -> str:
    """This installation's version, from its package metadata ("0.0.0+unknown" for a source tree never installed):
    one answer for `codeloupe --version`, `codeloupe-lsp --version`, MCP's server info and the HTTP API's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("codeloupe")
    except PackageNotFoundError:
        return "0.0.0+unknown"


ECHO_CHARS = 200  # of what a client sent, the most a refusal names: its start (`elided`)


def elided(text: str, chars: int = ECHO_CHARS) -> str:
    """The start of `text`, a client's, on one line (`one_line`), an ellipsis after it where it goes on: what a
    client sent is never named whole in a refusal, which every surface sends back (a path may be 4,096 characters,
    a URI 100 KB; a refused path came back whole, into an agent's context)."""
    return one_line(text[:chars]) + ("…" if len(text) > chars else "")


def visible_lines(text: str) -> list[str]:
    """Code as a person is shown it: its lines as editors count them (`split_lines`), each `visible`, so line N
    shown is line N of the file (a lone CR ends a line; a form feed is `\\x0c` inside its own)."""
    return [visible(line) for line in split_lines(text, keepends=False)]


def code_fence(text: str, shortest: int = 3) -> str:
    """The backticks that open and close markdown code holding `text` (a block's fence, at least 3; a code span's
    with `shortest=1`): one more than its longest run of them, so nothing in the text closes it early. A file
    holding a ``` line ended a three-backtick block there, and the rest of the file read as the markdown around
    it (headings, links, the tool's own notes)."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    return "`" * max(shortest, longest + 1)


def code_span(text: str) -> str:
    """`text` (a name, a location) as a markdown code span, whatever backticks it holds, on one line and its control
    and bidi characters escaped (`one_line`), as the CLI shows a name: markdown in a file's name (a link, an image
    whose address a renderer would fetch) is shown as written, and a line break in it cannot end the span where
    its next line would start a block (a blank line, `# `, `- `, a fence)."""
    shown = one_line(text)
    ticks = code_fence(shown, shortest=1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{ticks}{pad}{shown}{pad}{ticks}"


# What ends a line for a reader of the text (str.splitlines' set): inside a name it would start a line of its
# own. The graph's text shows each as Python writes it (`\r`, `\u2028`; `graph.render`).
LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def line_breaks_escaped(text: str) -> str:
    """`text` with each of its `LINE_BREAKS` written as Python writes it (a newline as `\\n`, a CR as `\\r`)."""
    return LINE_BREAKS.sub(lambda found: ascii(found.group())[1:-1], text)


def shown_name_of(shown: str, names: Iterable[str]) -> str | None:
    """The one of `names` that an answer shows as `shown` (`one_line`, as MCP's text answers, the CLI and an ask's
    excerpt headers show a name, or the graph's text, whose line breaks are `line_breaks_escaped` first), for a
    name copied from where it was shown back to the file or folder it names; None where none is, or several are.
    Look `shown` up as it is first: a name shown otherwise holds a character they escape, and its shown form a
    backslash."""
    found = [name for name in names if shown in (one_line(name), one_line(line_breaks_escaped(name)))]
    return found[0] if len(found) == 1 else None


class VisibleFormatter(logging.Formatter):
    """A log line as `visible` shows it: the engine's and the servers' warnings name the workspace's files, and
    stderr is a terminal, an editor's output panel or a log file read with `tail`."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))


# A shared index's revision: the commit indexed, `<sha>-dirty` for a folder with uncommitted changes
# (shared_index.workspace_commit).
DIRTY_SUFFIX = "-dirty"


def short_revision(revision: str) -> str:
    """A revision as a line shows it: the commit's first 12 characters, and `-dirty` kept (cut to 12, a dirty
    folder's revision read as the commit it is not); `(no commit)` for none (a file of a repository pinned to a
    commit, read where git named none: a bare `@` said nothing)."""
    if not revision:
        return "(no commit)"
    dirty = revision.endswith(DIRTY_SUFFIX)
    commit = revision[:-len(DIRTY_SUFFIX)] if dirty else revision
    return commit[:12] + (DIRTY_SUFFIX if dirty else "")


@dataclass(frozen=True)
class Revisions:
    """The revision each file of an index was read at (`Workspace.revisions`): `pinned`, the one the index is
    pinned to ("" for a folder on disk), but for the files of `other` at theirs. In the shared index, a queued
    index run pins its commit once its batches are all written: the files its earlier batches wrote meanwhile are
    at the new commit, the rest still at the pinned one."""

    pinned: str
    other: Mapping[str, str] = field(default_factory=dict)

    def of(self, path: str) -> str:
        return self.other.get(path, self.pinned)

    @classmethod
    def of_files(cls, pinned: str, files: Iterable[tuple[str, str]]) -> Revisions:
        """`pinned`, but for each (path, revision) of `files` at its revision ("": at no commit, as a file the
        shared index holds at none while its repository is pinned to one: read where git named no commit)."""
        return cls(pinned, {path: revision for path, revision in files if revision != pinned})


# --------------------------------------------------------------------------------------------- index


@dataclass(frozen=True)
class Symbol:
    """A named definition found by the chunker (function, class, method, constant, ...)."""

    name: str
    kind: str
    start_line: int
    end_line: int
    parent: str = ""  # qualified name of the enclosing definition, "" at top level
    signature: str = ""  # one line, as written in the source

    @property
    def qualified_name(self) -> str:
        return f"{self.parent}.{self.name}" if self.parent else self.name


@dataclass(frozen=True)
class Chunk:
    """One block of a file's line partition (see `validate_partition`)."""

    start_line: int
    end_line: int
    kind: str  # module | function | class | method | header | part | section | window | block
    name: str
    breadcrumb: str  # "path > class Sig > def method(sig)"
    text: str  # the exact lines start_line..end_line, newlines included
    symbols: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileSkeleton:
    """Signatures, doc comments and module constants of one file, as one text (the file-level signal)."""

    path: str
    text: str


@dataclass
class ChunkedFile:
    """What the chunker returns for one file."""

    path: str
    language: str
    chunks: list[Chunk]
    symbols: list[Symbol]
    skeleton: FileSkeleton
    fallback_reason: str = ""  # why the file was not chunked as planned (line windows, or a strategy that failed)
    # A chunk strategy's load warning met on this file (its module did not load): the index reports it once.
    strategy_warning: str = ""
    # The strategy claiming the file did not run on it (`StrategyNotRun`), or its grammar did not (it failed on other
    # files of the file's language in the run; the name is older): its chunks are a fallback, for now.
    strategy_not_run: bool = False


@dataclass
class IndexReport:
    root: str
    index_path: str
    files_seen: int = 0
    files_indexed: int = 0  # (re)chunked in this run
    files_unchanged: int = 0
    files_deleted: int = 0
    chunks: int = 0
    symbols: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    decoded_fallback: int = 0  # files decoded with a non-UTF-8 fallback
    partition_violations: int = 0
    # Chunk strategies found failing to load while chunking (their module's top level failed), once each.
    strategy_warnings: list[str] = field(default_factory=list)
    languages: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0


@dataclass
class Progress:
    """One progress event from the indexer or the background embedder."""

    phase: str  # scan | chunk | embed | graph | done
    done: int
    total: int
    message: str = ""


@dataclass
class IndexStatus:
    root: str
    index_path: str
    files: int
    chunks: int
    symbols: int
    languages: dict[str, int]
    vectors_done: int
    vectors_total: int
    skeleton_vectors_done: int
    provider: str
    model: str
    schema_version: int
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> files the index skipped for their content
    # The shared index's repository has an index run under way, or one cut off: what answers may lack, and what to
    # do ("" when every run finished, and on a workspace's own index).
    indexing: str = ""
    # An index ran to the end of its walk: `files` 0 then says there was nothing to index, not that nothing
    # was indexed yet.
    indexed: bool = False


@dataclass(frozen=True)
class SkippedPath:
    """A file the index skipped for its content (generated, minified, too large, binary, undecodable), and why:
    remembered until the file or the rules that judged it change; or a folder it could not read (`dir/`),
    remembered until it can be."""

    path: str
    reason: str


@dataclass(frozen=True)
class ChunkingProblem:
    """A file indexed, but not chunked as planned for a reason the user can act on: a trusted chunk strategy that
    failed on it (the file was chunked as without the strategy), the chunker's own failure, or a grammar that crashed
    the worker process parsing it or never finished there (line windows both). The expected fallbacks (no grammar for the file's language, a giant line) are not problems."""

    path: str
    reason: str


# -------------------------------------------------------------------------------------------- search
# The hits are made by the hundred for every query (a complete bundle's RELATED map): slotted, each is made in
# about half the time (and holds no per-instance dict).


@dataclass(slots=True)
class Snippet:
    """A window of a chunk around its best-matching line (the rendering of noise, not a filter)."""

    start_line: int
    end_line: int
    anchor_line: int
    text: str
    truncated: bool
    anchor_symbol: str = ""  # qualified name of the innermost definition holding anchor_line ("" outside any)


@dataclass(slots=True)
class ChunkHit:
    chunk_id: int
    path: str
    start_line: int
    end_line: int
    kind: str
    name: str
    breadcrumb: str
    symbols: list[str]
    score: float
    lanes: dict[str, int]  # lane name -> 1-based rank in that lane
    text: str  # the chunk verbatim (full for CORE files)
    snippet: Snippet | None = None


@dataclass(slots=True)
class FileHit:
    path: str  # POSIX, relative to the root
    language: str
    rank: int  # 1-based
    score: float
    best_start_line: int
    best_end_line: int
    symbols: list[str]
    why: str  # one line: which lanes matched, what pinned it
    via: str = "search"  # search | graph
    chunks: list[ChunkHit] = field(default_factory=list)  # CORE: matching chunks in full; RELATED: best only
    # A candidate past every lane's short list and the limit: kept for completeness (rule 2) as a map line with
    # no chunks; a surface with a size budget lists it after everything else.
    tail: bool = False
    # A search across repositories: the repository the path is in. The revision its text was read at (its
    # repository's, or a queued index run's where the run wrote it and has not ended: `Revisions`); "" for a
    # folder on disk.
    repository: str = ""
    revision: str = ""
    # An answer to an agent (`Workspace.withholds_secrets`) and a file that looks like a secret: listed in its
    # place with no chunks or symbols (its content withheld), as `why` says.
    withheld: bool = False

    @property
    def shown_path(self) -> str:
        """The path as a surface prints it: `repository:path` in a search across repositories."""
        return f"{self.repository}:{self.path}" if self.repository else self.path


@dataclass
class LaneStatus:
    name: str  # dense | skeleton | lexical | symbol | entity | graph
    ready: bool
    coverage: float  # 0..1: share of the corpus this lane could see
    note: str = ""
    off: bool = False  # not ready by the user's choice (no embedding provider), not pending

    def label(self) -> str:
        """The lane as an answer's lanes line names it: `dense (off)` when turned off (`not ready` read as vectors
        on their way), `dense (not ready)`, `dense 40%` when it sees part of the corpus."""
        if not self.ready:
            return f"{self.name} ({'off' if self.off else 'not ready'})"
        return f"{self.name} {self.coverage:.0%}" if self.coverage < 1 else self.name


@dataclass
class Bundle:
    query: str
    root: str
    mode: str  # code | docs | both
    issue_mode: bool
    core: list[FileHit]
    related: list[FileHit]
    lanes: list[LaneStatus]
    timing_ms: dict[str, float]
    scope: str = ""
    # A pinned index: the revision it is pinned to ("" for a folder on disk); each file names its own (`FileHit`).
    revision: str = ""
    notes: list[str] = field(default_factory=list)  # how far to trust this answer (bundle.trust_notes)

    @property
    def files(self) -> list[FileHit]:
        """Every candidate in rank order, CORE first."""
        return [*self.core, *self.related]

    def revisions(self) -> Revisions:
        """The revision each of its files was read at (one repository's bundle: paths name one file each)."""
        return Revisions.of_files(self.revision, ((hit.path, hit.revision) for hit in self.files))

    def pruned(self) -> list[PrunedChunk]:
        """Every chunk in rank order with only its signal (`query --prune`: flat chunks for scripts)."""
        return [PrunedChunk.of(hit, chunk) for hit in self.files for chunk in hit.chunks]

    def pruned_files(self) -> list[PrunedFile]:
        """The candidates with no chunk to list (the long tail past every lane's short list), in rank order, each
        with its best lines: a flat answer lists them after the chunks, so no candidate goes unnamed (rule 2). A
        file whose content is withheld is not among them (its answer names it apart)."""
        return [PrunedFile(hit.rank, hit.path, hit.best_start_line, hit.best_end_line, hit.repository, hit.revision)
                for hit in self.files if not hit.chunks and not hit.withheld]


@dataclass
class PrunedChunk:
    """One chunk of a bundle with only its signal, for scripts (`query --prune`, MCP `search flat`): a RELATED
    chunk is its window around the best-matching line."""

    rank: int  # its file's rank
    path: str
    start_line: int
    end_line: int
    anchor_line: int  # the best-matching line
    breadcrumb: str
    text: str
    truncated: bool  # `text` is a window of the chunk, starting at `text_start_line`
    text_start_line: int
    repository: str = ""  # a search across repositories: the file's repository
    revision: str = ""  # the revision the file was read at (`FileHit.revision`)

    @classmethod
    def of(cls, hit: FileHit, chunk: ChunkHit) -> PrunedChunk:
        snippet = chunk.snippet
        return cls(hit.rank, hit.path, chunk.start_line, chunk.end_line,
                   snippet.anchor_line if snippet else chunk.start_line, chunk.breadcrumb,
                   snippet.text if snippet else chunk.text, bool(snippet and snippet.truncated),
                   snippet.start_line if snippet else chunk.start_line, hit.repository, hit.revision)


@dataclass
class PrunedFile:
    """A candidate file with no chunk to list (`Bundle.pruned_files`), for scripts: where it matched best."""

    rank: int
    path: str
    start_line: int  # its best lines
    end_line: int
    repository: str = ""  # a search across repositories: the file's repository
    revision: str = ""  # the revision the file was read at (`FileHit.revision`)


@dataclass
class UsedDefinition:
    """A definition of one file that other files use (lenses: "used in N files"; hovers list the users)."""

    qualified_name: str
    start_line: int
    users: list[tuple[str, int]]  # (path, 1-based line of the use)
    signature: str = ""  # one line, as written
    doc: str = ""  # the first line of its docstring or of the comment right above it


@dataclass
class EntryPoint:
    """Where a program of the workspace starts (`Workspace.entry_points`)."""

    path: str
    line: int  # 1-based
    kind: str  # manifest | main guard | main function | shebang
    detail: str  # what says so: the manifest entry, the guard, the signature, the shebang line


@dataclass
class TourStop:
    """A name defined in the workspace and how many other files mention it (a count of files whose text holds
    the identifier: mentions, not resolved uses)."""

    name: str
    kind: str
    path: str  # where it is defined (the first definition, when there are several)
    line: int
    mentions: int
    definitions: int  # how many top-level definitions share the name


@dataclass
class Tour:
    """The first page of "where do I start reading" (`Workspace.tour`)."""

    root: str
    entry_points: list[EntryPoint]
    stops: list[TourStop]  # most mentioned first
    names: int  # distinct top-level names defined in the workspace
    entry_points_not_shown: int = 0  # entry points past the tour's limit (the weakest signals: see entrypoints.py)


# ------------------------------------------------------------------------------------- locate, expand


@dataclass
class Location:
    """One exact occurrence found by `Workspace.locate`: the line it is on and the chunk around it."""

    path: str
    line: int  # 1-based
    column: int  # 1-based, in characters
    text: str  # the whole line, without its newline
    chunk_start_line: int
    chunk_end_line: int
    breadcrumb: str  # the chunk's, which names one definition of a chunk holding several
    symbol: str = ""  # the innermost definition holding the line, as `Parent.name` ("" outside every definition)


@dataclass
class Expansion:
    """Lines of an indexed file read verbatim from disk (`Workspace.expand`)."""

    path: str
    start_line: int  # 1-based, inclusive; clipped to the file
    end_line: int
    text: str
    symbol: str = ""  # the qualified name when a symbol or an anchor line chose the span


@dataclass
class Related:
    """The chunks nearest to an anchor span, in its language (`Workspace.find_related`)."""

    path: str
    start_line: int
    end_line: int
    language: str
    lane: str  # dense | lexical: what "nearest" was measured by
    chunks: list[ChunkHit]  # nearest first; `lanes` holds the rank in `lane`


@dataclass
class Located:
    """What `Workspace.locate` found: the first `limit` locations and how many there are in all."""

    text: str
    identifier: bool
    locations: list[Location]
    total: int
    # An answer to an agent (`Workspace.withholds_secrets`): files that look like secrets were not looked in. Said
    # of every such answer whatever those files hold: a count of their lines holding the text would tell it.
    secrets_skipped: bool = False


# --------------------------------------------------------------------------------------------- flows


@dataclass
class Flow:
    """One cached walkthrough (`Workspace.flows`): an answered question and the files its answer cites."""

    id: int
    question: str
    mode: str  # code | docs | both
    files: list[str]  # cited paths
    created: float  # Unix time of the answer
    served: int  # how many later questions it answered
    stale: bool  # a cited file changed or vanished since: never served or attached; `flows --refresh` re-asks


@dataclass
class FlowUse:
    """What an `ask` took from the flow cache (carried by its `done` event)."""

    action: str  # served: the cached walkthrough verbatim | attached: its prose as non-citable context
    flow_id: int
    question: str  # the cached question
    similarity: float  # cosine of the two questions' vectors
    coverage: float  # share of this question's content words the cached question holds


@dataclass
class FlowOutcome:
    """One question re-asked by `flows --refresh` or pre-asked by `flows --warm`."""

    question: str
    outcome: str  # answered | replaced (answered, its flow taking the place of `replaced`) | served | failed
    detail: str = ""  # why it failed
    replaced: list[str] = field(default_factory=list)  # the questions of the earlier flows its answer replaced
