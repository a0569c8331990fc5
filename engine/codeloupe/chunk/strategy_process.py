"""A workspace strategy's code runs here only: in a small worker process of its own, memory-capped, killed when late.

A workspace strategy is code that arrived with the repository or that a model wrote. In the process that chunks,
nothing can bound it well: an interval timer interrupts Python between bytecodes but not a long call into C
(`math.factorial(10**7)`), and only on a main thread; on any other thread (the language server's writer, a served
workspace's refreshes) an abandoned call keeps looping with the interpreter lock; and an allocation without bound
exhausts the whole process, on any thread. So every workspace strategy, its module's top level included, runs
in one worker process per process (started on first use, reused for every file after), compiled there from the
same trusted source, with its address space capped; when an answer is late the worker is killed, and the next
call starts another. A worker that could not start is not tried again until `retry_worker_start` (each index run
of the whole workspace): every file a strategy claims would wait for it as long again.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from typing import Any

from codeloupe.parallel import (
    Ended,
    KeptWorker,
    Late,
    WorkerUnstarted,
    cap_address_space,
    may_start,
    pool_context,
)

# How much address space a strategy may add to its worker's own (the worker's imports) before an allocation
# fails: a strategy works on one file's text, so this is far above any honest need.
STRATEGY_MEMORY_BYTES = 512 * 1024 * 1024
# How many strategy modules one worker keeps compiled (a workspace's strategies, forge's candidates, each version
# trusted anew, every workspace a server opens), all under the one cap: one more starts a fresh worker, whose
# cap is whole again. Ending the worker is what surely gives their memory back (a module's top level may keep a
# large table, and Python seldom returns what it freed to the system).
KEPT_MODULES = 8
# How much of a strategy's failure the worker sends back: its message becomes each failing file's stored
# `fallback_reason` and a line of the index's log, and a strategy's exception may carry megabytes.
MAX_FAILURE_CHARS = 300
# The largest answer read back from the worker: a strategy's ranges are refused in the worker past one per line of
# the file, so an honest answer is most often far smaller (64 MiB holds 2M ranges of short names), but not
# always (a 1 MB file of one-line records, each named with 120 characters, is ~70 MB): the worker answers one
# over it with why (`_encoded`).
MAX_ANSWER_BYTES = 64 * 1024 * 1024

# (source, sha256, origin, text, timeout_s); text None asks for the module's EXTENSIONS
Request = tuple[str, str, str, str | None, float]
Ranges = list[list[int | str]]  # each [start, end, name], as JSON brings it back: checked by the caller
Loaded = tuple[tuple[str, ...], Callable[[str, list[str]], Any]]  # a compiled module's (EXTENSIONS, chunk)


class StrategyProcessError(Exception):
    """The strategy failed in the worker, ran late (the worker was then killed), or no worker could run it."""

    at_load = False  # True where its module did not load (its top level failed): it fails every file alike


class StrategyProcessUnstarted(StrategyProcessError):
    """No worker could run the strategy: it fails every file alike, as a module that did not load does."""

    at_load = True


class StrategyProcessLate(StrategyProcessError):
    """The strategy gave no answer within its time bound; its worker was killed."""


class _Worker(KeptWorker):
    """The strategy worker (`parallel.KeptWorker`), and the modules that loaded in it. Its answers are read as JSON,
    never unpickled (`_encoded`), within `MAX_ANSWER_BYTES`; a daemon, ended by multiprocessing as this process exits."""

    def __init__(self) -> None:
        context = pool_context()  # spawn where this process runs other threads; fork where it runs only one
        if not may_start(context, "chunk strategies"):
            raise StrategyProcessUnstarted("not run: a workspace strategy runs in a worker process, and this "
                                           "program's main script (no __main__ guard) cannot start one")
        try:
            super().__init__(context, functools.partial(_strategy_answer, STRATEGY_MEMORY_BYTES),
                             start=functools.partial(_start_strategies, STRATEGY_MEMORY_BYTES),
                             name="codeloupe-strategy-worker", daemon=True)
        except WorkerUnstarted as exc:
            raise StrategyProcessUnstarted(f"not run: {exc}") from exc
        self.loaded: set[str] = set()  # the sha256 of each module that loaded here

    def call(self, request: Request, timeout_s: float) -> Ranges | list[str]:
        """The answer within `timeout_s`, or `StrategyProcessError` saying why not."""
        try:
            answer = json.loads(self.ask(request, timeout_s, max_bytes=MAX_ANSWER_BYTES))
        except Late as exc:
            raise StrategyProcessLate(f"ran past its time bound of {timeout_s:g}s (its worker process was stopped)"
                                      ) from exc
        except Ended as exc:  # killed by the system, or crashed (or an answer over the bound)
            raise StrategyProcessError(str(exc)) from exc
        except (ValueError, RecursionError) as exc:  # not JSON (or nested deeper than this interpreter reads)
            answer = exc
        if isinstance(answer, list) and len(answer) == 2 and answer[0] == "error" and isinstance(answer[1], str):
            raise StrategyProcessError(answer[1])
        if not (isinstance(answer, list) and len(answer) == 2 and answer[0] == "ok" and isinstance(answer[1], list)):
            self.stop()  # not an answer `_encoded` writes: the worker is not trusted again
            raise StrategyProcessError(f"its worker process answered something else than ranges ({answer!r:.100})")
        return answer[1]


_worker: _Worker | None = None
_worker_lock = threading.Lock()  # the one worker chunks one file at a time
# Why the last worker failed to start, while it is not to be tried again: every strategy call fails at once
# with it (a worker that cannot start now would most likely not start for the next file either).
_unstarted: StrategyProcessUnstarted | None = None


def stop_worker() -> None:
    """End this process's strategy worker, if one runs (it is otherwise kept for the files after, and ends with
    this process), and forget a worker that failed to start: for a program done with chunking, and for tests,
    whose process outlives each test."""
    global _worker, _unstarted
    with _worker_lock:
        if _worker is not None:
            _worker.stop()
            _worker = None
        _unstarted = None


def retry_worker_start() -> None:
    """Let the next strategy call try to start a worker again, where the last one failed to: at the start of an
    index run of the whole workspace (the files saved between runs fall back at once)."""
    global _unstarted
    with _worker_lock:
        _unstarted = None


def run_in_worker(source: str, sha256: str, origin: str, text: str, timeout_s: float) -> Ranges:
    """A workspace strategy's ranges for `text` (each `(start, end, name)`, not yet checked to be a partition),
    computed in the worker process within `timeout_s`; `StrategyProcessError` saying why not. The module is
    loaded first, in a call of its own (once per worker), so a top level that fails is told apart (`at_load`)
    from a `chunk` that fails on this file, and each gets the whole time bound."""
    with _worker_lock:
        worker = _worker_for(sha256)
        if sha256 not in worker.loaded:
            _load(worker, source, sha256, origin, timeout_s)
        return _ask(worker, (source, sha256, origin, text, timeout_s))  # type: ignore[return-value]


def load_in_worker(source: str, sha256: str, origin: str, timeout_s: float) -> tuple[str, ...]:
    """A workspace strategy module's EXTENSIONS, as its top level leaves them when run in the worker process
    within `timeout_s` (the module stays compiled there for the files after); `StrategyProcessError` saying why
    not."""
    with _worker_lock:
        return _load(_worker_for(sha256), source, sha256, origin, timeout_s)


def _worker_for(sha256: str) -> _Worker:
    """The worker to run module `sha256` in: the running one, unless it would have to compile a module over
    KEPT_MODULES; then (or when none runs) a new one."""
    global _worker, _unstarted
    if _worker is not None and sha256 not in _worker.loaded and len(_worker.loaded) >= KEPT_MODULES:
        _worker.stop()
        _worker = None
    if _worker is None:
        if _unstarted is not None:
            raise StrategyProcessUnstarted(str(_unstarted))
        try:
            _worker = _Worker()
        except StrategyProcessUnstarted as exc:
            _unstarted = exc
            raise
    return _worker


def _load(worker: _Worker, source: str, sha256: str, origin: str, timeout_s: float) -> tuple[str, ...]:
    try:
        extensions = tuple(_ask(worker, (source, sha256, origin, None, timeout_s)))  # type: ignore[arg-type]
    except StrategyProcessError as exc:
        exc.at_load = True
        raise
    worker.loaded.add(sha256)
    return extensions


def _ask(worker: _Worker, request: Request) -> Ranges | list[str]:
    """The worker's answer to `request`; a worker that died, ran late or was cut off by Ctrl-C is stopped and
    forgotten (the next call starts another). Called with `_worker_lock` held."""
    global _worker
    try:
        return worker.call(request, request[-1])
    except BaseException:
        if not worker.stopped and not worker.process.is_alive():  # it ended after answering
            worker.stop()
        # One killed but not reaped within `parallel.REAP_S` is still alive to `is_alive`, yet its pipe is
        # closed and it answers no later file.
        if worker.stopped:
            _worker = None
        raise


def _start_strategies(memory_bytes: int) -> None:
    """In the worker: its imports (strategies imports this module), then the cap, which is on top of them."""
    import codeloupe.chunk.strategies  # noqa: F401

    cap_address_space(memory_bytes)


_compiled_here: dict[str, Loaded | str] = {}  # in the worker: sha256 -> the module, or why it did not load


def _strategy_answer(memory_bytes: int, request: object) -> bytes:
    """The worker's answer to a request, as JSON: a module's EXTENSIONS, or a file's ranges. Each module is compiled
    once (by its sha256): a top level that fails fails once, not again for every file."""
    from codeloupe.chunk.strategies import compile_strategy, partition_ranges
    from codeloupe.types import split_lines

    source, sha256, origin, text, _timeout_s = request  # type: ignore[misc]
    try:
        if sha256 not in _compiled_here:
            try:
                _compiled_here[sha256] = compile_strategy(source, origin)
            except Exception as exc:
                _compiled_here[sha256] = _failure(exc, memory_bytes)
        loaded = _compiled_here[sha256]
        if isinstance(loaded, str):
            answer: tuple[str, object] = ("error", loaded)
        elif text is None:
            answer = ("ok", list(loaded[0]))
        else:
            lines = split_lines(text)
            answer = ("ok", partition_ranges(loaded[1](text, lines), len(lines)))
    except Exception as exc:  # RecursionError too
        answer = ("error", _failure(exc, memory_bytes))
    return _encoded(answer)


def _encoded(answer: tuple[str, object]) -> bytes:
    """An answer to the parent as JSON: the parent never unpickles what this process sends, since a strategy
    that got hold of the pipe could otherwise make it run code of its choosing (pickle calls what it names).
    Ranges over what the parent reads back (`MAX_ANSWER_BYTES`) are answered with why instead: the parent would
    read their length alone and stop this worker, as if it had crashed."""
    data = json.dumps(answer, separators=(",", ":")).encode()
    if len(data) > MAX_ANSWER_BYTES:
        status, value = answer
        count = f"{len(value)} ranges" if isinstance(value, list) else status
        data = json.dumps(("error", f"its answer ({count}) is {len(data) // 2**20} MiB as JSON, over the"
                                    f" {MAX_ANSWER_BYTES // 2**20} MiB the process that chunks reads back")).encode()
    return data


def _failure(exc: Exception, memory_bytes: int) -> str:
    """Why a strategy failed, as the parent is told: cut to MAX_FAILURE_CHARS, saying so."""
    from codeloupe.chunk.strategies import StrategyError

    if isinstance(exc, MemoryError):
        return f"ran out of memory (a strategy may use {memory_bytes // 2**20} MiB)"
    failure = str(exc) if isinstance(exc, StrategyError) else f"{type(exc).__name__}: {exc}"
    if len(failure) <= MAX_FAILURE_CHARS:
        return failure
    return f"{failure[:MAX_FAILURE_CHARS]}... ({len(failure) - MAX_FAILURE_CHARS} more characters)"
