"""Short random texts through every grammar the chunker uses, each grammar in a process of its own: which crash
(a signal) or loop (no answer within the timeout), and on what text.

A grammar runs in C: a crash kills the process that parses, a loop holds it for good, and the language server
parses a saved file in its own. This found tree-sitter-bash's crash on `{` then a character past U+FFFF and the
loops of tree-sitter-perl (`x# y` with no final line break) and tree-sitter-cobol (`x`); see README (hostile
files) for what the chunker does about each.

    python bench/grammar_fuzz.py [--languages perl,bash] [--seed N] [--texts N] [--max-chars N]
        [--timeout S] [--jobs N] [--through parse|chunk]

`--through chunk` runs the whole chunker (definitions, cuts) rather than the parse alone. Exit status 1 when any
grammar crashed or looped; each such grammar's last text is printed (Python's repr) to reproduce it.
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Text drawn from punctuation that opens and closes most grammars' constructs, a few letters and digits, and
# characters of every UTF-8 length (no surrogates).
PUNCTUATION = "{}[]()<>\"'`$#@!%^&*-+=|\\/:;,.?~ \n\tx0aZ_"
CODE_POINT_RANGES = ((0x80, 0x800), (0x800, 0xD800), (0xE000, 0x10000), (0x10000, 0x110000))


def chunker_languages() -> list[str]:
    """Every language the chunker gives a grammar to (by extension, file name or interpreter), documents aside."""
    from codeloupe.chunk import languages

    named = {*languages._EXTENSIONS.values(), *languages._FILENAMES.values(), *languages._INTERPRETERS.values()}
    return sorted(named - set(languages.DOC_LANGUAGES))


def random_text(draw: random.Random, max_chars: int) -> str:
    return "".join(draw.choice(PUNCTUATION) if draw.random() < 0.7 else chr(draw.randrange(*draw.choice(CODE_POINT_RANGES)))
                   for _ in range(draw.randrange(1, max_chars + 1)))


def child(language: str, seed: int, texts: int, max_chars: int, through: str, last: Path) -> None:
    """Parse (or chunk) `texts` random texts in `language`, each written to `last` first."""
    from codeloupe.chunk.chunker import chunk_file
    from codeloupe.chunk.languages import get_parser, parse

    parser = get_parser(language)
    if parser is None:
        print("no grammar")
        return
    draw = random.Random(f"{seed}:{language}")
    for _ in range(texts):
        text = random_text(draw, max_chars)
        last.write_text(repr(text))
        if through == "chunk":
            chunk_file("fuzzed", text, language)
        else:
            parse(parser, text.encode("utf-8"))
    print("ok")


def run_one(language: str, args: argparse.Namespace, folder: Path) -> tuple[str, str, str]:
    """(language, outcome, last text) of one child process."""
    last = folder / f"{language}.last"
    command = [sys.executable, __file__, "--child", language, "--seed", str(args.seed), "--texts", str(args.texts),
               "--max-chars", str(args.max_chars), "--through", args.through, "--last", str(last)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return language, f"looped (no answer in {args.timeout:g} s)", last.read_text() if last.exists() else ""
    if done.returncode < 0:
        return language, f"crashed ({signal.Signals(-done.returncode).name})", last.read_text()
    if done.returncode != 0:
        return language, f"failed: {done.stderr.strip().splitlines()[-1:]}", last.read_text() if last.exists() else ""
    return language, done.stdout.strip(), ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--languages", help="comma-separated (default: every grammar the chunker uses)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--texts", type=int, default=1500, help="texts per grammar")
    parser.add_argument("--max-chars", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=60, help="seconds a grammar's process may take in all")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--through", choices=("parse", "chunk"), default="parse")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--last", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seed, args.texts, args.max_chars, args.through, args.last)
        return 0
    chosen = args.languages.split(",") if args.languages else chunker_languages()
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda language: run_one(language, args, Path(folder)), chosen))
    bad = [(language, outcome, last) for language, outcome, last in results if outcome not in ("ok", "no grammar")]
    print(f"{len(chosen)} grammars, {args.texts} texts each of up to {args.max_chars} characters "
          f"(seed {args.seed}, through {args.through}): {len(bad)} crashed or looped")
    for language, outcome, last in bad:
        print(f"  {language}: {outcome}; last text {last}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
