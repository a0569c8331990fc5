#!/usr/bin/env python3
"""Score codeloupe on the public golden set: `codeloupe eval` with the shared checkout's defaults filled in.

    .venv/bin/python bench/eval.py [GOLDEN.json] [--corpora DIR] [any `codeloupe eval` option]

GOLDEN defaults to ../shared/golden/public.json beside this checkout; --corpora to $CODELOUPE_CORPORA or
/work/corpora. Everything else (--lanes, --json, --out, --corpus, --kinds, --no-embed) is passed through.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from codeloupe.cli import main

CHECKOUT = Path(__file__).resolve().parent.parent
DEFAULT_GOLDEN = CHECKOUT.parent / "shared" / "golden" / "public.json"
DEFAULT_CORPORA = Path(os.environ.get("CODELOUPE_CORPORA", "/work/corpora"))


def with_defaults(argv: list[str]) -> list[str]:
    has_golden = bool(argv) and not argv[0].startswith("-")
    args = argv if has_golden else [str(DEFAULT_GOLDEN), *argv]
    if "--corpora" not in args and not args[0].endswith(".jsonl"):
        args = [*args, "--corpora", str(DEFAULT_CORPORA)]
    return ["eval", *args]


if __name__ == "__main__":
    sys.exit(main(with_defaults(sys.argv[1:])))
