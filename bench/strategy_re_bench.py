#!/usr/bin/env python3
"""What running a chunk strategy's regular expressions on RE2 costs per file, against Python's `re`.

    .venv/bin/python bench/strategy_re_bench.py [FILE ...] [--repeat N]

Each file (default: uv.lock of the golden click corpus, a 1,661-line TOML file no grammar here covers) is
chunked by two strategies of the kind forge gets from a model: one matching every line with `re.match`, one
running a MULTILINE `finditer` over the whole text. Each is compiled twice from the same source: as a workspace
strategy (its `import re` is `codeloupe.chunk.strategy_re`, on RE2) and with Python's `re`; the median time per
file of each is printed, and both must cut the same ranges.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from codeloupe.chunk.strategies import compile_strategy
from strategy_samples import DEFAULT_FILE, PER_LINE  # beside this script, on its sys.path

WHOLE_TEXT = '''import re

EXTENSIONS = (".lock",)
HEADER = re.compile(r"^\\[\\[?[\\w.-]+\\]\\]?[ \\t]*$", re.M)


def chunk(text, lines):
    if not lines:
        return []
    starts = sorted({1} | {text.count("\\n", 0, m.start()) + 1 for m in HEADER.finditer(text)})
    return list(zip(starts, [s - 1 for s in starts[1:]] + [len(lines)]))
'''


def with_python_re(source: str):
    namespace: dict = {"__name__": "baseline", "re": re}
    exec(compile(source.replace("import re\n", ""), "baseline", "exec"), namespace)  # noqa: S102 - our own source
    return namespace["chunk"]


def median_ms(function, text: str, lines: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function(text, list(lines))
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=[DEFAULT_FILE])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    for path in args.files:
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        print(f"{path} ({len(lines)} lines, {len(text):,} characters)")
        for label, source in (("re.match on every line", PER_LINE), ("MULTILINE finditer", WHOLE_TEXT)):
            on_re2, on_python = compile_strategy(source, "bench.py")[1], with_python_re(source)
            assert on_re2(text, lines) == on_python(text, lines), label
            re2_ms, python_ms = (median_ms(f, text, lines, args.repeat) for f in (on_re2, on_python))
            print(f"  {label:24} RE2 {re2_ms:7.2f} ms   Python re {python_ms:7.2f} ms   x{re2_ms / python_ms:.1f}")


if __name__ == "__main__":
    main()
