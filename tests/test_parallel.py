"""Worker pools never fork beside native threads, and stuck workers are killed and their work done in process.

Each case runs in its own interpreter: what it checks (the threads of a process, its child processes) must not
see the test runner's, and a regression would hang that interpreter, not the suite (it is given a deadline).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from processes import alive, children_of

DEADLINE_S = 90  # a regression waits forever; the cases themselves take a few seconds

# Every case can name its live worker processes with the suite's own /proc helpers.
PRELUDE = f"import os, sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\nfrom processes import alive, children_of\n"


def run_case(tmp_path: Path, script: str) -> list[str]:
    path = tmp_path / "case.py"  # a file, not -c: spawned workers import the functions from it
    path.write_text(PRELUDE + textwrap.dedent(script))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=DEADLINE_S,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_process_running_only_native_threads_is_not_forked(tmp_path: Path) -> None:
    # onnxruntime's thread pool is native: Python's thread count stays 1 while a fork could copy a held lock.
    out = run_case(tmp_path, """
        import threading

        import onnxruntime as ort

        from codeloupe.embed.local import shipped_model_path
        from codeloupe.parallel import pool_context

        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        session = ort.InferenceSession(str(shipped_model_path()), options, providers=["CPUExecutionProvider"])
        print(threading.active_count(), pool_context().get_start_method())
    """)
    assert out == ["1", "spawn"]


def test_numpy_s_idle_blas_threads_do_not_stop_a_fork(tmp_path: Path) -> None:
    # Spawned workers re-run a script's top level (a script without a main guard indexed once per worker) and
    # pay the imports: OpenBLAS's pool, started by importing numpy, registers fork handlers and is no reason.
    out = run_case(tmp_path, """
        import numpy as np

        import codeloupe.api  # noqa: F401
        from codeloupe.parallel import pool_context

        np.ones((256, 256)) @ np.ones((256, 256))
        print(len(os.listdir("/proc/self/task")) > 1, pool_context().get_start_method())
    """)
    assert out[1] == "fork"


@pytest.mark.parametrize("crashed", ["None", "lambda cause, parent, n: cause"])
def test_stuck_chunking_workers_are_killed_and_the_work_is_done_without_them(tmp_path: Path, crashed: str) -> None:
    # Workers stuck before any gave a result are the workers' doing, not a row's: the rest is done here; but a map
    # given `crashed` (rows that may crash or never end: a grammar that loops on the first file of every task, which
    # hung this process for good) does it in a kept worker process, a row at a time.
    out = run_case(tmp_path, f"""
        import multiprocessing
        import time

        from codeloupe import parallel

        def doubled_unless_in_a_pool(parent: int, n: int) -> tuple[int, bool]:
            if os.getpid() != parent and multiprocessing.current_process().name != "codeloupe-parse-worker":
                time.sleep(600)  # what a worker blocked on a lock it inherited does
            return 2 * n, os.getpid() == parent
        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            rows = [(os.getpid(), n) for n in range(parallel.POOL_MIN_ITEMS)]
            done = list(parallel.map_in_workers(doubled_unless_in_a_pool, iter(rows), len(rows), what="test",
                                                timeout_s=3, crashed={crashed}))
            parallel.stop_kept_workers()
            print(done == [(2 * n, ({crashed}) is None) for n in range(len(rows))],
                  [pid for pid in children_of(os.getpid()) if alive(pid)])
    """)
    assert out == ["True", "[]"]


def test_small_rows_go_to_a_worker_together_and_come_back_in_order(tmp_path: Path) -> None:
    # A task a file: 20,000 empty files spent 6.5 s handing files to the workers for 1.1 s of chunking.
    out = run_case(tmp_path, """
        from codeloupe import parallel

        def tagged(n: int, size: int) -> tuple[int, int]:
            return n, os.getpid()
        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            rows = [(n, 0) for n in range(4 * parallel.TASK_ROWS)]
            done = list(parallel.map_in_workers(tagged, iter(rows), len(rows), what="test", size=lambda _, s: s))
            blocks = [{pid for _, pid in done[k:k + parallel.TASK_ROWS]} for k in range(0, len(done), parallel.TASK_ROWS)]
            print([n for n, _ in done] == list(range(len(rows))), [len(pids) for pids in blocks],
                  all(pid != os.getpid() for _, pid in done))
    """)
    assert out == ["True", "[1,", "1,", "1,", "1]", "True"]


def test_a_pool_that_fails_while_tasks_are_being_handed_out_loses_no_row(tmp_path: Path) -> None:
    # A task is handed over once the next row would overflow it, that row drawn already: when the workers died
    # (a worker killed for its memory) the rows done in this process left it out, and every later result was
    # paired with the row before its own (a file indexed with its neighbour's chunks).
    out = run_case(tmp_path, """
        from codeloupe import parallel

        def doubled_unless_in_a_worker(parent: int, n: int, size: int) -> int:
            if os.getpid() != parent:
                os._exit(1)  # what a worker the kernel killed does
            return 2 * n
        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            third = parallel.TASK_BYTES // 3  # three rows a task, each task handed over when a fourth is drawn
            rows = [(os.getpid(), n, third) for n in range(3 * parallel.IN_FLIGHT_PER_WORKER * 2 + 30)]
            done = list(parallel.map_in_workers(doubled_unless_in_a_worker, iter(rows), len(rows), what="test",
                                                size=lambda _, __, size: size))
            print(done == [2 * n for n in range(len(rows))])
    """)
    assert out == ["True"]


# How a row can fail in its worker, as a grammar fails on a file: the rows it fails on, what it does there, and
# the `timeout_s` given (None: the default).
FAILURES = {
    # SIGSEGV (tree-sitter-bash's scanner on `{` + a character past U+FFFF): two rows in one task, one in another.
    "crash": ({70, 71, 200}, "os.kill(os.getpid(), signal.SIGSEGV)", None),
    # A loop in C that nothing but a kill stops (tree-sitter-cobol on "x\n"): a row in each of two tasks.
    "hang": ({70, 200}, "time.sleep(600)", 5),
}


@pytest.mark.parametrize("start", ["fork", "spawn"])
@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_row_that_fails_in_its_worker_is_never_run_in_this_process_and_the_others_keep_their_results(
        tmp_path: Path, failure: str, start: str) -> None:
    # A worker killed on a row broke the pool, and one that never ended was killed when stuck: either way every row
    # in flight was done in this process, which then crashed or hung for good on the same file (the language
    # server, `index`, `serve`). The rows in flight now go to a worker of their own, in turn, and the one it dies
    # on, or that again takes longer than `timeout_s`, gets `crashed`'s result, never run here. Spawned workers
    # import the engine before their first result (seconds on a loaded machine): a first task late for that is the
    # pool's, not a row's, so they are given longer.
    failing, action, timeout_s = FAILURES[failure]
    if timeout_s is not None and start == "spawn":
        timeout_s *= 2
    cause = ("crashed: its worker process was killed by SIGSEGV" if timeout_s is None
             else f"did not finish: its worker process took longer than {timeout_s} s")
    out = run_case(tmp_path, f"""
        import multiprocessing
        import signal
        import time

        from codeloupe import parallel

        FAILING = {failing!r}

        def doubled_in_a_worker(parent: int, n: int, size: int) -> object:
            if os.getpid() == parent:
                return "run in the parent"
            if n in FAILING:
                {action}
            return 2 * n

        def crashed(cause: str, parent: int, n: int, size: int) -> str:
            return f"{{cause}}:{{n}}"

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            parallel.pool_context = lambda: multiprocessing.get_context({start!r})
            rows = [(os.getpid(), n, 100) for n in range(parallel.POOL_MIN_ITEMS + 100)]
            timeout = {{}} if {timeout_s!r} is None else {{"timeout_s": {timeout_s!r}}}
            done = list(parallel.map_in_workers(doubled_in_a_worker, iter(rows), len(rows), what="test",
                                                size=lambda *row: row[-1], crashed=crashed, **timeout))
            parallel.stop_kept_workers()  # (kept for the maps after)
            print(done == [f"{cause}:{{n}}" if n in FAILING else 2 * n for n in range(len(rows))],
                  [pid for pid in children_of(os.getpid()) if alive(pid)])
            print("|".join(result for result in done if isinstance(result, str)))
    """)
    assert out[:2] == ["True", "[]"], out
    assert " ".join(out[2:]) == "|".join(f"{cause}:{n}" for n in sorted(failing)), out


def test_once_rows_of_a_kind_failed_twice_in_their_workers_the_others_of_that_kind_are_not_run(tmp_path: Path) -> None:
    # Every row a grammar crashed or looped on cost a worker (and, looping, `timeout_s`): a repository that planted
    # thousands of such files held a core for hours. Two crash here in a task (then alone); the others of their kind,
    # in the tasks in flight and in those handed out after, get `crashed`'s result without a worker.
    out = run_case(tmp_path, """
        import signal

        from codeloupe import parallel

        BAD = {70, 71, 72, 200, 250, 290}
        CRASHING = {70, 71, 72, 200, 250}  # 290: bad kind, but would run

        def doubled_in_a_worker(parent: int, n: int) -> object:
            if os.getpid() == parent:
                return "run in the parent"
            if n in CRASHING:
                os.kill(os.getpid(), signal.SIGSEGV)
            return 2 * n

        def crashed(cause: str, parent: int, n: int) -> str:
            return f"{n}:{cause}"

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            rows = [(os.getpid(), n) for n in range(parallel.POOL_MIN_ITEMS + 100)]
            done = list(parallel.map_in_workers(doubled_in_a_worker, iter(rows), len(rows), what="test",
                                                size=lambda *_: 1000, crashed=crashed,
                                                kind=lambda _, n: "bad" if n in BAD else "good"))
            parallel.stop_kept_workers()  # (kept for the maps after)
            print(done[:70] + done[73:200] == [2 * n for n in [*range(70), *range(73, 200)]],
                  [pid for pid in children_of(os.getpid()) if alive(pid)])
            print("|".join(result for result in done if isinstance(result, str)))
    """)
    assert out[:2] == ["True", "[]"], out
    crash = "crashed: its worker process was killed by SIGSEGV"
    not_run = "was not run: it crashed or did not finish on 2 other files of its language in this run"
    assert " ".join(out[2:]).split("|") == [f"70:{crash}", f"71:{crash}", *(f"{n}:{not_run}" for n in (72, 200, 250,
                                                                                                            290))]


def test_a_small_row_that_never_ends_alone_in_its_worker_costs_its_own_time_not_a_task_s(tmp_path: Path) -> None:
    # A row run alone (a save's file, a small workspace's, a failed task's suspects) was given the whole timeout of a
    # task of up to 64 files (120 s): each file a grammar looped on held a core that long. It is given a row's time,
    # by its size (here shortened): the map's `timeout_s`, the default, is never reached.
    out = run_case(tmp_path, """
        import time

        from codeloupe import parallel

        def doubled_unless_one(n: int, size: int) -> int:
            if n == 1:
                time.sleep(600)
            return 2 * n

        def crashed(cause: str, n: int, size: int) -> str:
            return cause

        if __name__ == "__main__":
            parallel.ROW_TIMEOUT_S, parallel.ROW_TIMEOUT_S_PER_MB = 2, 1_000_000
            rows = [(0, 10), (1, 2), (2, 10)]  # 2 bytes: 2 s and 2 s a MB of them, 4 s in whole seconds
            done = list(parallel.map_in_workers(doubled_unless_one, iter(rows), len(rows), what="test",
                                                size=lambda _, size: size, crashed=crashed))
            parallel.stop_kept_workers()
            print("|".join(map(str, done)))
    """)
    assert " ".join(out) == "0|did not finish: its worker process took longer than 4 s|4"


def test_a_worker_that_exits_rather_than_crashes_leaves_its_rows_to_this_process(tmp_path: Path) -> None:
    # A worker that could not start (or exited by itself) says nothing about its rows: they are not taken for
    # crashing ones (every file chunked without its grammar), but done here, as before.
    out = run_case(tmp_path, """
        from codeloupe import parallel

        def doubled_unless_in_a_worker(parent: int, n: int) -> int:
            if os.getpid() != parent:
                os._exit(1)
            return 2 * n

        def crashed(cause: str, parent: int, n: int) -> str:
            return cause

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            rows = [(os.getpid(), n) for n in range(parallel.POOL_MIN_ITEMS)]
            done = list(parallel.map_in_workers(doubled_unless_in_a_worker, iter(rows), len(rows), what="test",
                                                crashed=crashed))
            print(done == [2 * n for n in range(len(rows))])
    """)
    assert out == ["True"]


def test_a_row_that_cannot_be_sent_to_a_worker_is_done_here_and_the_kept_worker_kept(tmp_path: Path) -> None:
    # The caller's own function may not pickle (a chunk strategy defined in a function, `add_chunk_strategy`): a few
    # rows' map failed for it ("Can't pickle local object"), where before the kept worker they were done here, as a
    # pool that cannot take them leaves them. Such a row is done here, and the next map's rows go to the worker.
    out = run_case(tmp_path, """
        from codeloupe import parallel

        def where(parent: int, n: int) -> str:
            return f"{n}:{'worker' if os.getpid() != parent else 'here'}"

        def crashed(cause: str, parent: int, n: int) -> str:
            return cause

        if __name__ == "__main__":
            local = lambda parent, n: where(parent, n)  # noqa: E731 (defined nowhere to import it from)
            done = list(parallel.map_in_workers(local, iter([(os.getpid(), 0)]), 1, what="test", crashed=crashed))
            done += parallel.map_in_workers(where, iter([(os.getpid(), 1)]), 1, what="test", crashed=crashed)
            parallel.stop_kept_workers()
            print("|".join(done))
    """)
    assert out == ["0:here|1:worker"]


def test_stopping_the_forked_kept_workers_keeps_a_spawned_one(tmp_path: Path) -> None:
    # The tests' own process ends its forked kept worker after each test (a copy of the process as that test had it,
    # its patches too) and keeps a spawned one, which imported the engine anew and takes ~0.5 s to start (conftest).
    out = run_case(tmp_path, """
        import multiprocessing

        from codeloupe import parallel

        def worker_pid(n: int) -> int:
            return os.getpid()

        def kept_worker(method: str) -> int:
            parallel.pool_context = lambda: multiprocessing.get_context(method)
            [pid] = parallel.map_in_workers(worker_pid, iter([(0,)]), 1, what="test", crashed=lambda cause, n: -1)
            return pid

        if __name__ == "__main__":
            forked = kept_worker("fork")
            parallel.stop_kept_workers(forked_only=True)
            print(alive(forked))
            spawned = kept_worker("spawn")
            parallel.stop_kept_workers(forked_only=True)
            print(alive(spawned), kept_worker("spawn") == spawned)
            parallel.stop_kept_workers()
            print(alive(spawned), [pid for pid in children_of(os.getpid()) if alive(pid)])
    """)
    assert out == ["False", "True", "True", "False", "[]"], out


def test_a_process_leaving_while_its_kept_worker_runs_a_row_ends_it_and_exits(tmp_path: Path) -> None:
    # A kept worker is no daemon (its rows may start a strategy worker), so multiprocessing's exit handler waits for
    # it; the exit hook ended only the idle ones, and one a thread was running a row on (a daemon thread, the language
    # server's start of a worker for its saves) held the exit up for that row's time (120 s for a large file).
    out = run_case(tmp_path, """
        import threading
        import time
        from pathlib import Path

        from codeloupe import parallel

        def slow(started: str) -> int:
            Path(started).write_text(str(os.getpid()))
            time.sleep(1000)
            return 0

        if __name__ == "__main__":
            started = Path("started")
            rows = iter([(str(started.resolve()),)])
            threading.Thread(target=lambda: list(parallel.map_in_workers(
                slow, rows, 1, what="test", size=lambda _: 4_000_000, crashed=lambda cause, _: -1)),
                daemon=True).start()
            while not started.exists() or not started.read_text():
                time.sleep(0.05)
            print(started.read_text())
    """)
    deadline = time.monotonic() + 30
    while alive(int(out[0])):
        assert time.monotonic() < deadline, "the kept worker outlived its process"
        time.sleep(0.05)


def test_a_task_holds_rows_up_to_its_bytes_and_a_larger_row_alone() -> None:
    from codeloupe.parallel import TASK_BYTES, TASK_ROWS, _tasks

    third = TASK_BYTES // 3
    rows = [(third,), (third,), (third,), (third,), (2 * TASK_BYTES,), (1,)]
    assert [len(task) for task in _tasks(iter(rows), lambda s: s, [])] == [3, 1, 1, 1]
    assert [len(task) for task in _tasks(iter([(0,)] * (TASK_ROWS + 1)), lambda s: s, [])] == [TASK_ROWS, 1]
    assert [len(task) for task in _tasks(iter([(0,)] * 3), None, [])] == [1, 1, 1]  # no sizes: a row a task


def test_a_stop_while_waiting_for_a_result_ends_the_map_and_kills_its_workers(tmp_path: Path) -> None:
    # A caller that asks should_stop between results (the graph's facts of a folder closing) waited for the first
    # one, seconds while spawned workers start on a loaded machine; the map now asks it while it waits, ends with
    # no result, the work not done in this process, and its workers killed.
    out = run_case(tmp_path, """
        import time
        from pathlib import Path

        from codeloupe import parallel

        def blocked(parent: int, n: int) -> int:
            if os.getpid() != parent:
                Path(f"started-{os.getpid()}").touch()
                time.sleep(600)
            return n

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            rows = [(os.getpid(), n) for n in range(parallel.POOL_MIN_ITEMS)]
            started = lambda: any(name.startswith("started-") for name in os.listdir("."))
            done = list(parallel.map_in_workers(blocked, iter(rows), len(rows), what="test", should_stop=started))
            print(done, [pid for pid in children_of(os.getpid()) if alive(pid)])
    """)
    assert out == ["[]", "[]"]

def test_killing_workers_returns_when_one_was_killed_midway_through_writing_a_result(tmp_path: Path) -> None:
    # A task of many files' chunks is a result of hundreds of KB: a worker killed while writing it (a stop, a folder
    # closing mid-index) left part of it in the results pipe, and the pool's thread reading it waited for the rest
    # for good, so `kill_workers` never returned (a server's exit then left the pool to the resource tracker:
    # "leaked semaphore objects"). The worker here writes part of a result by hand, then is killed.
    out = run_case(tmp_path, """
        import multiprocessing, struct, time
        from concurrent.futures import ProcessPoolExecutor
        from pathlib import Path

        from codeloupe import parallel

        def half_written(results_fd: int) -> None:
            os.write(results_fd, struct.pack("!i", 1000) + b"x" * 10)  # a frame's header and its first bytes
            Path("written").touch()
            time.sleep(600)

        if __name__ == "__main__":
            pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
            pool.submit(half_written, pool._result_queue._writer.fileno())
            while not Path("written").exists():
                time.sleep(0.01)
            parallel.kill_workers(pool)
            print("returned", [pid for pid in children_of(os.getpid()) if alive(pid)])
    """)
    assert out == ["returned", "[]"]


def test_stuck_embedding_workers_are_killed_and_the_caller_embeds_itself(tmp_path: Path) -> None:
    # Each worker hashes the model file before loading it; a named pipe nobody writes blocks that for good.
    out = run_case(tmp_path, """
        import numpy as np

        from codeloupe.embed.workers import WorkerPool
        if __name__ == "__main__":
            os.mkfifo("model.onnx")
            pool = WorkerPool("model.onnx", "0" * 64, "last_hidden_state", workers=2, timeout_s=3)
            feed = {"input_ids": np.ones((1, 4), np.int64), "attention_mask": np.ones((1, 4), np.int64)}
            print(pool.run([feed, feed]), pool.broken, [pid for pid in children_of(os.getpid()) if alive(pid)])
    """)
    assert out == ["None", "True", "[]"]


def test_other_work_runs_while_the_workers_work_and_its_error_comes_after_the_results(tmp_path: Path) -> None:
    # `meanwhile` runs in the caller once every row is handed out: the workers are busy with them meanwhile (a
    # row waits for the caller's mark), and every result still comes, in order, before the caller's error.
    out = run_case(tmp_path, """
        import time
        from pathlib import Path

        from codeloupe import parallel

        MARK = Path("meanwhile-ran")

        def waits_for_the_mark(n):
            deadline = time.monotonic() + 30
            while not MARK.exists():
                assert time.monotonic() < deadline, "the other work never ran while the workers waited"
                time.sleep(0.01)
            return n, os.getpid()

        def other_work():
            assert children_of(os.getpid()), "no worker was running"
            MARK.touch()
            raise ValueError("the other work failed")

        if __name__ == "__main__":
            rows = [(n,) for n in range(6)]
            got = []
            try:
                for result in parallel.map_in_workers(waits_for_the_mark, rows, len(rows), what="test",
                                                      min_items=2, meanwhile=other_work):
                    got.append(result)
            except ValueError as exc:
                print(str(exc).replace(" ", "_"))
            # Raised in place of the last result (a caller that stops there gets it: see the next test).
            print([n for n, _ in got] == list(range(5)), all(pid != os.getpid() for _, pid in got))
            MARK.unlink()
            ran = []
            print(list(parallel.map_in_workers(abs, [(-1,), (-2,)], 2, what="test", meanwhile=lambda: ran.append(1))),
                  ran)
    """)
    assert out == ["the_other_work_failed", "True", "True", "[1,", "2]", "[1]"]


def test_the_other_work_s_error_reaches_a_caller_that_stops_at_the_last_result(tmp_path: Path) -> None:
    # `zip(rows, map_in_workers(...))`, or `next` once a row (the kept term counts' parts), never asks for a result
    # after the last: an error of `meanwhile` raised after the last result was lost, the work it stood for missing
    # without a word. In worker processes and in this one, it now comes in place of the last result.
    out = run_case(tmp_path, """
        from codeloupe import parallel

        def other_work():
            raise ValueError("the_other_work_failed")

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            rows = [(-n,) for n in range(6)]
            for min_items in (2, len(rows) + 1):  # in workers, then in this process
                got = []
                try:
                    for _, result in zip(rows, parallel.map_in_workers(abs, rows, len(rows), what="test",
                                                                       min_items=min_items, meanwhile=other_work)):
                        got.append(result)
                except ValueError as exc:
                    print(exc, got)
                else:
                    print("lost", got)
    """)
    assert out == ["the_other_work_failed", "[0,", "1,", "2,", "3,", "4]"] * 2


def test_a_script_without_a_main_guard_is_not_run_again_by_spawned_workers(tmp_path: Path) -> None:
    # With onnxruntime loaded workers are spawned, and a spawned worker imports the main script again: this one,
    # unguarded, would print again (and start its own pool) in every worker. Its work stays in this process.
    out = run_case(tmp_path, """
        import onnxruntime  # noqa: F401

        from codeloupe import parallel
        from codeloupe.embed.workers import WorkerPool

        os.cpu_count = lambda: 2
        print("top-level")
        n = parallel.POOL_MIN_ITEMS
        done = list(parallel.map_in_workers(os.getpid, [()] * n, n, what="test"))
        print(parallel.pool_context().get_start_method(), set(done) == {os.getpid()},
              WorkerPool("model.onnx", "0" * 64, "out", workers=2).run([{}]),
              [pid for pid in children_of(os.getpid()) if alive(pid)])
    """)
    assert out == ["top-level", "spawn", "True", "None", "[]"]


def test_a_guarded_script_still_gets_spawned_workers(tmp_path: Path) -> None:
    out = run_case(tmp_path, """
        import onnxruntime  # noqa: F401

        from codeloupe import parallel

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            print("top-level")
            n = parallel.POOL_MIN_ITEMS
            done = list(parallel.map_in_workers(os.getpid, [()] * n, n, what="test"))
            print(parallel.pool_context().get_start_method(), os.getpid() not in set(done))
    """)
    assert out == ["top-level", "spawn", "True"]


def test_a_caller_that_stops_reading_is_let_go_even_when_the_pool_fails_on_its_way_down(tmp_path: Path) -> None:
    # An index run that meets a full disk stops reading the prepared files: closing the generator shuts the pool
    # down, and a pool failing then (a worker's result half sent) must not turn into work done in this process,
    # which a closed generator cannot yield ("generator ignored GeneratorExit", seen in CI's full-disk test).
    out = run_case(tmp_path, """
        from concurrent.futures import ProcessPoolExecutor

        from codeloupe import parallel

        REAL_SHUTDOWN = ProcessPoolExecutor.shutdown

        def failing_shutdown(self, *args, **kwargs):
            REAL_SHUTDOWN(self, *args, **kwargs)  # the workers really end; then the pool reports a failure
            raise OSError("a worker's result was cut short")

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            ProcessPoolExecutor.shutdown = failing_shutdown
            n = parallel.POOL_MIN_ITEMS
            results = parallel.map_in_workers(abs, [(-i,) for i in range(n)], n, what="test")
            first = next(results)
            results.close()
            print(first, [pid for pid in children_of(os.getpid()) if alive(pid)])
    """)
    assert out == ["0", "[]"]


def test_a_caller_that_read_every_result_lets_the_workers_exit_and_one_that_stopped_kills_them(tmp_path: Path) -> None:
    # `zip(files, map_in_workers(...))` (an index run, the graph's facts, the kept term counts) stops on its other
    # input and closes the map at its last result: nothing is in flight, and the workers end as after a map read to
    # its end, running their exit handlers (here a marker file each; a killed worker writes none), where each
    # normal run killed them. A caller that stops with tasks in flight (a served workspace closing) still kills
    # them rather than wait for them.
    out = run_case(tmp_path, """
        import multiprocessing.util
        import time
        from pathlib import Path

        from codeloupe import parallel

        def marked(folder: str, seconds: float) -> int:
            multiprocessing.util.Finalize(None, Path(folder, str(os.getpid())).touch, exitpriority=0)
            time.sleep(seconds)
            return os.getpid()

        def exited_cleanly(seconds: float, read: int) -> list[bool]:
            # Whether each worker that gave one of the first `read` results ran its exit handlers.
            folder = Path(f"marks-{seconds}")
            folder.mkdir()
            n = parallel.POOL_MIN_ITEMS
            pids = {pid for _, pid in zip(range(read), parallel.map_in_workers(
                marked, [(str(folder), seconds)] * n, n, what="test"))}
            assert os.getpid() not in pids  # done by workers
            return [str(pid) in os.listdir(folder) for pid in sorted(pids)]

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            n = parallel.POOL_MIN_ITEMS
            print(all(exited_cleanly(0, n)), any(exited_cleanly(0.05, 5)), children_of(os.getpid()))
    """)
    assert out == ["True", "False", "[]"]


@contextlib.contextmanager
def _four_rows_done(tmp_path: Path, start: str) -> Iterator[subprocess.Popen]:
    """`case.py` started in a session of its own (a terminal's foreground group), once it said its workers' start
    method and they did rows 0-3; the group killed if it still runs at the end."""
    case = subprocess.Popen([sys.executable, str(tmp_path / "case.py")], cwd=tmp_path, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert case.stdout is not None and case.stderr is not None
        assert case.stdout.readline().split() == [start], case.stderr.read()
        done = sorted(case.stdout.readline().split()[-1] for _ in range(4))
        assert done == ["0", "1", "2", "3"]
        yield case
    finally:
        if case.poll() is None:
            os.killpg(case.pid, signal.SIGKILL)
            case.wait()


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_ctrl_c_at_a_terminal_ends_idle_workers_without_a_traceback_each(tmp_path: Path, start: str) -> None:
    # A terminal's Ctrl-C reaches the whole foreground process group, the workers too: each idle worker printed
    # `Process ForkProcess-1:` and a KeyboardInterrupt traceback under the command's own "interrupted" (a
    # spawned one also while it was still importing). The workers here have done their rows and wait for more
    # while the parent waits on its input, as `codeloupe index` waits on a slow disk.
    (tmp_path / "case.py").write_text(PRELUDE + textwrap.dedent(f"""
        import signal

        if {start == "spawn"}:
            import onnxruntime  # noqa: F401  (a loaded native pool: the workers are spawned)

        from codeloupe.parallel import POOL_MIN_ITEMS, map_in_workers, pool_context

        def work(n: int) -> int:
            os.write(1, f"done {{n}}\\n".encode())
            return n

        def rows():
            yield from ((n,) for n in range(4))
            sys.stdin.readline()

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            print(pool_context().get_start_method(), flush=True)
            try:
                list(map_in_workers(work, rows(), POOL_MIN_ITEMS, what="test"))
            except KeyboardInterrupt:
                print("interrupted", flush=True)
    """))
    with _four_rows_done(tmp_path, start) as case:
        workers = [pid for pid in children_of(case.pid) if alive(pid)]
        os.killpg(case.pid, signal.SIGINT)  # what the terminal does
        out, err = case.communicate(timeout=DEADLINE_S)
    assert out.split() == ["interrupted"]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert workers and not any(alive(pid) for pid in workers)


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_process_that_ignores_ctrl_c_keeps_its_workers_through_one(tmp_path: Path, start: str) -> None:
    # A script's background job (`codeloupe index . &`) or a `trap '' INT` ignores Ctrl-C, and so did its workers,
    # which inherit that: the workers were set to die of it all the same, and the rest of the work went on in
    # this one process under a warning. Here the rows after the Ctrl-C are computed where the rows before were.
    (tmp_path / "case.py").write_text(PRELUDE + textwrap.dedent(f"""
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the shell leaves it for a background job

        if {start == "spawn"}:
            import onnxruntime  # noqa: F401  (a loaded native pool: the workers are spawned)

        from codeloupe.parallel import POOL_MIN_ITEMS, map_in_workers, pool_context

        def work(n: int) -> int:
            if n < 4:
                os.write(1, f"done {{n}}\\n".encode())
            return os.getpid()

        def rows():
            yield from ((n,) for n in range(4))
            sys.stdin.readline()  # the Ctrl-C came meanwhile
            yield from ((n,) for n in range(4, POOL_MIN_ITEMS))

        if __name__ == "__main__":
            os.cpu_count = lambda: 2
            print(pool_context().get_start_method(), flush=True)
            pids = list(map_in_workers(work, rows(), POOL_MIN_ITEMS, what="test"))
            print("here" if os.getpid() in pids else "in-workers", flush=True)
    """))
    with _four_rows_done(tmp_path, start) as case:
        os.killpg(case.pid, signal.SIGINT)  # what the terminal does; kill() returns once it is pending in each
        out, err = case.communicate("\n", timeout=DEADLINE_S)
    assert out.split() == ["in-workers"], err
    assert case.returncode == 0 and "failed" not in err, err


def test_a_process_is_still_running_only_while_it_is_the_one_seen_to_start(tmp_path: Path) -> None:
    """What a server watching its editor's process (LSP's processId) asks: not only whether a process of that id
    exists (`os.kill(pid, 0)`), which a zombie and a later process given the same id both pass."""
    from codeloupe.parallel import process_running, process_started, still_running

    child = subprocess.Popen(["sleep", "1000"])
    try:
        started = process_started(child.pid)
        assert started is not None and still_running(child.pid, started) and still_running(child.pid, None)
        assert not still_running(child.pid, started + 1)  # its id another process's since: an id reused
        child.kill()
        deadline = time.monotonic() + 30
        while alive(child.pid):  # until it is a zombie: ended, not reaped
            assert time.monotonic() < deadline, "the killed process did not end"
            time.sleep(0.01)
        assert process_running(child.pid) and not still_running(child.pid, started)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert not still_running(child.pid, started)  # reaped: gone
