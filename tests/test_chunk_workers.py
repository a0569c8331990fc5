"""Chunking worker processes end with their parent, even when the parent is killed with SIGKILL."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from processes import assert_workers_die_with_their_parent, children_of

# A real index over enough files for the worker pool, with workers that block in their first task, so they are
# certainly alive (and idle parents of nothing) when the parent is killed or the index stopped.
STUCK_WORKERS = textwrap.dedent("""
    import multiprocessing, os, sys, time
    from pathlib import Path

    import codeloupe.index as index
    from codeloupe.settings import Settings
    from codeloupe.store import Store

    def stuck_prepare(candidate, known_hash, settings, strategies=()):
        time.sleep(600)

    os.cpu_count = lambda: 2
    index.prepare = stuck_prepare
    root = Path(sys.argv[1])
""")
SCRIPT = STUCK_WORKERS + textwrap.dedent("""
    print("indexing", flush=True)
    index.index_workspace(root, Store(root.parent / "index.sqlite"), Settings(embed_provider="none"))
""")


def test_workers_exit_when_the_parent_is_killed(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(220):  # over POOL_MIN_ITEMS
        (root / f"m{i}.py").write_text(f"x = {i}\n")
    parent = subprocess.Popen([sys.executable, "-c", SCRIPT, str(root)], stdout=subprocess.PIPE, text=True)

    def started_workers() -> list[int]:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "indexing"
        deadline = time.monotonic() + 60
        while len(workers := children_of(parent.pid)) < 2:
            assert time.monotonic() < deadline, "the worker pool never started"
            time.sleep(0.05)
        time.sleep(0.5)  # let the workers finish their initialiser
        return workers

    assert_workers_die_with_their_parent(parent, started_workers)


# The same stuck workers, and a stop asked as soon as they are running: before their first result, which never comes.
STOP_SCRIPT = STUCK_WORKERS + textwrap.dedent("""
    try:
        index.index_workspace(root, Store(root.parent / "index.sqlite"), Settings(embed_provider="none"),
                              should_stop=lambda: bool(multiprocessing.active_children()))
    except index.IndexStopped as stopped:
        print(stopped, flush=True)
""")


def test_a_stop_while_the_workers_start_ends_the_index_without_waiting_for_their_first_result(
        tmp_path: Path) -> None:
    """An index's stop was asked between results only: one asked as the workers started waited for their start-up and
    first task (seconds on a loaded machine, here never), past the 1.5 s a language server's exit allows, which then
    left with the pool never let go. It is now asked while a result is awaited."""
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(220):  # over POOL_MIN_ITEMS
        (root / f"m{i}.py").write_text(f"x = {i}\n")
    index = subprocess.Popen([sys.executable, "-c", STOP_SCRIPT, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = index.communicate(timeout=60)
    finally:
        if index.poll() is None:
            index.kill()
            index.communicate()
    assert index.returncode == 0 and out.strip() == "indexing stopped after 0 of 220 files", out


# A grammar that crashes the process parsing one file, as tree-sitter did on a generated source in CI (a SIGSEGV in
# `parser.parse`): the grammar pack's parsers, wrapped, kill their process on that file's text. Top level, so that
# spawned workers wrap theirs too. The real one seen (tree-sitter-bash's external scanner on `{` then a code point
# of the higher planes, U+E0001: tree-sitter/tree-sitter-bash#337) reads out of bounds and crashes in about half of
# the processes, as their memory is laid out: no test of it could fail every time on the code it guards against.
CRASHING_GRAMMAR = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path

    import tree_sitter_language_pack as pack

    from codeloupe.api import Workspace

    REAL_GET_PARSER = pack.get_parser

    class CrashingParser:
        def __init__(self, real):
            self.real, self.language = real, real.language

        def parse(self, source):
            if b"crashes its grammar" in source:
                os.kill(os.getpid(), signal.SIGSEGV)
            return self.real.parse(source)

    pack.get_parser = lambda language: CrashingParser(REAL_GET_PARSER(language))

    if __name__ == "__main__":
        os.cpu_count = lambda: 2
        ws = Workspace(Path(sys.argv[1]), overrides={"embed_provider": "none"})
        report = ws.index()  # its chunks, then its graph's facts, both in workers
        rows = ws.store.file_rows()
        print(report.files_indexed, [(p.path, p.reason) for p in ws.chunking_problems()],
              len(ws.store.symbols_of_file(rows["m8.py"].id)), len(ws.store.symbols_of_file(rows["m7.py"].id)))
        ws.close()
""")


def test_a_file_that_crashes_its_grammar_in_a_worker_is_chunked_without_it_and_named(tmp_path: Path) -> None:
    # The broken pool left every file in flight to the indexing process, which then crashed on the same file: the
    # language server or `serve` died on a file of the workspace (untrusted input). The graph's facts, taken in
    # workers too, parse the same file with the same grammar.
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(220):  # over POOL_MIN_ITEMS
        (root / f"m{i}.py").write_text(f"def f{i}(a):\n    return a + {i}\n")
    (root / "m7.py").write_text("def f7(a):\n    return 'crashes its grammar'\n")
    script = tmp_path / "index.py"
    script.write_text(CRASHING_GRAMMAR)
    done = subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(maxsplit=1)[0] == "220"
    assert done.stdout.split(maxsplit=1)[1].strip() == \
        "[('m7.py', 'grammar crashed: its worker process was killed by SIGSEGV')] 1 0"
    assert "chunking m7.py crashed: its worker process was killed by SIGSEGV" in done.stderr
    assert "taking the graph's facts of m7.py crashed: its worker process was killed by SIGSEGV" in done.stderr


# A grammar that never returns from parsing one file, as tree-sitter-cobol on "x\n" and tree-sitter-perl on "x# y"
# (no final newline) do: a loop in C, which nothing but killing its process stops. The pack's parsers, wrapped,
# sleep for good on that file's text in a worker; in the indexing process they end it at once, saying so (where the
# real grammar would hang it). The index's maps are given a short `timeout_s`.
HANGING_GRAMMAR = textwrap.dedent("""
    import functools, os, sys, time
    from pathlib import Path

    import tree_sitter_language_pack as pack

    import codeloupe.graph.build as build
    import codeloupe.index as index
    from codeloupe import parallel
    from codeloupe.api import Workspace

    INDEXING = os.environ.setdefault("INDEXING_PID", str(os.getpid()))  # a spawned worker's parent set it
    REAL_GET_PARSER = pack.get_parser

    class HangingParser:
        def __init__(self, real):
            self.real, self.language = real, real.language

        def parse(self, source):
            if b"never ends its grammar" in source:
                if str(os.getpid()) == INDEXING:
                    print("parsed in the indexing process", flush=True)
                    os._exit(3)
                time.sleep(600)
            return self.real.parse(source)

    pack.get_parser = lambda language: HangingParser(REAL_GET_PARSER(language))

    if __name__ == "__main__":
        os.cpu_count = lambda: 2
        index.map_in_workers = build.map_in_workers = functools.partial(parallel.map_in_workers, timeout_s=5)
        ws = Workspace(Path(sys.argv[1]), overrides={"embed_provider": "none"})
        report = ws.index()  # its chunks, then its graph's facts, both in workers
        rows = ws.store.file_rows()
        print(report.files_indexed, [(p.path, p.reason) for p in ws.chunking_problems()],
              len(ws.store.symbols_of_file(rows["m8.py"].id)), len(ws.store.symbols_of_file(rows["m7.py"].id)))
        ws.close()
""")


def test_a_file_its_grammar_never_ends_on_in_a_worker_is_chunked_without_it_and_named(tmp_path: Path) -> None:
    # The stuck pool was killed and every file in flight chunked in the indexing process, which then hung on the same
    # file for good, a core at 100% (the language server, `index`, `serve`). The graph's facts parse it too.
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(220):  # over POOL_MIN_ITEMS
        (root / f"m{i}.py").write_text(f"def f{i}(a):\n    return a + {i}\n")
    (root / "m7.py").write_text("def f7(a):\n    return 'never ends its grammar'\n")
    script = tmp_path / "index.py"
    script.write_text(HANGING_GRAMMAR)
    done = subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split(maxsplit=1)[0] == "220"
    assert done.stdout.split(maxsplit=1)[1].strip() == \
        "[('m7.py', 'grammar did not finish: its worker process took longer than 5 s')] 1 0"
    assert "chunking m7.py did not finish: its worker process took longer than 5 s" in done.stderr
    assert "taking the graph's facts of m7.py did not finish: its worker process took longer than 5 s" in done.stderr
