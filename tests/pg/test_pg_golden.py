"""The public golden set through both stores: the same ranked files for every query (lexical and symbol lanes:
the dense lane's parity is test_pg_store's, on vectors from the scripted model). The two smallest corpora keep
the test short; `check_parity` runs any of them (the README's figure is all four)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codeloupe.eval import EvalOptions, load_golden, run_golden

GOLDEN = Path(os.environ.get("CODELOUPE_GOLDEN", "/work/shared/golden/public.json"))
# The corpora .ci/run fetches (CODELOUPE_CORPORA), or another copy of them.
CORPORA = Path(os.environ.get("CODELOUPE_GOLDEN_CORPORA") or os.environ.get("CODELOUPE_CORPORA") or "/work/corpora/golden")
SMALL = ("express", "sinatra")


def check_parity(pg_url: str, corpora: tuple[str, ...]) -> int:
    """Asserts both stores rank the same files for every query of `corpora`; returns how many queries."""
    golden = load_golden(GOLDEN)
    local = run_golden(golden, CORPORA, EvalOptions(embed=False), corpora)
    shared = run_golden(golden, CORPORA, EvalOptions(embed=False, overrides={"store_url": pg_url}), corpora)
    expected = [(o.id, o.ranked_files, o.core_files) for o in local.outcomes()]
    assert [(o.id, o.ranked_files, o.core_files) for o in shared.outcomes()] == expected
    return len(expected)


@pytest.mark.slow
@pytest.mark.skipif(not GOLDEN.is_file() or not all((CORPORA / c / "repo").exists() for c in SMALL),
                    reason="needs the public golden set and its fetched corpora")
def test_the_golden_set_ranks_the_same_files_through_both_stores(pg_url: str) -> None:
    assert check_parity(pg_url, SMALL) == 40
