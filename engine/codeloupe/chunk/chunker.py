"""`chunk_file`: one file's text -> its line partition, symbols and skeleton. Never raises."""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import replace
from pathlib import PurePosixPath

from codeloupe.chunk import skeleton as sk
from codeloupe.chunk.languages import get_parser, is_doc_language, parse
from codeloupe.chunk.legacy_php import is_legacy_php, legacy_php_plan
from codeloupe.chunk.lines import Lines, PartitionError, line_windows, validate_partition
from codeloupe.chunk.sections import CutPlan, asciidoc_plan, markdown_plan, rst_plan, section_pieces
from codeloupe.chunk.specs import spec_for
from codeloupe.chunk.strategies import (
    Strategy,
    StrategyError,
    StrategyModuleError,
    StrategyNotRun,
    apply_strategy,
    strategy_for,
)
from codeloupe.chunk.syntax import Definition, DefinitionFinder, Piece, SyntaxChunker
from codeloupe.parallel import NOT_RUN, map_in_workers
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton, Symbol

log = logging.getLogger("codeloupe.chunk")

# Bump whenever the chunks, symbols or skeleton for the same input change: the store re-chunks older files.
# 2: lines end at \n, \r\n or a lone \r only, as in editors (a form feed or U+2028 ended one, and every line
# number after it pointed at another line in the user's editor).
CHUNKER_VERSION = 2
# What a file's row records as its chunker version while its chunks are a fallback because the strategy claiming
# it did not run on it (`StrategyNotRun`: no worker process could start, ...): no chunker's version, so the file
# is never current and the next index run chunks it again, its strategy first. A version bump would chunk every
# file of every index again; this chunks those files only. Recorded too for the files a changed set of strategies
# claims (`index.strategies_in_force`): no strategy in force ran on them yet; for the files chunked without their
# grammar because it crashed or never finished on them, once the grammars are upgraded (`index.grammars_in_force`);
# and for those whose grammar was not run because it failed on other files of their language in the run.
STRATEGY_NOT_RUN_VERSION = 0
# The fallback reasons of a file whose grammar crashed or never finished on it, or was not run on it for doing so on
# other files (`index.prepare_crashed`, `parallel.map_in_workers`).
GRAMMAR_FAILED = ("grammar crashed:", "grammar did not finish:", f"grammar {NOT_RUN}")

# A line this long is a minified bundle or a data blob: parsing it buys nothing, windows it is.
GIANT_LINE_CHARS = 20_000

_DOC_PLANS = {"markdown": markdown_plan, "rst": rst_plan, "asciidoc": asciidoc_plan, "text": rst_plan}


def chunk_file_apart(path: str, text: str, language: str, budget: int = 4000,
                     strategies: Sequence[Strategy] = ()) -> ChunkedFile:
    """`chunk_file` in a kept worker process (`parallel.map_in_workers`' `crashed`), never in this one, which its
    grammar's crash on the file would end, or its loop hang for good: the file is then chunked as with no grammar
    and `fallback_reason` says why ("grammar crashed: ...", "grammar did not finish: ...")."""
    [chunked] = map_in_workers(chunk_file, [(path, text, language, budget, tuple(strategies))], 1, what="chunking",
                               crashed=_chunked_without_grammar)
    return chunked


def _chunked_without_grammar(cause: str, path: str, text: str, language: str, budget: int,
                             strategies: Sequence[Strategy]) -> ChunkedFile:
    return chunk_file(path, text, language, budget, strategies, grammar_crashed=f"grammar {cause}")


def chunk_file(path: str, text: str, language: str, budget: int = 4000,
               strategies: Sequence[Strategy] = (), *, grammar_crashed: str = "") -> ChunkedFile:
    """Partition `text` into chunks of at most `budget` non-whitespace characters (see `validate_partition`).

    A strategy claiming the file (registered through the API, or one of the workspace's trusted
    `strategies`) chunks it instead of the built-ins; where it fails on the file, the file is chunked as it
    would be without it (its grammar, its sections, else line windows) and `fallback_reason` says why. Never
    raises but MemoryError (a file its grammar took its worker past its memory cap on: the worker gives it
    `crashed`'s line windows, `parallel.PARSE_MEMORY_BYTES`): a missing grammar, a parse failure or a giant line
    falls back to line windows and says why in `fallback_reason`. Every line lands in exactly one chunk.

    `grammar_crashed`: why the file's grammar must not parse it (it killed the worker process that parsed it, or
    ran past its time there: `index.prepare_crashed`); the file is chunked as with no grammar, this its
    `fallback_reason`.
    """
    budget = max(1, int(budget))
    lines = Lines(text)
    if lines.count == 0:
        return ChunkedFile(path, language, [], [], FileSkeleton(path, path))
    failed = ""  # why the strategy claiming the file did not chunk it
    not_run = False  # it did not run on the file at all
    warning = ""
    reason = ""
    definitions: list[Definition] = []
    skeleton = FileSkeleton(path, path)
    try:
        pieces: list[Piece] | None = None
        longest = lines.longest
        if longest > GIANT_LINE_CHARS:
            reason = f"giant line ({longest} characters)"
            pieces = _windows(lines, path, budget)
        elif (strategy := strategy_for(path, strategies)) is not None:
            try:
                pieces = _strategy_pieces(strategy, path, lines)
            except StrategyError as exc:
                failed, warning = _strategy_failure(strategy, path, exc)
                not_run = isinstance(exc, StrategyNotRun)
            else:
                if language == "text":  # a format with its own strategy is structured text, not prose
                    language = PurePosixPath(path.lower()).suffix.lstrip(".") or language
        if pieces is None:
            pieces, definitions, skeleton, reason = _plan(path, lines, language, budget, grammar_crashed)
            # its grammar refused for its language's failures on other files (`parallel.BREAKER_ROWS`), not its own
            not_run = not_run or reason.startswith(f"grammar {NOT_RUN}")
    except MemoryError:  # past its worker's memory cap: the worker's to settle, as a crash (`PARSE_MEMORY_BYTES`)
        raise
    except (Exception, RecursionError) as exc:  # the chunker must not lose a file to its own bug
        log.warning("chunker failed on %s (%s); using line windows", path, exc, exc_info=True)
        reason = f"error: {type(exc).__name__}: {exc}"
        pieces = _windows(lines, path, budget)
    reason = "; ".join(why for why in (failed, reason) if why)
    symbols = [
        Symbol(d.name, d.kind, d.start, d.end, d.parent, d.signature) for d in definitions if d.is_symbol
    ]
    chunks = _chunks(lines, _within_budget(lines, pieces, budget), symbols)
    try:
        validate_partition(text, chunks)
    except PartitionError as exc:
        log.error("chunks of %s are not a partition (%s); using line windows", path, exc)
        reason = f"partition: {exc}"
        chunks = _chunks(lines, _windows(lines, path, budget), symbols)
    return ChunkedFile(path, language, chunks, symbols, skeleton, reason, warning, not_run)


def chunked_version(chunked: ChunkedFile) -> int:
    """The chunker version a file's row records for `chunked`: this chunker's, unless the file's strategy or its
    grammar did not run on it (`STRATEGY_NOT_RUN_VERSION`)."""
    return STRATEGY_NOT_RUN_VERSION if chunked.strategy_not_run else CHUNKER_VERSION


def _plan(path: str, lines: Lines, language: str, budget: int, grammar_crashed: str
          ) -> tuple[list[Piece], list[Definition], FileSkeleton, str]:
    if is_doc_language(language):
        plan = _DOC_PLANS.get(language, rst_plan)(lines.lines)
        return section_pieces(lines, plan, budget, path), [], _doc_skeleton(path, plan), ""
    parser = None if grammar_crashed else get_parser(language)
    if parser is None:
        return (_windows(lines, path, budget), [], FileSkeleton(path, path),
                grammar_crashed or f"no grammar for {language!r}")
    tree = parse(parser, lines.source)
    spec = spec_for(language)
    finder = DefinitionFinder(lines, spec)
    definitions = finder.find(tree.root_node, parser.language)
    if language == "php" and is_legacy_php(tree.root_node):
        plan = legacy_php_plan(lines, definitions)
        pieces = section_pieces(lines, plan, budget, path)
    else:
        pieces = SyntaxChunker(lines, spec, definitions, budget).chunk(tree.root_node, path)
    return pieces, definitions, _code_skeleton(path, finder, tree.root_node, definitions), ""


def _strategy_pieces(strategy: Strategy, path: str, lines: Lines) -> list[Piece]:
    ranges = apply_strategy(strategy, lines.text, lines.lines)
    return [Piece(start, end, "block", name, (path, name) if name else (path,)) for start, end, name in ranges]


def _strategy_failure(strategy: Strategy, path: str, exc: StrategyError) -> tuple[str, str]:
    """The file's fallback reason, and the strategy's load warning where its module did not load (logged
    here only in passing: the index says it once, not for every file the strategy claims)."""
    if isinstance(exc, StrategyModuleError):
        log.info("chunk strategy %s: %s; chunking %s as without the strategy", strategy.name, exc, path)
        return f"strategy {strategy.name}: {exc}", exc.warning
    log.warning("chunk strategy %s failed on %s (%s); chunking it as without the strategy", strategy.name, path,
                exc)
    return f"strategy {strategy.name}: {exc}", ""


def _windows(lines: Lines, path: str, budget: int) -> list[Piece]:
    return [Piece(w.start, w.end, "window", "", (path,)) for w in line_windows(lines, 1, lines.count, budget)]


def _within_budget(lines: Lines, pieces: list[Piece], budget: int) -> list[Piece]:
    """The budget is a promise: a multi-line piece over it (a giant comment run, a forced cut) is windowed."""
    out: list[Piece] = []
    for piece in pieces:
        if piece.end > piece.start and lines.size(piece.start, piece.end) > budget:
            out.extend(replace(piece, start=w.start, end=w.end, kind="window")
                       for w in line_windows(lines, piece.start, piece.end, budget))
        else:
            out.append(piece)
    return out


def _chunks(lines: Lines, pieces: list[Piece], symbols: list[Symbol]) -> list[Chunk]:
    """Attach text and symbols (each symbol goes to the chunk holding its first line)."""
    ordered = sorted(symbols, key=lambda s: s.start_line)
    starts = [s.start_line for s in ordered]
    chunks = []
    for piece in pieces:
        inside = ordered[bisect_left(starts, piece.start):bisect_right(starts, piece.end)]
        names = tuple(dict.fromkeys(s.qualified_name for s in inside))
        chunks.append(Chunk(piece.start, piece.end, piece.kind, piece.name, " > ".join(piece.crumbs),
                            lines.slice(piece.start, piece.end), names))
    return chunks


def _code_skeleton(path: str, finder: DefinitionFinder, root: object,
                   definitions: list[Definition]) -> FileSkeleton:
    builder = sk.SkeletonBuilder(path)
    builder.add(sk.MODULE_DOC, finder.module_doc(root))
    for definition in definitions:
        depth = 0
        owner = definition.owner
        while owner is not None:
            depth, owner = depth + 1, owner.owner
        indent = "  " * depth
        if definition.kind == "constant":
            builder.add(sk.CONSTANT, indent + definition.signature)
            continue
        top = depth == 0
        builder.add(sk.TOP_SIGNATURE if top else sk.MEMBER_SIGNATURE, indent + definition.label)
        doc = finder.doc(definition)
        if doc:
            builder.add(sk.TOP_DOC if top else sk.MEMBER_DOC, f"{indent}  {doc}")
    return builder.build()


def _doc_skeleton(path: str, plan: CutPlan) -> FileSkeleton:
    builder = sk.SkeletonBuilder(path)
    for index in sorted(plan.headings):
        level, title = plan.headings[index]
        builder.add(sk.HEADING, "  " * (level - 1) + title)
    return builder.build()
