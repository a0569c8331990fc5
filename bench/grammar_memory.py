"""How much memory a chunking worker takes on adversarial large files, each (language, input) in a process of its
own: the peak address space (what RLIMIT_AS caps: `parallel.PARSE_MEMORY_BYTES`) and resident size past the
process's own after its imports and the grammar's loading, through the whole chunker (`chunk_file`) and the graph's
facts (`extract_facts`).

    python bench/grammar_memory.py [--languages python,cpp] [--inputs parens,random] [--bytes N] [--timeout S]
        [--limit-mb N] [--files PATH...]

Inputs, `--bytes` each (4 MB: the most a workspace's own settings may let a file be, `WORKSPACE_MAX_FILE_BYTES`):
nesting one opener a line (`(`, `[`, `{`, `<div>`), an unterminated string and block comment over many lines, one
line of that length (the chunker windows it unparsed), random tokens of the language's punctuation. `--files`:
real files (the largest of a corpus: the honest need), each through its detected language. A child is itself
capped at `--limit-mb` of address space (so that a measurement cannot take the machine): "over" says it hit it.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

LANGUAGES = ("python", "javascript", "typescript", "tsx", "java", "c", "cpp", "c_sharp", "go", "rust", "php", "ruby",
             "html", "json", "yaml", "bash", "kotlin", "swift", "scala", "lua", "haskell", "ocaml", "sql", "xml")
TOKENS = ("x", "y1", "if", "for", "(", ")", "[", "]", "{", "}", "<", ">", "=", "+", "-", "*", "/", ".", ",", ";", ":",
          "\"", "'", "`", "#", "$", "@", "0", "1.5", "=>", "->", "::", "<div>", "</div>", "/*", "*/", "//", " ", "\n")


def adversarial(kind: str, size: int) -> str:
    line = "a" * 59 + "\n"
    if kind == "parens":
        return "(\n" * (size // 2)
    if kind == "brackets":
        return "[\n" * (size // 2)
    if kind == "braces":
        return "{\n" * (size // 2)
    if kind == "divs":
        return "<div>\n" * (size // 6)
    if kind == "string":
        return "x = \"" + line * (size // len(line))
    if kind == "comment":
        return "/*" + line * (size // len(line))
    if kind == "oneline":
        return "x" * size
    if kind == "random":
        draw = random.Random(f"{size}")
        out, total = [], 0
        while total < size:
            token = draw.choice(TOKENS)
            out.append(token)
            total += len(token) + 1
        return " ".join(out)
    raise ValueError(kind)


INPUTS = ("parens", "brackets", "braces", "divs", "string", "comment", "oneline", "random")


def status_kib(field: str) -> int:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith(field + ":"):
            return int(row.split()[1])
    return 0


def child(language: str, kind: str, size: int) -> None:
    from codeloupe.chunk.chunker import chunk_file
    from codeloupe.chunk.languages import detect_language, get_parser
    from codeloupe.graph.langs import extract_facts

    if kind.startswith("file:"):
        path = kind[5:]
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        language = detect_language(path, text[:200])
    else:
        text = adversarial(kind, size)
    get_parser(language)
    base_vm, base_rss = status_kib("VmSize"), status_kib("VmRSS")
    start = time.perf_counter()
    chunked = chunk_file("input", text, language)
    facts = extract_facts(language, text)
    seconds = time.perf_counter() - start
    print(json.dumps({"language": language, "input": kind, "bytes": len(text.encode()),
                      "vm_mib": (status_kib("VmPeak") - base_vm) / 1024,
                      "rss_mib": (status_kib("VmHWM") - base_rss) / 1024, "seconds": round(seconds, 1),
                      "chunks": len(chunked.chunks), "reason": chunked.fallback_reason[:60],
                      "facts": facts is not None}))


def run(language: str, kind: str, args: argparse.Namespace) -> dict:
    limit = args.limit_mb * 2**20

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    command = [sys.executable, __file__, "--child", language, kind, str(args.bytes)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, preexec_fn=cap)
    except subprocess.TimeoutExpired:
        return {"language": language, "input": kind, "outcome": f"no answer in {args.timeout:g} s"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []
        return {"language": language, "input": kind, "outcome": f"over (exit {done.returncode}) {tail}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=3)
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--inputs", default=",".join(INPUTS))
    parser.add_argument("--bytes", type=int, default=4_000_000)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--limit-mb", type=int, default=3000)
    parser.add_argument("--files", nargs="*", default=[])
    args = parser.parse_args()
    if args.child:
        language, kind, size = args.child
        child(language, kind, int(size))
        return
    runs = [("-", f"file:{path}") for path in args.files] or \
        [(language, kind) for language in args.languages.split(",") for kind in args.inputs.split(",")]
    for language, kind in runs:
        print(json.dumps(run(language, kind, args)), flush=True)


if __name__ == "__main__":
    main()
