#!/usr/bin/env python3
"""What chunking one saved file costs when its workspace strategy runs in the strategy worker process (as every
workspace strategy does) against in-process (as a function registered through the API does).

    .venv/bin/python bench/strategy_worker_bench.py [FILE ...] [--repeat N]

Each file (default: uv.lock of the golden click corpus, a 1,661-line TOML file no grammar here covers) is chunked
by a strategy of the kind forge gets from a model, through `apply_strategy` (the partition check included): as
module source (run in the strategy worker), and as the same module's `chunk` registered as a function (run
in-process). The worker's start, once per process, is timed apart; then the median per file of each is printed,
and both must cut the same ranges.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from codeloupe.chunk.strategies import Strategy, apply_strategy, compile_strategy
from strategy_samples import DEFAULT_FILE, PER_LINE  # beside this script, on its sys.path


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
    extensions, function = compile_strategy(PER_LINE, "lock.py")  # in-process: this is a bench, not a workspace
    strategy = Strategy("lock", extensions, PER_LINE, hashlib.sha256(PER_LINE.encode()).hexdigest(),
                        origin="lock.py")
    in_process = Strategy("lock-in-process", extensions, function=function)
    start = time.perf_counter()
    text = "x\n"
    apply_strategy(strategy, text, text.splitlines(keepends=True))
    print(f"strategy worker start (once per process): {(time.perf_counter() - start) * 1000:.0f} ms")
    for path in args.files:
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        here = apply_strategy(in_process, text, lines)
        assert here == apply_strategy(strategy, text, lines), "the worker cut other ranges"
        here_ms = median_ms(lambda: apply_strategy(in_process, text, lines), args.repeat)  # noqa: B023
        worker_ms = median_ms(lambda: apply_strategy(strategy, text, lines), args.repeat)  # noqa: B023
        print(f"{path.name}: {len(lines)} lines, {len(text)} chars, {len(here)} chunks; per file: in-process "
              f"{here_ms:.2f} ms, through the worker {worker_ms:.2f} ms")


if __name__ == "__main__":
    main()
