"""Slow: the partition holds (and budgets are kept) on every file of the fetched golden corpora."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

CORPORA = Path(os.environ.get("CODELOUPE_CORPORA", "/work/corpora"))


@pytest.mark.slow
@pytest.mark.skipif(not any(CORPORA.glob("*/repo")), reason=f"no corpora under {CORPORA}")
def test_corpora_partition() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        import partition_corpora
    finally:
        sys.path.pop(0)
    assert partition_corpora.main(["--corpora", str(CORPORA)]) == 0
