"""Chunk strategies: small Python functions that cut one file into line ranges, consulted before the built-ins.

A strategy comes from one of two places:
- the Python API (`register_strategy`): a program embedding the engine hands over a function; these come first;
- the workspace's `.codeloupe/strategies/*.py` (written by `codeloupe forge`, or by hand). Such a file is
  Python code that arrived with the repository, so it is imported only while its bytes hash to what the user
  accepted (`codeloupe trust --strategy FILE`, or accepting it in `codeloupe forge`); any other file is never
  opened as code, and one edited since it was accepted is refused with a loud warning.

Whatever a strategy returns passes the partition oracle (`validate_partition`) or is discarded: a strategy
that raises, runs past its time bound or returns anything but a line partition leaves that file to the chunker
that would have cut it without the strategy (its grammar, its sections, else line windows), logged and said in
its `fallback_reason`. Retrieval never calls a model: forging writes the code once, chunking only runs it.

A workspace strategy's code (its module's top level too) runs only in the strategy worker process
(`strategy_process`): memory-capped, and killed when late, on every thread. Loading one reads its `EXTENSIONS`
from the syntax tree where it is a plain literal, so opening a workspace runs none of its code.
"""

from __future__ import annotations

import ast
import itertools
import logging
import signal
import stat
import threading
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol, TypeVar

from codeloupe.chunk.lines import PartitionError, validate_partition
from codeloupe.chunk.strategy_process import (
    StrategyProcessError,
    StrategyProcessLate,
    StrategyProcessUnstarted,
    load_in_worker,
    run_in_worker,
)
from codeloupe.chunk.strategy_sandbox import identifiers, module_globals, static_problems
from codeloupe.trust import CHANGED, TRUSTED, TrustStore, file_digest
from codeloupe.types import Chunk

log = logging.getLogger("codeloupe.chunk")

# codeloupe's own folder in a workspace (a nested project's too, which may be opened on its own): its files are
# indexed, as the workspace's other files are, but never chunked by a strategy.
CONFIG_DIR = ".codeloupe"
STRATEGY_DIR = f"{CONFIG_DIR}/strategies"
# A strategy is a page of code; a bigger file in that folder is not one (and is never read whole).
MAX_STRATEGY_BYTES = 256_000
# How long one strategy may take on one file before the file is chunked as without it.
STRATEGY_TIMEOUT_S = 2.0
# A strategy chunks one format, spelt a few ways: far more is no format's list (and every file's lookup walks it).
MAX_EXTENSIONS = 100

T = TypeVar("T")
Ranges = Sequence[tuple[int, int] | tuple[int, int, str]]


class ChunkStrategy(Protocol):
    """The strategy contract. A strategy is one Python module, `.codeloupe/strategies/NAME.py`, defining:

        EXTENSIONS = (".ext",)   # the lower-case file extensions it chunks, dot included

        def chunk(text: str, lines: list[str]) -> list[tuple[int, int]]:
            ...

    `text` is the whole file as decoded text; `lines` is its lines as editors count them, each with its line
    break: a line ends at "\\n", "\\r\\n" or a lone "\\r" only (a form feed or U+2028 is part of its line, where
    `str.splitlines` would end one; `io.StringIO(text, newline="").readlines()` makes the same list). Return
    1-based, inclusive `(start, end)` line ranges that cover every line exactly once, in order: the first range
    starts at 1, each next one starts right after the previous one ends, and the last ends at `len(lines)`. An
    empty file (no lines) gets `[]`.
    A range may carry a label as a third item, `(start, end, "name")`: the name of the definition, section or
    record it holds (shown in breadcrumbs). Cut at the format's own units (a definition, a section, a rule, a
    record), keeping a unit's leading comments with it; a chunk should stay under a few dozen lines (longer
    ones are cut into line windows). The function must be pure and quick: standard-library text modules only
    (re, string, itertools, ...), no I/O, no imports of anything else, no global state, well under a second
    per file. `re` is Python's API on the RE2 engine (linear time): no backreferences, lookahead or lookbehind,
    atomic groups, possessive quantifiers or re.VERBOSE; `$` without re.MULTILINE only on a single line or a
    text that does not end in a newline (use re.MULTILINE or \\Z). Any exception, a range that is not a
    partition or a run over the time bound leaves that file to the built-in chunker (plain line windows where
    none knows the format).
    """

    def __call__(self, text: str, lines: list[str]) -> Ranges: ...


class StrategyError(Exception):
    """A strategy failed on one file (raised, timed out, or returned something that is not a partition)."""


class StrategyNotRun(StrategyError):
    """A strategy did not run on the file at all: no worker process could run it. Unlike its verdict on the file
    (an error, a range that is no partition, running late on it or on an earlier file), which the same code gives
    the same file again, this one may pass: the file's
    chunks are then a fallback that the next index run chunks again (`chunk.chunker.STRATEGY_NOT_RUN_VERSION`)."""


class StrategyModuleError(StrategyError):
    """A workspace strategy's module did not load in the strategy worker (its top level raised, ran late or ran
    out of memory, or it defines no `chunk`): it fails every file it claims alike. `warning` says so as a load
    warning, which the index reports once (`IndexReport.strategy_warnings`) rather than with every file."""

    def __init__(self, origin: str, why: str) -> None:
        super().__init__(f"its module did not load: {why}")
        self.warning = _load_failure(origin, why, "the files it claims are chunked as they would be without it")


class StrategyUnstarted(StrategyModuleError, StrategyNotRun):
    """No strategy worker could start to load the module (said once, as a load failure is)."""


def _load_failure(origin: str, why: str, outcome: str) -> str:
    return f"codeloupe: the trusted chunk strategy {origin} failed to load ({why}); {outcome}"


@dataclass(frozen=True)
class Strategy:
    """A chunk strategy: either a registered `function` or module `source`, compiled in the strategy worker
    process (so a strategy crosses into the indexer's worker processes as text)."""

    name: str
    extensions: tuple[str, ...]
    source: str = ""
    sha256: str = ""
    function: ChunkStrategy | None = field(default=None, compare=False)
    origin: str = ""  # the file it came from, or "the Python API"

    def claims(self, rel_path: str) -> bool:
        return PurePosixPath(rel_path.lower()).suffix in self.extensions


@dataclass
class StrategyLoad:
    """The workspace strategies that may run, and a warning for each one that may not."""

    strategies: list[Strategy] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


_registered: list[Strategy] = []
_registry_lock = threading.Lock()
# Strategies that ran late in this process, never started again: a workspace strategy by its code's sha256 (its
# file corrected and trusted again runs; another workspace's file of the same name is other code), a registered
# one by its name.
_timed_out: set[str] = set()


def register_strategy(name: str, extensions: Sequence[str], function: ChunkStrategy) -> Strategy:
    """Chunk files with these extensions with `function` (see `ChunkStrategy`), ahead of the built-in chunkers
    and of workspace strategies. Registering a name again replaces it."""
    strategy = Strategy(name, normalise_extensions(extensions), function=function, origin="the Python API")
    with _registry_lock:
        _registered[:] = [s for s in _registered if s.name != name] + [strategy]
    return strategy


def unregister_strategy(name: str) -> bool:
    with _registry_lock:
        before = len(_registered)
        _registered[:] = [s for s in _registered if s.name != name]
        return len(_registered) != before


def registered_strategies() -> list[Strategy]:
    with _registry_lock:
        return list(_registered)


def normalise_extensions(extensions: Sequence[str]) -> tuple[str, ...]:
    if isinstance(extensions, str) or not all(isinstance(e, str) and e for e in extensions):
        raise ValueError("EXTENSIONS must be a sequence of extensions such as '.ext'")
    if len(extensions) > MAX_EXTENSIONS:
        raise ValueError(f"EXTENSIONS claims {len(extensions)} extensions; a strategy may claim {MAX_EXTENSIONS}")
    return tuple(e.lower() if e.startswith(".") else "." + e.lower() for e in extensions)


def strategy_for(rel_path: str, strategies: Sequence[Strategy]) -> Strategy | None:
    """The first strategy claiming the file: those registered through the API, then `strategies`. None for a file
    of codeloupe's own folder (`CONFIG_DIR`): a strategy module is Python, read by the Python grammar whatever the
    strategies claim (a strategy claiming .py would otherwise cut its own code, and report its own file among
    the files it failed on)."""
    if in_config_dir(rel_path):
        return None
    for strategy in (*registered_strategies(), *strategies):
        if strategy.claims(rel_path):
            return strategy
    return None


def in_config_dir(rel_path: str) -> bool:
    """Whether the file lies in codeloupe's own folder (`CONFIG_DIR`, a nested project's too): no strategy
    chunks it."""
    return CONFIG_DIR in PurePosixPath(rel_path).parts[:-1]


def compile_strategy(source: str, origin: str) -> tuple[tuple[str, ...], ChunkStrategy]:
    """Run a strategy module's code and return its (EXTENSIONS, chunk): in the strategy worker process only
    (`strategy_process`), and only for code the user accepted or code being forged; either way only what
    `strategy_sandbox` lets it reach."""
    _refuse_problems(source)
    namespace = module_globals(f"codeloupe_strategy_{PurePosixPath(origin).stem}")
    exec(compile(source, origin, "exec"), namespace)  # noqa: S102 - trusted by its hash, or being forged
    function = namespace.get("chunk")
    if not callable(function):
        raise StrategyError("the module defines no function chunk(text, lines)")
    return normalise_extensions(namespace.get("EXTENSIONS", ())), function  # type: ignore[arg-type]


def _refuse_problems(source: str) -> None:
    problems = static_problems(source)
    if problems:
        raise StrategyError(f"refused: {'; '.join(problems[:3])}")


def strategy_extensions(source: str, sha256: str, origin: str) -> tuple[str, ...]:
    """The extensions a strategy module claims, its source checked first (`StrategyError` saying why not):
    read from its syntax tree where `literal_extensions` can, else from `loaded_extensions`."""
    _refuse_problems(source)
    found = literal_extensions(source)
    return found if found is not None else loaded_extensions(source, sha256, origin)


def loaded_extensions(source: str, sha256: str, origin: str) -> tuple[str, ...]:
    """EXTENSIONS as the module's top level leaves it, run in the strategy worker process within the time bound
    (the module stays compiled there for the files after); `StrategyError` saying why not."""
    try:
        # Checked again here: what comes back from the worker is the strategy's to shape.
        return normalise_extensions(load_in_worker(source, sha256, origin, STRATEGY_TIMEOUT_S))
    except StrategyProcessError as exc:
        raise StrategyError(str(exc)) from exc
    except ValueError as exc:
        raise StrategyError(str(exc)) from exc


def literal_extensions(source: str) -> tuple[str, ...] | None:
    """EXTENSIONS as the module's syntax tree spells it, without running any of it: where the module binds
    that name once, at its top level, to a literal, and names it nowhere else (so nothing can change it while
    the module runs); None otherwise."""
    tree = ast.parse(source)
    mentions = sum(name == "EXTENSIONS" for node in ast.walk(tree) for name in identifiers(node))
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if mentions == 1 and isinstance(target, ast.Name) and target.id == "EXTENSIONS":
            try:
                return normalise_extensions(ast.literal_eval(value))
            except (ValueError, TypeError):
                return None
    return None


def apply_strategy(strategy: Strategy, text: str, lines: list[str],
                   timeout_s: float | None = None) -> list[tuple[int, int, str]]:
    """The strategy's ranges for one file, checked to be a line partition; `StrategyError` otherwise."""
    timeout_s = STRATEGY_TIMEOUT_S if timeout_s is None else timeout_s
    if _late_key(strategy) in _timed_out:
        # Kept as a verdict, not retried: the strategy is this slow, and a retry would rewrite (and re-embed) every
        # file it claims at each index run of the process, since the process never starts it again.
        raise StrategyError("disabled in this process after it ran past its time bound")
    function = strategy.function
    try:
        if function is None:  # checked again here: what comes back from the worker is the strategy's to shape
            ranges = partition_ranges(_ranges_in_worker(strategy, text, timeout_s), len(lines))
        else:
            ranges = partition_ranges(run_bounded(lambda: function(text, list(lines)), timeout_s, strategy.name),
                                      len(lines))
    except StrategyError:
        raise
    except (Exception, RecursionError) as exc:
        raise StrategyError(f"{type(exc).__name__}: {exc}") from exc
    chunks = [Chunk(start, end, "block", name, "", "".join(lines[start - 1:end]))
              if 1 <= start <= end <= len(lines) else Chunk(start, end, "block", name, "", "")
              for start, end, name in ranges]
    try:
        validate_partition(text, chunks)
    except PartitionError as exc:
        raise StrategyError(f"not a line partition: {exc}") from exc
    return ranges


def partition_ranges(raw: Ranges, line_count: int) -> list[tuple[int, int, str]]:
    """A strategy's answer as `(start, end, name)` ranges; `StrategyError` for an item that is not a range, or
    for more ranges than the file has lines, refused before they are all read: no partition has more, and the
    strategy worker sends nothing larger back to the process that chunks."""
    ranges = [_range(item) for item in itertools.islice(raw, line_count + 1)]
    if len(ranges) > line_count:
        count = len(raw) if isinstance(raw, Sized) else f"over {line_count}"
        raise StrategyError(f"not a line partition: {count} ranges for {line_count} line"
                            f"{'' if line_count == 1 else 's'}")
    return ranges


def _ranges_in_worker(strategy: Strategy, text: str, timeout_s: float) -> list[list[int | str]]:
    try:
        return run_in_worker(strategy.source, strategy.sha256, strategy.origin, text, timeout_s)
    except StrategyProcessError as exc:
        if isinstance(exc, StrategyProcessLate):
            _timed_out.add(_late_key(strategy))  # a strategy that ran late is not started again in this process
        if isinstance(exc, StrategyProcessUnstarted):
            raise StrategyUnstarted(strategy.origin, str(exc)) from exc
        if exc.at_load:
            raise StrategyModuleError(strategy.origin, str(exc)) from exc
        raise StrategyError(str(exc)) from exc


def _late_key(strategy: Strategy) -> str:
    """Its entry in `_timed_out`."""
    return strategy.sha256 or strategy.name


def _range(item: object) -> tuple[int, int, str]:
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        start, end = item[0], item[1]
        name = item[2] if len(item) == 3 else ""
        if type(start) is int and type(end) is int and isinstance(name, str):
            return start, end, " ".join(name.split())[:120]
    raise StrategyError(f"a range must be (start, end) or (start, end, name) with int lines; got {item!r:.80}")


class _Timeout(BaseException):
    """Raised into the strategy by the alarm (a BaseException, so `except Exception` in it cannot eat it)."""


def run_bounded(call: Callable[[], T], timeout_s: float, name: str) -> T:
    """Run `call` for at most `timeout_s`.

    For a registered strategy (the embedding program's own code; a workspace strategy runs in the strategy
    worker process, which is killed when late). On a process's main thread an interval timer interrupts it
    between bytecodes. Elsewhere the call runs on a daemon thread that is abandoned when late, and the strategy
    is not started again in this process.
    """
    if _interruptible_here():
        def on_alarm(_signum: int, _frame: object) -> None:
            raise _Timeout

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            return call()
        except _Timeout:
            raise StrategyError(f"ran past its time bound of {timeout_s:g}s") from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=f"codeloupe-strategy-{name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        _timed_out.add(name)
        raise StrategyError(f"ran past its time bound of {timeout_s:g}s (disabled for this process)")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def _interruptible_here() -> bool:
    """Whether an interval timer can cut a call off here: on a process's main thread, where there is one."""
    return threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")


def strategy_files(root: Path) -> list[Path]:
    folder = Path(root) / STRATEGY_DIR
    try:
        return sorted(p for p in folder.iterdir() if p.name.endswith(".py"))
    except OSError:
        return []


def read_strategy_file(path: Path) -> bytes:
    """A strategy file's bytes: a regular file (not a link) within the size bound, or OSError saying why."""
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path}: not a regular file")
    if st.st_size > MAX_STRATEGY_BYTES:
        raise OSError(f"{path}: over {MAX_STRATEGY_BYTES} bytes")
    return path.read_bytes()


def load_workspace_strategies(root: Path, trust: TrustStore | None = None) -> StrategyLoad:
    """The workspace's trusted strategies (`strategy_extensions`: none of their code runs here); a warning for
    every strategy file left alone."""
    trust = trust or TrustStore.default()
    out = StrategyLoad()
    for path in strategy_files(root):
        try:
            data = read_strategy_file(path)
        except OSError as exc:
            out.warnings.append(f"codeloupe: not loading the chunk strategy {exc}")
            continue
        digest = file_digest(data)
        state = trust.strategy_state(path, digest)
        if state == CHANGED:
            out.warnings.append(
                f"codeloupe: WARNING: the chunk strategy {path} CHANGED since you trusted it; it is NOT loaded. "
                f"Read it, then run `codeloupe trust --strategy {path}` if you accept the new code.")
            continue
        if state != TRUSTED:
            out.warnings.append(
                f"codeloupe: not loading the chunk strategy {path}: it is code you have not trusted. Read it, "
                f"then run `codeloupe trust --strategy {path}` to use it.")
            continue
        source = data.decode("utf-8", "replace")
        try:
            extensions = strategy_extensions(source, digest, str(path))
        except StrategyError as exc:
            out.warnings.append(_load_failure(str(path), str(exc), "skipped"))
            continue
        out.strategies.append(Strategy(path.stem, extensions, source, digest, origin=str(path)))
    for warning in out.warnings:  # the surfaces show `warnings` to the user; this is for the log
        log.info("%s", warning)
    return out
