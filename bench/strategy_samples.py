"""What the strategy benches chunk: a strategy of the kind forge gets from a model, and the file it is timed on."""

from __future__ import annotations

import os
from pathlib import Path

# The golden corpora as the CI gate fetches them (scripts/golden_gate.sh), unless $CODELOUPE_CORPORA names others.
CORPORA = Path(os.environ.get("CODELOUPE_CORPORA", Path(__file__).resolve().parent.parent / ".golden" / "corpora"))
# click's uv.lock: a 1,661-line TOML file no grammar here covers.
DEFAULT_FILE = CORPORA / "click" / "src" / "click-8.5.1" / "uv.lock"

# Sections of a lock file, each header line matched with `re.match` on every line.
PER_LINE = '''import re

EXTENSIONS = (".lock",)


def chunk(text, lines):
    starts = [1] + [i + 1 for i, line in enumerate(lines) if i and re.match(r"^\\[\\[?([\\w.-]+)\\]\\]?\\s*$", line)]
    ends = [s - 1 for s in starts[1:]] + [len(lines)]
    names = [(re.match(r"^name = \\"([^\\"]+)\\"", lines[s]) if s < len(lines) else None) for s in starts]
    return [(s, e, m.group(1) if m else "") for s, e, m in zip(starts, ends, names)] if lines else []
'''
