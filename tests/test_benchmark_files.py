"""Benchmarks are files of the "test" kind: they call the code they time with its own words (a level, a
serializer, a redaction path), so a question about how something works found the benchmark before the
implementation; they take the tests' soft penalty and stay in the bundle (rule 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from codeloupe.api import Workspace
from codeloupe.search import file_kind

TREE = {
    "lib/levels.js": """\
        // Map each level name to its number and install a no-op for every level below the threshold, so a
        // disabled call costs nothing.
        function setLevel (logger, level) {
          for (const name of Object.keys(logger.levels)) {
            logger[name] = logger.levels[name] < logger.levels[level] ? noop : write(name)
          }
        }
        module.exports = { setLevel }
        """,
    "benchmarks/levels.bench.js": """\
        // The cost of a disabled level: a debug call below the info threshold, a million times.
        const { setLevel } = require('../lib/levels')
        const logger = { levels: { debug: 20, info: 30 } }
        setLevel(logger, 'info')
        for (let i = 0; i < 1e6; i++) logger.debug('a disabled level call costs nothing below the threshold')
        """,
}


@pytest.mark.parametrize(("path", "language", "kind"), [
    ("benches/parse.rs", "rust", "test"), ("bench/run.py", "python", "test"),
    ("benchmarks/formatters.bench.js", "javascript", "test"), ("benchmark/speed.py", "python", "test"),
    ("lib/levels.bench.ts", "typescript", "test"),
    ("src/benchmark.rs", "rust", ""), ("lib/bench_helpers.py", "python", ""), ("workbench/app.js", "javascript", ""),
])
def test_what_counts_as_a_benchmark(path: str, language: str, kind: str) -> None:
    assert file_kind(path, language) == kind


def test_a_question_gets_the_implementation_before_its_benchmark(
        make_tree: Callable[[dict[str, str]], Path], lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(make_tree(TREE))
    paths = [h.path for h in ws.search("how much does a disabled debug call cost").files]
    assert paths[0] == "lib/levels.js"
    assert "benchmarks/levels.bench.js" in paths  # demoted, never dropped


# A package named `bench` (frappe/bench: the `bench` command line) is the whole implementation, not a benchmark
# folder: its kind only demotes it among the search's candidates, but counted as tests it had no entry point and
# no tour (tests are never either).
BENCH_PACKAGE = {
    "pyproject.toml": """\
        [project]
        name = "frappe-bench"
        version = "5.0"

        [project.scripts]
        bench = "bench.cli:cli"
        """,
    "bench/__init__.py": "",
    "bench/cli.py": """\
        import sys

        from bench.commands import dispatch


        def cli():
            dispatch(sys.argv[1:])
        """,
    "bench/commands/__init__.py": """\
        from bench.app import install_app


        def dispatch(argv):
            if argv[:1] == ["get-app"]:
                install_app(argv[1])
        """,
    "bench/app.py": """\
        def install_app(name):
            return name
        """,
}


def test_a_package_named_bench_keeps_its_entry_points_and_its_tour(
        make_tree: Callable[[dict[str, str]], Path], lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(make_tree(BENCH_PACKAGE))
    tour = ws.tour()
    assert [(e.path, e.kind) for e in tour.entry_points][:1] == [("bench/cli.py", "manifest")]
    assert {"dispatch", "install_app"} <= {stop.name for stop in tour.stops}
