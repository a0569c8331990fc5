"""Scoring the engine on labelled queries: golden-set loader, metrics, runner, report.

`run_golden` / `run_swebench` return typed results (`EvalRun`); `codeloupe.eval.report` renders them.
The metric definitions (including symbol hit@5) are documented in `codeloupe.eval.metrics`.
"""

from codeloupe.eval.golden import (
    GoldenCorpus,
    GoldenQuery,
    GoldenSet,
    GoldenSetError,
    SweInstance,
    load_golden,
    load_swebench,
)
from codeloupe.eval.runner import (
    LANES,
    CorpusRun,
    EvalError,
    EvalOptions,
    EvalRun,
    QueryOutcome,
    Scores,
    run_corpus,
    run_golden,
    run_swebench,
    score,
)

__all__ = [
    "LANES", "CorpusRun", "EvalError", "EvalOptions", "EvalRun", "GoldenCorpus", "GoldenQuery", "GoldenSet",
    "GoldenSetError", "QueryOutcome", "Scores", "SweInstance", "load_golden", "load_swebench", "run_corpus",
    "run_golden", "run_swebench", "score",
]
