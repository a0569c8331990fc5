#!/usr/bin/env python3
"""What chunking one saved file costs when its workspace strategy runs in the strategy worker process (as off a
main thread: the language server, `serve`, `mcp`) against in-process (as on a main thread).

    .venv/bin/python bench/strategy_worker_bench.py [FILE ...] [--repeat N]

Each file (default: uv.lock of the golden click corpus, a 1,661-line TOML file no grammar here covers) is chunked
by a strategy of the kind forge gets from a model, through `apply_strategy` (the partition check included): on
the main thread, and on a thread of its own (where the strategy worker runs it). The worker's start, once per
process, is timed apart; then the median per file of each is printed, and both must cut the same ranges.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from codeloupe.chunk.strategies import Strategy, apply_strategy, compile_strategy
from strategy_samples import DEFAULT_FILE, PER_LINE  # beside this script, on its sys.path


def on_a_thread(call: Callable[[], object]) -> object:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(call()))
    thread.start()
    thread.join()
    return out[0]


def median_ms(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path,
                        default=[DEFAULT_FILE])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    extensions, _ = compile_strategy(PER_LINE, "lock.py")
    strategy = Strategy("lock", extensions, PER_LINE, hashlib.sha256(PER_LINE.encode()).hexdigest(),
                        origin="lock.py")
    start = time.perf_counter()
    text = "x\n"
    on_a_thread(lambda: apply_strategy(strategy, text, text.splitlines(keepends=True)))
    print(f"strategy worker start (once per process): {(time.perf_counter() - start) * 1000:.0f} ms")
    for path in args.files:
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        here = apply_strategy(strategy, text, lines)
        there = on_a_thread(lambda: apply_strategy(strategy, text, lines))  # noqa: B023 - called at once
        assert here == there, "the worker cut other ranges"
        in_process = median_ms(lambda: apply_strategy(strategy, text, lines), args.repeat)  # noqa: B023
        in_worker = median_ms(lambda: on_a_thread(lambda: apply_strategy(strategy, text, lines)),  # noqa: B023
                              args.repeat)
        thread_only = median_ms(lambda: on_a_thread(lambda: None), args.repeat)
        print(f"{path.name}: {len(lines)} lines, {len(text)} chars, {len(here)} chunks; per file: in-process "
              f"{in_process:.2f} ms, through the worker {in_worker:.2f} ms (of which starting a thread "
              f"{thread_only:.2f} ms)")


if __name__ == "__main__":
    main()
