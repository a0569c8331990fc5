"""Chunking worker processes end with their parent, even when the parent is killed with SIGKILL."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from processes import FAILING_GRAMMAR, alive, assert_workers_die_with_their_parent, children_of

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


# A small workspace's index in a script whose grammar fails on one file (`FAILING_GRAMMAR`).
INDEX_FAILING_GRAMMAR = FAILING_GRAMMAR + textwrap.dedent("""
    from codeloupe.api import Workspace

    if __name__ == "__main__":
        os.cpu_count = lambda: 2
        with_short_timeouts()
        if FAILURE == "fixed":  # the grammars were upgraded since the file's failure
            index.grammar_versions = lambda: "upgraded"
        ws = Workspace(Path(sys.argv[1]), overrides={"embed_provider": "none"})
        report = ws.index()  # its chunks, then its graph's facts, both in workers
        rows = ws.store.file_rows()
        print(report.files_indexed, [(p.path, p.reason) for p in ws.chunking_problems()],
              len(ws.store.symbols_of_file(rows["m8.py"].id)), len(ws.store.symbols_of_file(rows["m7.py"].id)))
        ws.close()
        print(*[child.pid for child in parallel.multiprocessing.active_children()])  # kept for the files after
""")


@pytest.mark.parametrize(("failure", "said"), [
    ("crash", "crashed: its worker process was killed by SIGSEGV"),
    ("hang", "did not finish: its worker process took longer than 5 s"),
    # Nothing capped a worker's memory: a file a grammar allocates without bound on took the machine's, the OOM killer
    # ending whatever process it picked. Past the cap, a MemoryError in Python ends the worker, saying why (it read as
    # the kernel's "killed by SIGKILL").
    ("allocate", "crashed: its worker process ran out of memory (cap 256 MiB)")])
@pytest.mark.parametrize("files", [220, 9])  # over POOL_MIN_ITEMS (a pool), and under it (the kept worker)
def test_a_file_that_fails_its_grammar_in_a_worker_is_chunked_without_it_and_named(
        tmp_path: Path, failure: str, said: str, files: int) -> None:
    # The broken (or stuck, then killed) pool left every file in flight to the indexing process, which then crashed
    # or hung for good, a core at 100%, on the same file: the language server or `serve` died on a file of the
    # workspace (untrusted input). The graph's facts, taken in workers too, parsed the same file with the same grammar.
    # Under POOL_MIN_ITEMS every file was chunked, and its facts taken, in the indexing process itself.
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(files):
        (root / f"m{i}.py").write_text(f"def f{i}(a):\n    return a + {i}\n")
    (root / "m7.py").write_text("def f7(a):\n    return 'fails its grammar'\n")
    script = tmp_path / "index.py"
    script.write_text(INDEX_FAILING_GRAMMAR)
    done = subprocess.run([sys.executable, str(script), str(root), failure], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report, kept = done.stdout.splitlines()
    assert report.split(maxsplit=1)[0] == str(files)
    assert report.split(maxsplit=1)[1] == f"[('m7.py', 'grammar {said}')] 1 0"
    assert all(not alive(int(pid)) for pid in kept.split()), "a worker outlived the indexing process"
    assert f"chunking m7.py {said}" in done.stderr
    # Not parsed again for the graph's facts: its grammar would fail on it a second time (a second timeout)
    assert "taking the graph's facts of m7.py" not in done.stderr


def test_a_file_whose_grammar_crashed_is_parsed_again_once_the_grammars_are_upgraded(tmp_path: Path) -> None:
    # Stored in line windows as current, it was never chunked again until it changed, even once the grammar pack was
    # upgraded to one that parses it.
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(9):
        (root / f"m{i}.py").write_text(f"def f{i}(a):\n    return a + {i}\n")
    (root / "m7.py").write_text("def f7(a):\n    return 'fails its grammar'\n")
    script = tmp_path / "index.py"
    script.write_text(INDEX_FAILING_GRAMMAR)
    runs = [subprocess.run([sys.executable, str(script), str(root), failure], capture_output=True, text=True,
                           timeout=120) for failure in ("crash", "fixed", "fixed")]
    assert all(run.returncode == 0 for run in runs), [run.stdout + run.stderr for run in runs]
    crashed, upgraded, again = (run.stdout.splitlines()[0] for run in runs)
    assert crashed == "9 [('m7.py', 'grammar crashed: its worker process was killed by SIGSEGV')] 1 0"
    assert upgraded == "1 [] 1 1"
    assert again == "0 [] 1 1"


def test_codeloupe_chunks_on_a_file_that_crashes_its_grammar_shows_its_line_windows_and_why(tmp_path: Path) -> None:
    # `codeloupe chunks` chunked the file in its own process: a grammar's crash on it ended the command with no word.
    (tmp_path / "m7.py").write_text("def f7(a):\n    return 'fails its grammar'\n")
    script = tmp_path / "chunks.py"
    script.write_text(FAILING_GRAMMAR + textwrap.dedent("""
        if __name__ == "__main__":
            from codeloupe.cli import main
            sys.exit(main(["chunks", sys.argv[1]]))
    """))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "m7.py"), "crash"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(fallback: grammar crashed: its worker process was killed by SIGSEGV)" in done.stdout.splitlines()[0]


# A first index whose grammar never finishes on chosen files (`FAILING_GRAMMAR`, "hang"), the rest honest Python: each
# file's chunking problem, whether it has symbols, and the workers left once the workspace is closed.
INDEX_LOOPING_FILES = FAILING_GRAMMAR + textwrap.dedent("""
    from codeloupe.api import Workspace

    if __name__ == "__main__":
        os.cpu_count = lambda: 2
        with_short_timeouts()
        ws = Workspace(Path(sys.argv[1]), overrides={"embed_provider": "none"})
        report = ws.index()
        rows = ws.store.file_rows()
        print(report.files_indexed, sum(1 for path in rows if not ws.store.symbols_of_file(rows[path].id)))
        for problem in ws.chunking_problems():
            print(f"{problem.path}: {problem.reason}")
        ws.close()
        parallel.stop_kept_workers()
        print("left:", *[child.pid for child in parallel.multiprocessing.active_children()])
""")


def looping_workspace(root: Path, files: int, looping: set[int]) -> None:
    """`files` files named in the order they are indexed: Python, but the `looping` ones, Ruby whose grammar never
    finishes (`FAILING_GRAMMAR`)."""
    root.mkdir()
    for i in range(files):
        if i in looping:
            (root / f"m{i:03d}.rb").write_text(f"def f{i}(a)\n  'fails its grammar'\nend\n")
        else:
            (root / f"m{i:03d}.py").write_text(f"def f{i}(a):\n    return a + {i}\n")


def test_a_pool_whose_every_task_in_flight_loops_leaves_its_files_to_a_worker_never_to_the_indexing_process(
        tmp_path: Path) -> None:
    # With two workers, the first file of each of the first two tasks (64 files a task) loops: no task gave a result
    # before the timeout, the pool was taken for stuck and the rest chunked in the indexing process, which hung for
    # good on the first looping file, a core at 100% (the language server, `codeloupe index`, `serve`).
    root = tmp_path / "repo"
    looping_workspace(root, 220, {0, 64})
    script = tmp_path / "index.py"
    script.write_text(INDEX_LOOPING_FILES)
    done = subprocess.run([sys.executable, str(script), str(root), "hang"], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    said = "grammar did not finish: its worker process took longer than 5 s"
    assert done.stdout.splitlines() == ["220 2", f"m000.rb: {said}", f"m064.rb: {said}", "left:"], done.stderr
    assert "continuing in this process" not in done.stderr


def test_after_two_files_a_grammar_fails_on_the_rest_of_its_language_is_not_parsed_until_the_next_run(
        tmp_path: Path) -> None:
    # Each file a grammar looped on cost its worker the whole timeout (120 s), and its graph's facts as long again: a
    # repository that planted 40 such files held a core for 160 min before its index was done.
    root = tmp_path / "repo"
    looping_workspace(root, 9, {0, 1, 2, 3, 4})
    (root / "m004.rb").write_text("def f4(a)\n  a\nend\n")  # honest, but of the language whose grammar failed
    script = tmp_path / "index.py"
    script.write_text(INDEX_LOOPING_FILES)
    runs = [subprocess.run([sys.executable, str(script), str(root), "hang"], capture_output=True, text=True,
                           timeout=240) for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), [run.stdout + run.stderr for run in runs]
    failed = "grammar did not finish: its worker process took longer than 5 s"
    not_run = "grammar was not run: it crashed or did not finish on 2 other files of its language in this run"
    first, again = (run.stdout.splitlines() for run in runs)
    assert first == ["9 5", f"m000.rb: {failed}", f"m001.rb: {failed}", f"m002.rb: {not_run}", f"m003.rb: {not_run}",
                     f"m004.rb: {not_run}", "left:"], runs[0].stderr
    assert "chunking: ruby crashed or did not finish on 2 files in this run: its other files are not run" \
        in runs[0].stderr
    # The next run tries the files not run again (the two it fails on stay as they were until the grammars change)
    assert again == ["3 5", f"m000.rb: {failed}", f"m001.rb: {failed}", f"m002.rb: {failed}", f"m003.rb: {failed}",
                     f"m004.rb: {not_run}", "left:"], runs[1].stderr


@pytest.mark.parametrize("files", [220, 9])  # a pool, the kept worker
@pytest.mark.parametrize("start", ["fork", "spawn"])  # spawned (a language server's), it imports under no cap first
def test_a_file_a_real_grammar_allocates_past_the_workers_memory_cap_on_costs_that_file_only(
        tmp_path: Path, files: int, start: str) -> None:
    # Nothing capped a chunking worker's memory: tree-sitter's Python grammar takes ~225 MB a MB of `<div>` lines
    # (900 MB at the 4 MB a workspace may let a file be), the kernel's OOM killer then ending whatever process it
    # picked. Past the cap (made small here), its allocation in C fails, the worker dies, and the file alone is
    # chunked in line windows, named.
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(files):
        (root / f"m{i}.py").write_text(f"def f{i}(a):\n    return a + {i}\n")
    (root / "m7.py").write_text("<div>\n" * 160_000)  # ~220 MB of tree-sitter's, past any parent's free heap
    script = tmp_path / "index.py"
    script.write_text(textwrap.dedent("""
        import sys
        from pathlib import Path

        from codeloupe import parallel
        from codeloupe.api import Workspace

        if __name__ == "__main__":
            parallel.PARSE_MEMORY_BYTES = 48 * 2**20
            parallel.pool_context = lambda: parallel.multiprocessing.get_context(sys.argv[2])
            parallel.os.cpu_count = lambda: 2
            ws = Workspace(Path(sys.argv[1]), overrides={"embed_provider": "none"})
            report = ws.index()
            rows = ws.store.file_rows()
            print(report.files_indexed, [(p.path, p.reason) for p in ws.chunking_problems()],
                  len(ws.store.symbols_of_file(rows["m8.py"].id)))
            ws.close()
            print(*[child.pid for child in parallel.multiprocessing.active_children()])
    """))
    done = subprocess.run([sys.executable, str(script), str(root), start], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report, kept = done.stdout.splitlines()
    indexed, rest = report.split(maxsplit=1)
    assert indexed == str(files)
    assert rest.startswith("[('m7.py', 'grammar crashed: its worker process ")
    assert rest.endswith(")] 1"), rest
    assert all(not alive(int(pid)) for pid in kept.split()), "a worker outlived the indexing process"
