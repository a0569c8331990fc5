"""CPU-bound work over many items in worker processes, in order, falling back to this process."""

from __future__ import annotations

import ast
import atexit
import ctypes
import functools
import importlib
import logging
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from itertools import chain
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Generic, TypeVar

log = logging.getLogger("codeloupe.parallel")

T = TypeVar("T")

# Starting worker processes costs about half a second; below this many items one process is faster.
POOL_MIN_ITEMS = 200
POOL_MAX_WORKERS = 4
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PR_SET_NAME = 15
KEPT_WORKER_NAME = b"codeloupe-parse"  # the kept worker's process name (/proc/PID/comm: its name's first 15 bytes)
PARENT_POLL_S = 1.0  # where there is no PR_SET_PDEATHSIG (and for a kept worker): how soon an orphaned worker notices
IN_FLIGHT_PER_WORKER = 32
# A map given each row's `size` (a file's bytes) hands a worker consecutive rows together, up to this many bytes
# and rows a task: a task a file, 20,000 empty files took 6.5 s of handing files to the workers and their results
# back for 1.1 s of chunking in one process.
TASK_BYTES = 64 * 1024
TASK_ROWS = 64
# How long the oldest task may go without a result before the workers are taken for stuck (a worker that
# cannot start, or one blocked on a lock it inherited): they are killed and the work finishes in this process; or,
# where other tasks gave results and the map has `crashed`, before the task is taken for one that never ends (a
# grammar that loops on a file, in C, where nothing but killing its process stops it).
# A task is a few files' chunks or graph facts (`TASK_BYTES`), or one batch of embedding windows: seconds at most,
# so this is far above any honest wait, worker start-up on a loaded machine included.
WORKER_TIMEOUT_S = 120.0
# How many rows of one language (`map_in_workers`' `kind`) may crash or run past their time in one map before the
# others are not run: two, so that one file's bad luck (a crash that strikes half the processes) does not cost the
# rest of its language its grammar, and a repository that plants thousands costs two timeouts, not thousands.
BREAKER_ROWS = 2
NOT_RUN = "was not run:"  # `crashed`'s cause for a row the breaker refused: never parsed, so worth trying again
# How much address space a worker that parses a workspace's files (a map given `crashed`: chunking, graph facts) may
# take past its own size at its start (its imports; a forked one's, its parent's) before an allocation fails there,
# costing that file alone (`cap_address_space`): a grammar allocates without bound on some files (1 MB of `[` lines
# took tree-sitter-haskell 1.4 GB, 4 MB of `{` lines tree-sitter-json 1.3 GB; `bench/grammar_memory.py`), and nothing
# stopped it from taking the machine's memory, a worker each, the kernel's OOM killer then ending whatever process it
# picked (the editor, a browser). Far above the honest need: the largest files of the corpora (1.5 MB of Python) took
# 110 MB, 4 MB of random Python tokens 300 MB, every grammar's library loaded 150 MB; far below a machine's memory
# at `POOL_MAX_WORKERS` workers.
PARSE_MEMORY_BYTES = 1024 * 2**20
# The exit status of a worker whose memory cap a row went past where Python saw it (a MemoryError: the worker ends,
# `_end_out_of_memory`), so that its parent can say so; one that no worker ends with otherwise (Python's are 0, 1, 2
# and 120). Past the cap in C (tree-sitter does not check an allocation), the worker dies by a signal, all that is
# known then.
OUT_OF_MEMORY_EXIT = 86
_END = object()  # no item (an item may be None): `until`'s end of its items, `map_in_workers`' no result yet
# How often a map given `should_stop` asks it while it waits for a result (the workers starting: seconds on a
# loaded machine, where spawned workers import the engine first).
STOP_POLL_S = 0.1


def map_in_workers(fn: Callable[..., T], rows: Iterable[tuple], count: int, *, what: str,
                   timeout_s: float = WORKER_TIMEOUT_S, min_items: int | None = None,
                   meanwhile: Callable[[], object] | None = None,
                   should_stop: Callable[[], bool] | None = None,
                   size: Callable[..., int] | None = None,
                   crashed: Callable[..., T] | None = None,
                   kind: Callable[..., str | None] | None = None) -> Generator[T, None, None]:
    """`fn(*row)` for each of the `count` rows, in order; in a pool of worker processes when there are
    enough rows to pay for starting it (`min_items`, `POOL_MIN_ITEMS` unless rows are larger tasks). Rows are
    drawn lazily, a bounded number in flight, so a large input (file texts) is never all in memory. `fn` must
    be a module-level function (it is pickled by name). Workers that give no result for `timeout_s` are killed
    and the rest is done in this process (but see `crashed`).

    Closed before its last result (the caller stopped reading), it kills the workers and their tasks in flight.

    `meanwhile()`, other work of this process, is called once every row is handed to the workers, so that it
    runs while they finish (without a pool, before the last result); an error it raises is raised in place of
    the last result, so that a caller that stops at the last result without asking for another (`zip` with
    the rows, `next` once a row) gets it too.

    `should_stop`, asked every `STOP_POLL_S` while a worker's result is awaited: once it is true, the map ends
    early, its workers killed. A caller that asks it between results (`until`) waited otherwise for the workers
    to start and give their first result (seconds on a loaded machine) before it could stop.

    `size(*row)`: the row's bytes, given where rows can be small (files): a worker is then handed consecutive rows
    together (`TASK_BYTES`, `TASK_ROWS`); without it, one row a task.

    `crashed(cause, *row)`: the result for a row a worker died on, killed by a signal (a native library's crash,
    a grammar's on a file of the workspace; the kernel's kill of a worker that took all the memory), or that a
    worker ran for longer than `timeout_s` while the others gave results (a grammar that loops on a file).
    `cause` says so with the row's work as its subject: "crashed: its worker process was killed by SIGSEGV",
    "did not finish: its worker process took longer than 120 s". Without it, a pool a worker died in (or one
    stuck) leaves all its rows to this process, which then crashed on the same row, or hung on it for good (the
    language server, `serve`). With it, the rows of the tasks the pool had not finished go to a worker process
    kept for the maps after (`_apart`), a row at a time, in turn: a worker that dies there, or runs past the row's
    time (`row_timeout_s`), did so on the row it was given, which gets `crashed(...)` and is never run in this
    process; the other rows get their results, in order, and the work goes on in a new pool. A timeout before any
    worker gave a result is the workers' (stuck), not a row's; but as the rows in flight may be what holds them (a
    grammar that loops on the first file of every task), the rows the pool leaves go to the kept worker too, a row
    at a time, and no pool is started again. With too few rows for a pool (a save's file, a small workspace), each
    row goes to that kept worker, with the same outcome for a row it dies or runs late on; only where none can
    start are the rows done here.

    `kind(*row)`, with `crashed`: the row's language (None: not told by its path). Once `crashed` has been given
    `BREAKER_ROWS` rows of one language, this map runs none of that language's other rows (a repository that
    plants many files its grammar loops on: each would cost `timeout_s` of a worker): they get
    `crashed(NOT_RUN + "...", *row)`, here, without a worker. The workers of a map with `crashed` (they parse a
    workspace's files) may take `PARSE_MEMORY_BYTES` past their own size: a row past it is one they died on."""
    rows = iter(rows)
    workers = min(os.cpu_count() or 1, POOL_MAX_WORKERS)
    breaker: _Breaker[T] = _Breaker(what, crashed, kind)
    pending: deque[tuple[list[tuple], Future]] = deque()
    # The rows drawn and on no worker's `pending` task: the task being handed over, and those `_tasks` holds for
    # the next one. A pool that fails leaves them, with `pending`'s, to `rest`, in order.
    unsent: list[tuple] = []
    held: list[tuple] = []
    other = _Meanwhile(meanwhile)
    context = pool_context()
    closing = False  # the caller stopped reading (an index run that failed on a full disk): no more work
    answered = False  # a worker gave a result: a pool that then runs past `timeout_s` is not stuck, a task is

    # Too few rows for a pool, or the rows a failed pool leaves: with `crashed`, each in the kept worker, where a crash
    # or a loop costs that row only; without, here.
    def rest(left: Iterator[tuple]) -> Iterator[T]:
        return (fn(*row) for row in left) if crashed is None else \
            _apart(fn, left, what, timeout_s, should_stop, breaker, size)

    if count >= (POOL_MIN_ITEMS if min_items is None else min_items) and workers >= 2 and may_start(context, what):
        tasks = _tasks(rows, size, held)
        while True:
            dead: list[multiprocessing.process.BaseProcess] = []
            late: Future | None = None  # the task that ran past `timeout_s`, where it is its own doing
            try:
                with ProcessPoolExecutor(workers, mp_context=context, **_initializer(fn, crashed)) as pool:
                    try:
                        for task in chain([unsent] if unsent else [], tasks):
                            unsent = task  # until it is on `pending`: a pool broken already refuses it
                            _hand_over(pool, fn, unsent, pending, breaker)
                            if len(pending) >= IN_FLIGHT_PER_WORKER * workers:
                                results = _first_result(pending, timeout_s, should_stop)
                                answered = True
                                yield from results
                        other.run()
                        while pending:
                            results = _first_result(pending, timeout_s, should_stop)
                            answered = True
                            if not pending and other.failed:
                                yield from results[:-1]
                                break  # the last result: `meanwhile`'s error is raised in its place, below
                            yield from results
                    except TimeoutError:
                        # A task that runs on while others give results is its rows' doing, not a worker that cannot
                        # start.
                        if answered or any(_succeeded(future) for _, future in pending):
                            late = pending[0][1]
                        kill_workers(pool)
                        raise
                    except Stopped:
                        closing = True
                        kill_workers(pool)
                        return
                    except GeneratorExit:
                        # The tasks in flight are killed, not waited for: a served workspace closing mid-index exits
                        # within the 2 s its MCP client allows, where up to 32 files a worker were chunked first. A
                        # caller that read every result (a `zip` ends on its other input) closes it too: its idle
                        # workers exit by themselves, as after the last result.
                        closing = True
                        if pending:
                            kill_workers(pool)
                        raise
                    except BrokenProcessPool:
                        dead = list((pool._processes or {}).values())  # read once the pool has let them go, below
                        raise
                other.raise_error()
                return
            except (BrokenProcessPool, OSError, RuntimeError, TimeoutError) as exc:
                if closing:  # the pool failed on its way down after the caller let go: nothing is owed to anyone
                    log.debug("%s: the worker pool failed while closing (%r)", what, exc)
                    return
                cause = None
                if crashed is not None and isinstance(exc, BrokenProcessPool):
                    cause = _crash(dead)
                elif crashed is not None and late is not None:
                    cause = f"did not finish: its worker process took longer than {timeout_s:g} s"
                if cause is None:
                    # A worker could not start (a script without a __main__ guard under spawn, no /dev/shm, ...) or
                    # is stuck: finish without a pool rather than fail or wait forever; with `crashed`, in a kept
                    # worker, a row at a time, as what held them may be rows that never end.
                    log.warning("%s in worker processes failed (%r); continuing %s", what, exc,
                                "in this process" if crashed is None else "in a worker process, a row at a time")
                    break
                # The rows in flight are suspects: each goes to the kept worker, in turn, where the one it dies or
                # runs late on gets `crashed`; the tasks finished keep their results; the rest goes to a new pool.
                log.info("%s: a task %s; its rows and the others' in flight go to a worker of their own, one at"
                         " a time", what, cause)
                try:
                    yield from _results_left(pending, rest)
                except Stopped:
                    return
                pending.clear()
    # One result ahead, so that `meanwhile` runs (and its error is raised) before the last one is handed over.
    last = _END
    try:
        for result in chain(_results_left(pending, rest), rest(chain(unsent, held, rows))):
            if last is not _END:
                yield last
            last = result
    except Stopped:
        return
    other.run()
    other.raise_error()
    if last is not _END:
        yield last


def _hand_over(pool: Executor, fn: Callable[..., T], task: list[tuple], pending: deque[tuple[list[tuple], Future]],
               breaker: _Breaker[T]) -> None:
    """`task`'s rows onto `pending`, in order, taken off `task` as they go (a pool that breaks meanwhile leaves the
    rest on it): handed to `pool` together, but the rows `breaker` refuses, which get their result here, as a task
    already done."""
    while task:
        if breaker.refuses(task[0]):
            done: Future = Future()
            done.set_result([breaker.refused(task[0])])
            pending.append((task[:1], done))
            del task[:1]
            continue
        count = 1
        while count < len(task) and not breaker.refuses(task[count]):
            count += 1
        part = task[:count]
        pending.append((part, submit(pool, _run_task, fn, part)))
        del task[:count]


def _results_left(pending: deque[tuple[list[tuple], Future]],
                  rest: Callable[[Iterator[tuple]], Iterator[T]]) -> Iterator[T]:
    """The results of a failed pool's tasks, in order: those it finished, theirs; of the others, `rest`'s (with
    `crashed`, a kept worker's: never run here, where one of them would crash or hang this process)."""
    for task, future in pending:
        if _succeeded(future):
            yield from future.result()
        else:
            yield from rest(iter(task))


def _succeeded(future: Future) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def _crash(processes: list[multiprocessing.process.BaseProcess]) -> str | None:
    """`crashed`'s cause where one of a broken pool's `processes` (all ended: read after its shutdown) died by a row:
    out of memory (`_end_out_of_memory`), or killed by a signal, named; None where each exited (it could not start),
    was ended by the pool itself once broken (SIGTERM) or by a terminal's Ctrl-C (SIGINT, which this process gets
    too): none of those is a row's doing."""
    for process in processes:
        code = process.exitcode
        if code == OUT_OF_MEMORY_EXIT:
            return f"crashed: its worker process ran out of memory (cap {PARSE_MEMORY_BYTES // 2**20} MiB)"
        if code is not None and code < 0 and -code not in (signal.SIGTERM, signal.SIGINT):
            try:
                return f"crashed: its worker process was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"crashed: its worker process was killed by signal {-code}"
    return None


def _tasks(rows: Iterator[tuple], size: Callable[..., int] | None, held: list[tuple]) -> Iterator[list[tuple]]:
    """`rows` as tasks for the workers: one row each without `size`, else consecutive rows up to `TASK_BYTES` (a row
    larger than that alone) and `TASK_ROWS`. A full task is handed over at once, not when the next row comes (rows
    drawn from a slow disk). `held`: the rows drawn for the next task, the one that overflowed the last among them
    (a caller whose pool fails does them itself)."""
    weight_held = 0
    for row in rows:
        weight = size(*row) if size is not None else TASK_BYTES
        if held and weight_held + weight > TASK_BYTES:
            task = held[:]
            held[:], weight_held = [row], weight
            yield task
        else:
            held.append(row)
            weight_held += weight
        if weight_held >= TASK_BYTES or len(held) >= TASK_ROWS:
            task = held[:]
            held.clear()
            weight_held = 0
            yield task
    if held:
        task = held[:]
        held.clear()
        yield task


def _run_task(fn: Callable[..., T], task: list[tuple]) -> list[T]:
    """A worker's task: `fn(*row)` for each of its rows."""
    try:
        return [fn(*row) for row in task]
    except MemoryError:
        _end_out_of_memory()
        raise


def _initializer(fn: Callable[..., object], crashed: Callable[..., object] | None) -> dict[str, object]:
    """A pool's worker initialiser (`exit_with_parent`), and with `crashed` (its workers parse a workspace's files)
    the cap on their memory (`cap_parse_memory`), once `fn`'s module is imported."""
    if crashed is None:
        return {"initializer": exit_with_parent, "initargs": (os.getpid(),)}
    return {"initializer": _start_parse_worker,
            "initargs": (os.getpid(), _parse_memory_cap(), getattr(fn, "__module__", None) or "__main__")}


def _start_parse_worker(parent_pid: int, memory_bytes: int | None, module: str) -> None:
    """A spawned worker imports the engine (numpy and its thread pool's stacks too) before the cap, which is on top of
    them: the size they take is no file's and grows with the machine's cores."""
    exit_with_parent(parent_pid)
    importlib.import_module(module)
    cap_parse_memory(memory_bytes)


def _parse_memory_cap() -> int | None:
    """`PARSE_MEMORY_BYTES` where a worker's address space can be capped (Linux), else None, said once in the log."""
    if sys.platform.startswith("linux"):
        return PARSE_MEMORY_BYTES
    _say_uncapped()
    return None


@functools.cache
def _say_uncapped() -> None:
    log.info("worker processes that parse a workspace's files have no memory cap here (it needs Linux's RLIMIT_AS):"
             " a file whose grammar allocates without bound on it may take this machine's memory")


_memory_capped = False  # this process is a worker whose address space `cap_parse_memory` capped


def cap_parse_memory(memory_bytes: int | None) -> None:
    """Cap this worker's address space at `memory_bytes` past its size now (`PARSE_MEMORY_BYTES`); None: no cap."""
    global _memory_capped
    _memory_capped = memory_bytes is not None and cap_address_space(memory_bytes)


def _end_out_of_memory() -> None:
    """A row took this capped worker past its cap and Python raised MemoryError (the map's error, failing the whole
    index): the worker ends with `OUT_OF_MEMORY_EXIT`, so that the row is one it died on (`map_in_workers`' `crashed`:
    "ran out of memory (cap N MiB)", where it read as the kernel's kill, "killed by SIGKILL"), as where the allocation
    that failed was in C (tree-sitter checks for none: SIGSEGV, SIGABRT). An uncapped worker's MemoryError stays the
    map's, as ever."""
    if _memory_capped:
        os._exit(OUT_OF_MEMORY_EXIT)


def cap_address_space(extra_bytes: int) -> bool:
    """Let this process's address space grow by `extra_bytes` at most (Linux; elsewhere it is left alone, and False)."""
    try:
        import resource

        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        return False
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = used + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return True


def _apart(fn: Callable[..., T], rows: Iterator[tuple], what: str, timeout_s: float,
           should_stop: Callable[[], bool] | None, breaker: _Breaker[T],
           size: Callable[..., int] | None) -> Iterator[T]:
    """`fn(*row)` for each row, each in a kept worker (`_KeptParseWorker`): a row its worker dies on, or runs past its
    time on (`row_timeout_s`), gets `crashed(cause, *row)` (the pool's wording) and the worker is replaced for the
    next; a row `breaker` refuses is not run. Where no worker can start, the rows are done in this process, as
    before, and so is a row that cannot be pickled (the caller's own function, not the row's file). `Stopped` once
    `should_stop()` is true."""
    for row in rows:
        if breaker.refuses(row):
            yield breaker.refused(row)
            continue
        worker = _take_kept_worker(what)
        if worker is None:  # none can start: this row and the rest here, not asked again for each
            yield fn(*row)
            yield from (fn(*rest) for rest in rows)
            return
        try:
            status, value = worker.run(fn, row, row_timeout_s(timeout_s, None if size is None else size(*row)),
                                       should_stop)
        except BaseException:  # Ctrl-C, a stop: the worker may be mid-row (one that cannot be pickled is "unsendable")
            worker.stop()
            raise
        _give_back_kept_worker(worker)
        if status == "ok":
            yield value
        elif status == "error":
            raise value
        elif status == "exited":  # not a row's doing (see `_crash`): done here, as a pool's failure leaves it
            log.warning("%s in a worker process failed (%s); continuing in this process", what, value)
            yield fn(*row)
        elif status == "unsendable":  # the caller's own code, not the row's file (a chunk strategy given as a
            # function defined in a function, `add_chunk_strategy`): done here, as a pool that cannot take it leaves it
            log.debug("%s: a row could not be sent to a worker process (%r); done in this process", what, value)
            yield fn(*row)
        else:
            yield breaker.failed(str(value), row)


# How long one row alone may run in the kept worker (`row_timeout_s`): a file's chunks, measured on a loaded 2-core
# machine (load 2-3) at ~0.3 s a MB for code (4 MB of the public corpora's Go, JavaScript, Python or Ruby: 0.9-1.2
# s), and ~9 s a MB for the worst found, random punctuation (4 MB: 32-35 s as Python, C++ or TypeScript; all error
# recovery, and a chunk for every few lines). Given ~7x the worst a MB and a floor far above any small file's time,
# so that only a grammar that loops runs into it, never a file planted to be slow (each that did would count against
# its language's grammar, `BREAKER_ROWS`): a small file it loops on costs 10 s, not `WORKER_TIMEOUT_S` (a task's
# time, up to 64 files); a file of 2 MB or more gets the whole `WORKER_TIMEOUT_S`.
ROW_TIMEOUT_S = 10.0
ROW_TIMEOUT_S_PER_MB = 60.0


def row_timeout_s(timeout_s: float, size: int | None) -> float:
    """How long a row of `size` bytes may run alone in the kept worker: the map's `timeout_s` where its rows have no
    size (an embedding batch), else at most that, and `ROW_TIMEOUT_S` plus `ROW_TIMEOUT_S_PER_MB` a MB, in whole
    seconds (the cause names them)."""
    if size is None:
        return timeout_s
    return min(timeout_s, math.ceil(ROW_TIMEOUT_S + ROW_TIMEOUT_S_PER_MB * size / 1_000_000))


# How long a kept worker may take to be ready, and to import the module of a map's function (a spawned one imports
# Python and the engine first): none of it counts against a row's `timeout_s`.
START_S = 60.0
REAP_S = 5.0  # how long a killed kept worker may take to be reaped


class WorkerUnstarted(Exception):
    """No kept worker could start, saying why."""


class Unsendable(Exception):
    """The request could not be pickled (a function defined in a function): nothing was sent, the worker is kept."""


class Late(Exception):
    """The kept worker gave no answer within the request's time: it was stopped."""


class Ended(Exception):
    """The kept worker died, exited, or answered over the bound read back: it was stopped."""

    def __init__(self, exitcode: int | None) -> None:
        super().__init__(f"its worker process ended (exit code {exitcode})")
        self.exitcode = exitcode


class KeptWorker:
    """A worker process kept for requests, one at a time, each `answer(request)`'s bytes sent back, and this process's
    end of the pipe to it: the kept parse worker (`_KeptParseWorker`) and the strategy worker
    (`chunk.strategy_process`). Started on first use and reused for every request after; stopped on one it runs late
    on or dies on (its user then starts another). Should the parent die, it ends too: idle, it looks every `PARENT_POLL_S` whether it has been handed to
    another parent (its pipe alone would not tell: a forked worker holds a copy of the parent's end, as does any
    process the parent forked after it); running a request, an alarm (left to its default action, which ends the
    process even inside a call into C) goes off a little after the parent would have killed it. (`exit_with_parent`'s
    PR_SET_PDEATHSIG fires when the *thread* that started it ends, and a language server's threads come and go.)"""

    def __init__(self, context: multiprocessing.context.BaseContext, answer: Callable[[object], bytes], *,
                 start: Callable[[], object] | None = None, name: str, daemon: bool) -> None:
        """Started and ready (`start()` done in it first: imports, a memory cap), or `WorkerUnstarted`; its /proc comm
        (`ps`, `top`) is `name`'s first 15 bytes."""
        self.connection, child_end = context.Pipe()
        self.process: multiprocessing.process.BaseProcess = context.Process(  # type: ignore[attr-defined]
            target=_serve, args=(child_end, os.getpid(), start, answer), name=name, daemon=daemon)
        self.stopped = False  # killed and its pipe closed: it answers nothing more, reaped or not
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hasattr(signal, "pthread_sigmask") \
            else None  # a terminal's Ctrl-C is this process's to handle (see `submit`)
        try:
            self.process.start()
        except (OSError, RuntimeError, ValueError) as exc:
            raise WorkerUnstarted(f"its worker process could not start ({exc})") from exc
        finally:
            if held is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
            child_end.close()
        why = f"did not start within {START_S:g} s"
        try:
            ready = self.connection.poll(START_S) and self.connection.recv_bytes(5) == b"ready"
        except (EOFError, OSError):  # it ended before it was ready (or said something else)
            ready, why = False, "ended while starting"
        except BaseException:
            self.stop()
            raise
        if not ready:
            self.stop()
            raise WorkerUnstarted(f"its worker process {why} (exit code {self.process.exitcode})")

    def ask(self, request: object, timeout_s: float, should_stop: Callable[[], bool] | None = None,
            max_bytes: int | None = None) -> bytes:
        """The answer to `request` within `timeout_s` (`Late`) and `max_bytes` (`Ended`); `Stopped` once
        `should_stop()` is true, asked every `STOP_POLL_S`. Anything but an answer or `Unsendable` stops the worker
        (Ctrl-C too: the answer still on its way belongs to no later request)."""
        try:  # pickled first, apart: one that cannot be leaves the pipe clean
            sent = ForkingPickler.dumps((timeout_s, request))
        except Exception as exc:
            raise Unsendable(repr(exc)) from exc
        deadline = time.monotonic() + timeout_s
        try:
            self.connection.send_bytes(sent)
            while not self.connection.poll(timeout_s if should_stop is None
                                           else max(0.0, min(STOP_POLL_S, deadline - time.monotonic()))):
                if should_stop is not None and should_stop():
                    raise Stopped
                if time.monotonic() >= deadline:
                    raise Late(f"its worker process took longer than {timeout_s:g} s")
            return self.connection.recv_bytes(max_bytes)
        except (EOFError, OSError) as exc:  # it died (a signal, out of memory) or exited
            self.stop()
            raise Ended(self.process.exitcode) from exc
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.stopped = True
        self.process.kill()
        self.process.join(REAP_S)
        self.connection.close()


def _serve(connection: Connection, parent_pid: int, start: Callable[[], object] | None,
           answer: Callable[[object], bytes]) -> None:
    """A kept worker's loop: one request at a time, each `answer`ed. Ctrl-C in a terminal is the parent's
    to handle. SIGTERM (multiprocessing's end of a daemon worker as its parent exits, a terminal's or a supervisor's
    end of the process group) ends it as the default action does: a forked worker has the CLI's handler, which would
    raise here and print its traceback."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux"):  # named for `ps`/`top` (and the tests), as it shows the command otherwise
        name = multiprocessing.current_process().name.encode()[:15]
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name, 0, 0, 0)
    if start is not None:
        start()
    try:
        connection.send_bytes(b"ready")
    except OSError:  # the parent died while this worker started
        return
    while True:
        try:
            while not connection.poll(PARENT_POLL_S):
                if os.getppid() != parent_pid:
                    return
            timeout_s, request = connection.recv()
        except (EOFError, OSError):  # the parent closed its end, or died
            return
        signal.setitimer(signal.ITIMER_REAL, timeout_s + REAP_S)
        answered = answer(request)
        signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            connection.send_bytes(answered)
        except OSError:
            return


# Idle kept workers held for later rows: one a thread at a time (a save on the language server's writer thread, a
# graph build on a request's), so that one thread's file never waits on another's.
KEPT_IDLE = 2


class _KeptParseWorker(KeptWorker):
    """The kept parse worker (`KeptWorker`): the rows of small maps (`_apart`), one at a time; a save's re-chunk has
    ~0.4 s, far less than a spawned worker's start. Its address space is capped before its first row, once the row's
    module is imported (`_start_parse_worker`, `cap_parse_memory`): a row past it ends it (`_end_out_of_memory`)."""

    def __init__(self, context: multiprocessing.context.BaseContext) -> None:
        # Not a daemon: a daemonic process may start none, and a workspace strategy runs in a process of its own.
        # `stop_kept_workers` ends it at exit instead, before multiprocessing's own exit handler would wait for it.
        super().__init__(context, functools.partial(_parse_answer, _parse_memory_cap()), name="codeloupe-parse-worker",
                         daemon=False)
        self.imported: set[str] = set()  # the modules of the functions it was given
        self.forked = context.get_start_method() == "fork"  # a copy of this process as it was at the start

    def run(self, fn: Callable[..., T], row: tuple, timeout_s: float,
            should_stop: Callable[[], bool] | None) -> tuple[str, object]:
        """("ok", `fn(*row)`), ("error", what it raised), ("unsendable", why) where `fn` or `row` cannot be pickled
        (nothing sent, the worker kept), or, the worker then stopped: ("crashed", why) where it died by a signal or
        out of memory, or ran past `timeout_s` (the row's doing), ("exited", why) where it ended by itself."""
        try:
            if (failed := self.load(getattr(fn, "__module__", None) or "__main__")) is not None:
                return failed
            return ForkingPickler.loads(self.ask(("run", fn, row), timeout_s, should_stop))
        except Unsendable as exc:
            return "unsendable", exc
        except Late as exc:
            return "crashed", f"did not finish: {exc}"
        except Ended as exc:
            return ("exited", str(exc)) if (cause := _crash([self.process])) is None else ("crashed", cause)

    def load(self, module: str) -> tuple[str, object] | None:
        """None once `module` is imported in it (first, apart from any row: a spawned worker's import is no row's
        time), else why not, as `run` says it ("exited" where the worker ended: not a row's doing)."""
        if module in self.imported:
            return None
        try:
            status, value = ForkingPickler.loads(self.ask(("import", module, None), START_S))
        except (Late, Ended) as exc:
            return "exited", str(exc)
        if status != "ok":
            return status, value
        self.imported.add(module)
        return None


def _parse_answer(memory_bytes: int | None, request: object) -> bytes:
    """The kept parse worker's answer (status, value), pickled, to ("import", module, None) or ("run", fn, row)."""
    kind, target, row = request  # type: ignore[misc]
    if kind == "run" and not _memory_capped:
        cap_parse_memory(memory_bytes)
    try:
        answer: tuple[str, object] = ("ok", importlib.import_module(target) and None) if kind == "import" \
            else ("ok", target(*row))
    except Exception as exc:
        if isinstance(exc, MemoryError):
            _end_out_of_memory()
        answer = ("error", exc)
    try:
        return bytes(ForkingPickler.dumps(answer))
    except Exception as exc:  # an answer that does not pickle: its error does, as text
        return bytes(ForkingPickler.dumps(("error", RuntimeError(f"{answer[0]} that could not be sent back: {exc!r}"))))


_kept: list[_KeptParseWorker] = []  # idle, alive as last seen
_kept_lock = threading.Lock()
# Why the last kept worker failed to start, while none is to be tried again (`retry_kept_worker_start`): each small
# map would otherwise wait for a start that fails as long again.
_kept_unstarted: str | None = None


def _take_kept_worker(what: str) -> _KeptParseWorker | None:
    """An idle kept worker, or a new one; None where none can start (said once in the log: the rows are then done in
    this process, as before kept workers)."""
    global _kept_unstarted
    with _kept_lock:
        while _kept:
            worker = _kept.pop()
            if worker.process.is_alive():
                return worker
            worker.stop()
        if _kept_unstarted is not None:
            return None
    context = pool_context()
    if not may_start(context, what):
        return None
    try:
        worker = _KeptParseWorker(context)
    except WorkerUnstarted as exc:
        with _kept_lock:
            _kept_unstarted = str(exc)
        log.warning("%s in this process: no worker process could start (%s), so a grammar that crashes or never"
                    " finishes on a file takes this process with it", what, exc)
        return None
    with _kept_lock:
        _started.add(worker)
    _end_kept_workers_at_exit()
    return worker


# Every kept worker started and not yet let go, idle or running a row: ended at exit.
_started: weakref.WeakSet[_KeptParseWorker] = weakref.WeakSet()


@functools.cache
def _end_kept_workers_at_exit() -> None:
    """Once a process (atexit calls a function as often as it was registered), after multiprocessing's exit handler
    is registered, so run before it: that handler waits for every worker process not a daemon, such as a kept worker,
    which ends with its parent only."""
    atexit.register(_end_kept_workers)


def _end_kept_workers() -> None:
    """Each kept worker this process started, idle or not: one a thread still runs a row on at exit (a daemon thread,
    the one `start_kept_worker` starts) would hold the exit up for good."""
    with _kept_lock:
        started = list(_started)
        _kept.clear()
    for worker in started:
        if not worker.stopped:
            worker.stop()


def _give_back_kept_worker(worker: _KeptParseWorker) -> None:
    with _kept_lock:
        if not worker.stopped and len(_kept) < KEPT_IDLE:
            _kept.append(worker)
            return
    if not worker.stopped:
        worker.stop()


def start_kept_worker(modules: Sequence[str], what: str) -> None:
    """A kept worker started on a thread of its own, with `modules` imported, where none is idle: the next small map
    (a language server's first save after a first index whose files a pool parsed) then finds it ready rather than
    waiting 0.5-1 s for a spawned worker's start and imports. For a process that ends by `os._exit` (the language
    server): one that returned from its main while the thread starts the worker would wait at exit for a worker not
    yet among those its exit hook ends."""
    with _kept_lock:
        if _kept or _kept_unstarted is not None:
            return

    def start() -> None:
        worker = _take_kept_worker(what)
        if worker is None:
            return
        for module in modules:
            if worker.load(module) is not None:
                break
        _give_back_kept_worker(worker)

    threading.Thread(target=start, name="codeloupe-parse-worker-start", daemon=True).start()


def stop_kept_workers(forked_only: bool = False) -> None:
    """End this process's idle kept workers (they are otherwise kept for the rows after, and end with this process):
    at exit, and for tests, whose process outlives each test. `forked_only`: only the forked ones, each a copy of this
    process's state at its start (a test's patches, for the tests after it); a spawned one imported the engine anew,
    as the next would, only later (~0.5 s)."""
    with _kept_lock:
        idle = [worker for worker in _kept if worker.forked or not forked_only]
        _kept[:] = [worker for worker in _kept if worker not in idle]
    for worker in idle:
        worker.stop()


def retry_kept_worker_start() -> None:
    """Let the next small map try to start a kept worker again, where the last one failed to: at the start of an
    index run of the whole workspace."""
    global _kept_unstarted
    with _kept_lock:
        _kept_unstarted = None


class Stopped(Exception):
    """`should_stop` said stop while a result was awaited (`_first_result`, `KeptWorker.ask`)."""


def until(should_stop: Callable[[], bool], items: Iterator[T]) -> Iterator[T]:
    """`items` while `should_stop()` is false, asked before each one is drawn (a map's results: the caller closes
    the map once this ends early, which kills its workers' tasks in flight)."""
    while not should_stop():
        item = next(items, _END)
        if item is _END:
            return
        yield item


def _first_result(pending: deque[tuple[list[tuple], Future[list[T]]]], timeout_s: float,
                  should_stop: Callable[[], bool] | None = None) -> list[T]:
    """The oldest task's results, the task then taken off `pending`: a caller that closes the map at these results
    leaves nothing in flight. A task that fails stays on it, for this process to do it again. `Stopped` once
    `should_stop()` is true, asked every `STOP_POLL_S` of the wait."""
    future = pending[0][1]
    if should_stop is not None:
        deadline = time.monotonic() + timeout_s
        while not wait([future], min(STOP_POLL_S, max(0.0, deadline - time.monotonic()))).done:
            if should_stop():
                raise Stopped
            if time.monotonic() >= deadline:
                break  # `result` below raises TimeoutError
    result = future.result(0 if should_stop is not None else timeout_s)
    pending.popleft()
    return result


class _Breaker(Generic[T]):
    """A map's count of the rows that failed in their worker (`crashed`), by `kind` (a file's language), and the rows
    it no longer runs: those of a kind that failed `BREAKER_ROWS` times (see `map_in_workers`)."""

    def __init__(self, what: str, crashed: Callable[..., T] | None, kind: Callable[..., str | None] | None) -> None:
        self._what = what
        self._crashed = crashed
        self._kind = kind
        self._failures: Counter[str] = Counter()
        self._broken: set[str] = set()

    def failed(self, cause: str, row: tuple) -> T:
        """`crashed(cause, *row)`, counted against the row's kind."""
        assert self._crashed is not None
        kind = self._kind(*row) if self._kind is not None else None
        if kind is not None:
            self._failures[kind] += 1
            if self._failures[kind] == BREAKER_ROWS:
                self._broken.add(kind)
                log.warning("%s: %s crashed or did not finish on %d files in this run: its other files are not run",
                            self._what, kind, BREAKER_ROWS)
        return self._crashed(cause, *row)

    def refuses(self, row: tuple) -> bool:
        return bool(self._broken) and self._kind is not None and self._kind(*row) in self._broken

    def refused(self, row: tuple) -> T:
        """`crashed`'s result for a row it `refuses`, not run."""
        assert self._crashed is not None
        return self._crashed(f"{NOT_RUN} it crashed or did not finish on {BREAKER_ROWS} other files of its language"
                             " in this run", *row)


class _Meanwhile:
    """`map_in_workers`' other work: run once, its error kept for after the results (not taken for the pool's)."""

    def __init__(self, work: Callable[[], object] | None) -> None:
        self._work: Callable[[], object] | None = work
        self._error: Exception | None = None

    def run(self) -> None:
        work, self._work = self._work, None
        if work is not None:
            try:
                work()
            except Exception as exc:
                self._error = exc

    @property
    def failed(self) -> bool:
        return self._error is not None

    def raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error


def submit(pool: Executor, fn: Callable[..., T], *args: object) -> Future[T]:
    """`pool.submit(fn, *args)`, with Ctrl-C held back from any worker process the call starts.

    A terminal's Ctrl-C reaches every process of the foreground group: each worker raised KeyboardInterrupt
    and printed its traceback under the command's one-line "interrupted" (a spawned one even while importing,
    before any initialiser runs). A worker inherits this thread's blocked SIGINT, through exec too, and keeps it
    pending until `exit_with_parent` leaves it to its default action: the worker then ends without a word, and
    the parent, which gets the same Ctrl-C, handles it. This thread gets a SIGINT that came meanwhile once
    the call returns."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no process groups to share a Ctrl-C with
        return pool.submit(fn, *args)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return pool.submit(fn, *args)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def exit_with_parent(parent_pid: int) -> None:
    """Worker initialiser: end this worker when the process that started it dies, even by `kill -9`; and on
    Ctrl-C, quietly (see `submit`), unless its parent ignores Ctrl-C (a script's background job, `trap '' INT`):
    it inherited that, and the parent goes on with the work it hands to its workers.

    Nothing else would: an orphaned worker waits on its task queue forever (~70 MB each). Linux kills it
    through PR_SET_PDEATHSIG; elsewhere a daemon thread watches the parent pid."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
            if os.getppid() != parent_pid:  # the parent died before the signal was armed
                os._exit(1)
            return
    when_parent_changes(parent_pid, lambda: os._exit(1))


def process_running(pid: int) -> bool:
    """Whether a process of that id runs on this machine (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process holds that pid
        return True
    return True


def process_started(pid: int) -> int | None:
    """When the process of that id started, in clock ticks since boot (the 22nd field of /proc/PID/stat): what tells
    it from a later process given the same id once it has ended. None where it cannot be read (no /proc: not Linux;
    the process gone; /proc mounted with hidepid)."""
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[_STARTED])


def still_running(pid: int, started: int | None) -> bool:
    """Whether the process of that id that `process_started` saw start at `started` (None: it could not tell) still
    runs: not once it has ended, even unreaped (a zombie: `os.kill` still finds it until its parent waits for it),
    nor once its id is another process's (ids are reused)."""
    if not process_running(pid):
        return False
    fields = _stat_fields(pid)
    if fields is None:  # no /proc (or it ended just now: the next look says so)
        return True
    return fields[0] != b"Z" and started in (None, int(fields[_STARTED]))


_STARTED = 19  # the start time's index in `_stat_fields` (the 22nd field of /proc/PID/stat)


def _stat_fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat's fields from the third (the state) on, or None where it cannot be read. The second, the
    command's name in parentheses, may hold spaces and parentheses itself: the fields start after the last ")"."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat.rpartition(b")")[2].split()


def when_parent_changes(parent_pid: int, then: Callable[[], object]) -> None:
    """Call `then` on a daemon thread of its own once this process's parent is no longer `parent_pid`: it died, and
    this process was handed to init or a subreaper (which never has that id: it was running before)."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        then()

    threading.Thread(target=watch, name="codeloupe-parent-watch", daemon=True).start()


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """End a pool's worker processes now and shut the pool down: a stuck worker never returns by itself, and
    shutdown alone would wait for it."""
    # ProcessPoolExecutor has no public way to do this before Python 3.14 (kill_workers).
    for process in list((pool._processes or {}).values()):
        process.kill()
    # A worker killed while it wrote a result (a task of many files' chunks: hundreds of KB) leaves part of it in
    # the results pipe, and the pool's thread reading it waits for the rest for good, as this process holds the
    # pipe's write end too: the shutdown below never returned (a server's exit then left the pool to the resource
    # tracker). With that end closed the read ends at the part, the pool is broken, and the shutdown returns. Only
    # a worker the pool starts needs it, and a pool being killed starts none.
    results = getattr(pool, "_result_queue", None)
    if results is not None:
        results._writer.close()
    pool.shutdown(wait=True, cancel_futures=True)


# Native libraries whose thread pools may hold a lock at the moment of a fork (the hang seen: a chunking worker
# forked from a process running onnxruntime sessions). Once one is loaded, workers are spawned.
_NATIVE_POOLS = ("onnxruntime", "tokenizers")


def pool_context() -> multiprocessing.context.BaseContext:
    # fork is cheap and needs no importable __main__ (spawn re-runs a script's top level in every worker: a
    # script without a main guard would index again in each), but the child gets only the forking thread: a
    # lock any other thread held at that moment stays held in the child for good. threading.active_count()
    # sees only Python threads, so a loaded onnxruntime (or tokenizers) counts as threads too. OpenBLAS's
    # idle pool, which numpy starts on import, registers fork handlers and is no reason to spawn (the kernel's
    # thread count would make every process spawn, and every worker pay ~0.5 s of imports).
    native = any(name in sys.modules for name in _NATIVE_POOLS)
    return multiprocessing.get_context("fork" if threading.active_count() == 1 and not native else "spawn")


def may_start(context: multiprocessing.context.BaseContext, what: str) -> bool:
    """Whether worker processes of `context` may start here. A spawned worker first imports this process's main
    module again (as `__mp_main__`), top level and all: a script that does its work without an `if __name__ ==
    "__main__"` guard would do it again in every worker (print, write, index, search) before the worker took
    a task, and the caller would wait on workers busy with that. Such a script's work stays in this process."""
    if context.get_start_method() == "fork" or _main_imports_cleanly():
        return True
    log.info("%s in this process: worker processes would run this script again (it has no main guard)", what)
    return False


@functools.cache
def _main_imports_cleanly() -> bool:
    """Whether importing the main module again runs nothing but its definitions. True where a spawned worker
    does not import it (no main file: an interactive session, `python -c`; a package's `__main__`, which
    multiprocessing leaves alone) or where its source guards its work with `if __name__ == "__main__"` (the
    console scripts, the language server, pytest); False for a main file that cannot be read or parsed."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if name is not None:
        if name == "__main__" or name.endswith(".__main__"):
            return True
        origin = getattr(spec, "origin", None)
    else:
        origin = getattr(main, "__file__", None)
    if not origin:
        return True
    try:
        with open(origin, "rb") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.If) and _is_main_test(node.test) for node in tree.body)


def _is_main_test(test: ast.expr) -> bool:
    """`__name__ == "__main__"`, either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(a, ast.Name) and a.id == "__name__" and isinstance(b, ast.Constant) and b.value == "__main__"
               for a, b in (sides, sides[::-1]))
