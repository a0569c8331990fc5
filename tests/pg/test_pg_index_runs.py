"""An index run of the shared index cut off midway (killed, stopped) left a repository that looked complete:
`admin repos`, `stats` and every answer gave no sign that part of its files were missing. The repository now
records a run until its files are all written, and each of them says whether one is under way or did not finish.
A run that writes its files itself pins its commit once they are written, each file cited meanwhile at the commit
its own text was read at."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from served_store import served_store
from test_pg_queued_runs import _commit, _git

from codeloupe import index as index_module
from codeloupe import shared_index
from codeloupe.api import IndexStopped, Workspace, add_chunk_strategy, open_shared, shared_repositories
from codeloupe.chunk import CHUNKER_VERSION, chunk_file
from codeloupe.chunk.strategies import unregister_strategy
from codeloupe.cli import main
from codeloupe.settings import load_settings
from codeloupe.shared_index import enqueue_workspace, run_worker
from codeloupe.store import postgres
from codeloupe.store.postgres import PgStore
from codeloupe.types import DIRTY_SUFFIX, Progress
from codeloupe_mcp.sized import search_answer

REPO = Path(__file__).resolve().parents[2]
# Only what keeps a test that fails from hanging the run: never a bound any assertion is about.
SAFETY_VALVE_S = 30
FILES = 40
QUERY = "helper number seven"
# A child indexing the folder into repository svc that stops, for good, once some of its files are written: it
# says so on stdout and waits for stdin, which the test never writes (it kills it).
_CUT_OFF = """
import sys
from codeloupe.api import Workspace

ws = Workspace(sys.argv[1], overrides={"store_url": sys.argv[2], "store_repository": "svc", "embed_provider": "none"})

def should_stop():
    if ws.store.counts()["files"] >= 10:
        print("written", flush=True)
        sys.stdin.read()
    return False

ws.index(should_stop=should_stop)
"""


# A child running `index --store` of the folder into svc that stops, for good, once its files are all written and
# before the run deletes the files that left the folder and pins its commit (as the walk's skips are recorded).
_CUT_OFF_BEFORE_THE_PIN = """
import sys
from codeloupe import index
from codeloupe.cli import main

def stopped_for_good(*args, **kwargs):
    print("written", flush=True)
    sys.stdin.read()

index.remember_walk = stopped_for_good
main(["index", sys.argv[1], "--store", sys.argv[2], "--repo", "svc", "--embed-provider", "none"])
"""


def _notes(pg_url: str) -> list[str]:
    [ws] = open_shared(["svc"], {"store_url": pg_url, "embed_provider": "none"})
    try:
        return ws.search(QUERY).notes
    finally:
        ws.close()


def test_an_index_run_cut_off_is_said_by_admin_repos_stats_and_every_answer_until_a_run_finishes(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = tmp_path / "svc"
    root.mkdir()
    for n in range(FILES):
        (root / f"mod_{n:02}.py").write_text(f'def helper_{n}(x):\n    """helper number {n}"""\n    return x + {n}\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "engine"), str(REPO / "server")])}
    child = subprocess.Popen([sys.executable, "-c", _CUT_OFF, str(root), pg_url], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "written\n"
        [listed] = shared_repositories(pg_url)
        assert 10 <= listed.files < FILES
        assert listed.indexing.startswith("indexing of svc (started ") and "is under way" in listed.indexing
        assert "is under way: answers may miss files" in _notes(pg_url)[0]
    finally:
        _killed_until_said_cut_off(child, pg_url)
    cut_off = "did not finish: answers may miss files; run `codeloupe index` on it again"
    assert cut_off in shared_repositories(pg_url)[0].indexing
    assert cut_off in _notes(pg_url)[0]
    capsys.readouterr()
    assert main(["admin", "--store", pg_url, "repos"]) == 0
    out = capsys.readouterr().out
    assert "WARNING indexing of svc (started " in out and cut_off in out
    assert main(["stats", str(root), "--store", pg_url, "--repo", "svc"]) == 0
    assert cut_off in capsys.readouterr().out
    assert main(["search", "--store", pg_url, "--repo", "svc", QUERY, "--json"]) == 0
    assert cut_off in json.loads(capsys.readouterr().out)["notes"][0]
    with served_store(pg_url) as base:
        assert cut_off in httpx.get(f"{base}/v1/search", params={"q": QUERY, "root": "svc"}).json()["notes"][0]
        [status] = httpx.get(f"{base}/v1/status").json()["workspaces"]
        assert cut_off in status["indexing"]

    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 0  # a run that finishes
    [listed] = shared_repositories(pg_url)
    assert listed.files == FILES and listed.indexing == ""
    assert not any("indexing of" in note for note in _notes(pg_url))
    capsys.readouterr()
    assert main(["stats", str(root), "--store", pg_url, "--repo", "svc"]) == 0
    assert "indexing of" not in capsys.readouterr().out


def test_a_direct_index_run_cut_off_after_its_files_and_before_its_pin_is_said_not_to_have_finished(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`index --store` cleared the repository's record of its run once its files were written, and only then
    deleted the files that left the folder and pinned the new commit: killed in between, `admin repos`, `stats`,
    the status and every answer said nothing of a run cut off, while the repository kept the old pin and the files
    the new commit no longer holds. The record is now cleared in the transaction that pins the commit."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)  # this process's answers read the repository's row anew
    root = tmp_path / "svc"
    first = _charges(root, ("alpha", "beta", "gamma"), "first")
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 0
    second = _commit(root, {"alpha.py": "def charge_alpha_total():\n    return 'second'\n", "gamma.py": None})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "engine"), str(REPO / "server")])}
    child = subprocess.Popen([sys.executable, "-c", _CUT_OFF_BEFORE_THE_PIN, str(root), pg_url], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "written\n"
        [listed] = shared_repositories(pg_url)
        assert (listed.commit, listed.files) == (first, 3)  # not pinned, gamma.py not deleted yet
        assert "is under way" in listed.indexing, listed.indexing
    finally:
        _killed_until_said_cut_off(child, pg_url)
    [listed] = shared_repositories(pg_url)
    assert (listed.commit, listed.files) == (first, 3)
    assert "did not finish: answers may miss files" in listed.indexing, listed.indexing
    assert any("did not finish" in note for note in _notes(pg_url))

    assert main(["index", str(root), "--store", pg_url, "--repo", "svc"]) == 0  # a run that finishes
    [listed] = shared_repositories(pg_url)
    assert (listed.commit, listed.files, listed.indexing) == (second, 2, "")
    assert not any("indexing of" in note for note in _notes(pg_url))


def _killed_until_said_cut_off(child: subprocess.Popen, pg_url: str) -> None:
    """Kill the indexing `child`, then wait until its repository's run is said cut off: the server ends the killed
    process's session once it sees its socket closed."""
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    child.stdin.close()
    child.stdout.close()
    for _ in range(600):
        if "did not finish" in shared_repositories(pg_url)[0].indexing:
            break
        time.sleep(0.05)


def _charges(root: Path, names: tuple[str, ...], text: str) -> str:
    """Commit a file per name whose function returns `text`; the commit."""
    return _commit(root, {f"{name}.py": f"def charge_{name}_total():\n    return '{text}'\n" for name in names})


def _cited(served: Workspace) -> dict[str, str]:
    """path -> the revision a search of `served` (another process's view of the repository) cites the file at,
    and the last line it shows of it"""
    return {hit.path: f"{hit.revision} {hit.chunks[-1].snippet.text.splitlines()[-1].strip()}"
            for hit in served.search("charge total").files}


def _writing_a_file_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)  # the repository's row read at each question
    monkeypatch.setattr(index_module, "WRITE_BATCH", 1)  # a file a write, progress told after each
    monkeypatch.setattr(index_module, "PROGRESS_EVERY", 1)
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")


def _indexed_at_first(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
                      ) -> tuple[Path, dict[str, str], str, Workspace]:
    """(root, overrides, first commit, its workspace): svc's alpha, beta and gamma committed and indexed into the
    shared index, a file a write from then on (`_writing_a_file_at_a_time`)."""
    _writing_a_file_at_a_time(monkeypatch)
    root = tmp_path / "svc"
    overrides = {"store_url": pg_url, "embed_provider": "none"}
    first = _charges(root, ("alpha", "beta", "gamma"), "first")
    ws = Workspace(root, overrides=overrides)
    ws.index()
    return root, overrides, first, ws


def test_a_direct_index_run_pins_its_commit_once_its_files_are_written(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`codeloupe index --store` (no queue) pinned the repository to the folder's new commit as it began: until
    it had rewritten them (minutes on a large repository), every changed file was cited at the new commit with its
    old text, and a run cut off midway left them so. Each file is now cited at the commit its text was read at
    while the run writes, the repository's pin moving once the files are all written; a run cut off leaves it."""
    root, overrides, first, ws = _indexed_at_first(tmp_path, pg_url, monkeypatch)
    second = _charges(root, ("alpha", "beta"), "second")
    [served] = open_shared(["svc"], overrides)

    def at(alpha: str, beta: str) -> dict[str, str]:
        return {"alpha.py": alpha, "beta.py": beta, "gamma.py": f"{first} return 'first'"}

    old, new = f"{first} return 'first'", f"{second} return 'second'"
    meanwhile: list[dict[str, str]] = []

    def once_alpha_is_written(told: Progress) -> None:
        assert told.message == "alpha.py"  # the first file written: beta.py is next
        meanwhile.append(_cited(served))

    try:
        # Cut off once alpha.py is written (asked before the next file is drawn).
        with pytest.raises(IndexStopped):
            ws.index(once_alpha_is_written, should_stop=lambda: meanwhile != [])
        assert meanwhile == [at(new, old)]
        assert served.revision == first and _cited(served) == at(new, old)
        assert "did not finish" in shared_repositories(pg_url)[0].indexing

        meanwhile.clear()
        ws.index(lambda told: meanwhile.append(_cited(served)))  # writes beta.py, all that is left
        assert meanwhile == [at(new, new)]
        assert served.revision == second
        assert _cited(served) == {**at(new, new), "gamma.py": f"{second} return 'first'"}  # unchanged: at the pin
        assert shared_repositories(pg_url)[0].indexing == ""
    finally:
        served.close()
        ws.close()


def test_a_direct_index_run_deletes_the_files_that_left_the_folder_as_it_pins_its_commit(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`codeloupe index --store` deleted the files that had left the folder as it began: while it wrote the rest,
    answers lacked files the commit still pinned holds, and a run cut off left the repository with neither those
    files nor the new pin. They now leave in the transaction that pins the run's commit, as a queued run's do."""
    root, overrides, first, ws = _indexed_at_first(tmp_path, pg_url, monkeypatch)
    second = _commit(root, {"alpha.py": "def charge_alpha_total():\n    return 'second'\n",
                            "beta.py": "def charge_beta_total():\n    return 'second'\n", "gamma.py": None})
    [served] = open_shared(["svc"], overrides)
    old, new, gamma = f"{first} return 'first'", f"{second} return 'second'", {"gamma.py": f"{first} return 'first'"}
    meanwhile: list[dict[str, str]] = []
    try:
        with pytest.raises(IndexStopped):  # cut off once alpha.py is written
            ws.index(lambda told: meanwhile.append(_cited(served)), should_stop=lambda: meanwhile != [])
        assert meanwhile == [{"alpha.py": new, "beta.py": old, **gamma}]
        assert served.revision == first and _cited(served) == meanwhile[0]

        meanwhile.clear()
        report = ws.index(lambda told: meanwhile.append(_cited(served)))  # beta.py written, the run not yet ended
        assert meanwhile == [{"alpha.py": new, "beta.py": new, **gamma}]
        assert report.files_deleted == 1
        assert served.revision == second
        assert _cited(served) == {"alpha.py": new, "beta.py": new}
        assert ws.status().files == 2
    finally:
        served.close()
        ws.close()


def test_a_direct_index_run_a_queued_run_superseded_midway_leaves_the_pin_to_it(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run queued at a newer revision while `index --store` still writes is the repository's newest: its last
    batch pins its revision, and the direct run, ending after it, pins nothing. Pinning its own older commit then,
    through the rows the queued run had written, it would cite them at that commit with the newer text. (The newer
    revision is the folder's commit with a file edited: a direct run whose folder moves to another commit stops.)
    The file that left the folder is the later run's to delete: the direct run's report counted it removed."""
    _writing_a_file_at_a_time(monkeypatch)
    root = tmp_path / "svc"
    overrides = {"store_url": pg_url, "embed_provider": "none"}
    _charges(root, ("alpha", "beta", "gamma", "delta"), "first")
    ws = Workspace(root, overrides=overrides)
    ws.index()
    (root / "delta.py").unlink()  # committed with the second commit
    second = _charges(root, ("alpha", "beta"), "second")
    edited = f"{second}{DIRTY_SUFFIX}"
    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")
    [served] = open_shared(["svc"], overrides)
    queued: list[int] = []

    def queue_a_newer_run_and_write_it(told: Progress) -> None:
        if not queued:  # alpha.py written: beta.py and gamma.py are queued with gamma.py edited, and written
            (root / "gamma.py").write_text("def charge_gamma_total():\n    return 'edited'\n")
            queued.append(enqueue_workspace(store, root, load_settings(root, overrides)).batches)
            assert run_worker(pg_url, {"embed_provider": "none"}, idle_exit_s=0, poll_s=0.01).batches == 1

    try:
        report = ws.index(queue_a_newer_run_and_write_it)  # then writes beta.py, read at the second commit
        assert queued == [1]
        assert report.files_deleted == 0
        assert served.revision == edited
        assert _cited(served) == {"alpha.py": f"{edited} return 'second'", "beta.py": f"{second} return 'second'",
                                  "gamma.py": f"{edited} return 'edited'"}
    finally:
        served.close()
        store.close()
        ws.close()


def test_a_saved_file_is_cited_at_the_revision_its_text_was_read_at(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save outside an index run (an editor's on a folder of the shared index) recorded the repository's pin: a
    file edited and saved, or saved once the folder had moved to another commit, was cited at the pinned commit,
    whose text differs. A saved file now records the folder's commit, with `-dirty` when it differs from it."""
    root, overrides, first, ws = _indexed_at_first(tmp_path, pg_url, monkeypatch)
    second = _charges(root, ("beta",), "second")
    (root / "alpha.py").write_text("def charge_alpha_total():\n    return 'edited'\n")
    [served] = open_shared(["svc"], overrides)
    try:
        ws.update_files(["beta.py"])
        ws.update_files([root / "alpha.py"])
        assert served.revision == first
        assert _cited(served) == {"alpha.py": f"{second}-dirty return 'edited'", "beta.py": f"{second} return 'second'",
                                  "gamma.py": f"{first} return 'first'"}
    finally:
        served.close()
        ws.close()


def test_a_save_of_more_files_than_are_compared_one_by_one_is_compared_as_the_whole_folder(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save of more files than `git status` is given one by one (a branch switch's saves, whose command line
    would outgrow what the system allows) is compared with its commit as the whole folder is: a file it does not
    save differing from the commit makes it `-dirty`, where a save of few files, each as its commit holds it, names
    the commit."""
    root, overrides, first, ws = _indexed_at_first(tmp_path, pg_url, monkeypatch)
    (root / "alpha.py").write_text("def charge_alpha_total():\n    return 'edited'\n")  # never saved

    def committed_alone(text: str) -> str:
        """beta.py and gamma.py returning `text`, committed without alpha.py's edit; the commit."""
        for name in ("beta", "gamma"):
            (root / f"{name}.py").write_text(f"def charge_{name}_total():\n    return '{text}'\n")
        _git(root, "commit", "-q", "-m", text, "--", "beta.py", "gamma.py")
        return _git(root, "rev-parse", "HEAD")

    [served] = open_shared(["svc"], overrides)
    try:
        second = committed_alone("second")
        ws.update_files(["beta.py", "gamma.py"])  # compared one by one: each as its commit holds it
        cited = _cited(served)
        assert (cited["beta.py"], cited["gamma.py"]) == (f"{second} return 'second'", f"{second} return 'second'")
        monkeypatch.setattr(shared_index, "SAVED_PATHS_COMPARED", 1)
        third = committed_alone("third")
        ws.update_files(["beta.py", "gamma.py"])  # compared as the whole folder: alpha.py differs
        cited = _cited(served)
        assert (cited["beta.py"], cited["gamma.py"]) == (f"{third}-dirty return 'third'",
                                                       f"{third}-dirty return 'third'"), cited
        assert cited["alpha.py"] == f"{first} return 'first'"
    finally:
        served.close()
        ws.close()


def test_a_file_saved_where_git_cannot_say_the_commit_is_cited_at_no_commit_as_a_run_there_cites_it(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save in a folder whose git fails (no longer a repository, git missing, a corrupt HEAD) recorded no
    revision for the file, which the repository read as "at the pin": the saved text was cited at the pinned
    commit, whose text differs. It is cited at no commit (`""`), as a direct run of that folder cites every
    file once it ends, and as its files are cited while it writes them."""
    root, overrides, first, ws = _indexed_at_first(tmp_path, pg_url, monkeypatch)
    (root / ".git").rename(tmp_path / "git-moved-away")  # no longer a repository: git names no commit
    (root / "alpha.py").write_text("def charge_alpha_total():\n    return 'edited'\n")
    [served] = open_shared(["svc"], overrides)
    try:
        ws.update_files(["alpha.py"])
        assert served.revision == first
        assert _cited(served) == {"alpha.py": " return 'edited'", "beta.py": f"{first} return 'first'",
                                  "gamma.py": f"{first} return 'first'"}
        shown = search_answer(served.search("charge alpha total"), 24_000)  # MCP's, as the CLI's shows it
        assert "\n## 1. `alpha.py` @ (no commit)  (" in shown, shown  # where a bare `@` said nothing
        (root / "beta.py").write_text("def charge_beta_total():\n    return 'edited'\n")
        meanwhile: list[dict[str, str]] = []
        ws.index(lambda told: meanwhile.append(_cited(served)))  # beta.py written, the run not yet ended
        assert meanwhile == [{"alpha.py": " return 'edited'", "beta.py": " return 'edited'",
                              "gamma.py": f"{first} return 'first'"}]
        assert served.revision == ""
        assert _cited(served) == {"alpha.py": " return 'edited'", "beta.py": " return 'edited'",
                                  "gamma.py": " return 'first'"}
    finally:
        served.close()
        ws.close()


def _write(store: PgStore, path: str) -> None:
    """A file of one function written to `store` as an index run or a save writes it."""
    text = f"def {path.removesuffix('.py')}_total():\n    return 1\n"
    store.replace_file(chunk_file(path, text, "python"), hash=path, size=len(text), mtime=1.0, is_doc=False,
                       encoding="utf-8", chunker_version=CHUNKER_VERSION, line_count=2)


def test_a_direct_index_run_is_its_threads_a_write_on_another_thread_is_none_of_it(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit of an index run writing the repository (`writing_run`) was the store's: a file another thread
    of the process wrote meanwhile recorded the run's commit whatever its text was read at. A run is now its
    thread's: another thread's writes record what they would outside a run, and its deletes are not held back
    for the run's pin."""
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)
    pinned, running = "a" * 40, "b" * 40
    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")
    started, release = threading.Event(), threading.Event()

    def run() -> None:
        with store.writing_run(str(tmp_path), running):
            _write(store, "run.py")
            started.set()
            release.wait(SAFETY_VALVE_S)

    try:
        with store.writing_run(str(tmp_path), pinned):
            _write(store, "gone.py")
        runner = threading.Thread(target=run)
        runner.start()
        try:
            assert started.wait(SAFETY_VALVE_S)
            _write(store, "saved.py")
            assert store.delete_files(["gone.py"]) == 1
            assert sorted(store.file_rows()) == ["run.py", "saved.py"]
            revisions = store.revisions()
            assert (revisions.pinned, revisions.of("run.py"), revisions.of("saved.py")) == (pinned, running, pinned)
        finally:
            release.set()
            runner.join(SAFETY_VALVE_S)
        revisions = store.revisions()  # the run's pin marks none of the rows another writer wrote meanwhile
        assert (revisions.pinned, revisions.of("run.py"), revisions.of("saved.py")) == (running, running, pinned)
    finally:
        store.close()


def test_a_file_saved_on_another_thread_while_a_run_holds_its_delete_is_kept_by_the_run_s_end(
        tmp_path: Path, pg_url: str) -> None:
    """A direct run's deletes wait for its pin: a file that had left the folder when the run began, put back and
    saved meanwhile (an editor's save, on another thread, writes it at once), was deleted by the run's end, and
    the index lacked a file on disk until it was saved or indexed again. The run deletes only the rows it found."""
    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")
    started, release = threading.Event(), threading.Event()
    ended: list[bool] = []

    def run() -> None:
        with store.writing_run(str(tmp_path), "b" * 40) as end:
            store.delete_files(["back.py"])  # gone from the folder as the run walked it
            started.set()
            release.wait(SAFETY_VALVE_S)
        ended.append(end.pinned)

    try:
        with store.writing_run(str(tmp_path), "a" * 40):
            _write(store, "back.py")
            _write(store, "kept.py")
        runner = threading.Thread(target=run)
        runner.start()
        try:
            assert started.wait(SAFETY_VALVE_S)
            _write(store, "back.py")  # put back and saved while the run writes the rest
        finally:
            release.set()
            runner.join(SAFETY_VALVE_S)
        assert ended == [True]
        assert sorted(store.file_rows()) == ["back.py", "kept.py"]
    finally:
        store.close()


def test_two_direct_runs_at_once_each_file_is_cited_at_the_commit_its_own_run_read_it_at(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `index --store` runs of one repository at once, at different commits (two checkouts at one path: CI
    runners, a teammate's machine). The run begun last is the newest: it pins its commit, the other pins nothing.
    Its pin marked every row written then, the other run's with them: a file the older run wrote after the newer
    one had written it was cited at the newer commit, with the older commit's text. A pin now marks the rows up to
    the first one another writer wrote since its run began at another commit: those keep their own revision."""
    monkeypatch.setattr(postgres, "STATE_TTL_S", 0.0)
    pinned, older_commit, newer_commit = "0" * 40, "a" * 40, "b" * 40
    older = PgStore(pg_url, "svc", local_dir=tmp_path / "older")
    newer = PgStore(pg_url, "svc", local_dir=tmp_path / "newer")
    try:
        with older.writing_run(str(tmp_path), pinned):
            for path in ("alpha.py", "beta.py", "gamma.py"):
                _write(older, path)
        with older.writing_run(str(tmp_path), older_commit):
            _write(older, "alpha.py")
            with newer.writing_run(str(tmp_path), newer_commit):
                _write(newer, "beta.py")
                _write(older, "beta.py")  # after the newer run's write of it, before its pin
                _write(newer, "gamma.py")
            assert newer.commit == newer_commit
            _write(older, "gamma.py")
        revisions = newer.revisions()
        assert newer.commit == newer_commit
        assert {path: revisions.of(path) for path in ("alpha.py", "beta.py", "gamma.py")} == \
            {"alpha.py": newer_commit, "beta.py": older_commit, "gamma.py": older_commit}
    finally:
        older.close()
        newer.close()


def test_a_direct_index_run_whose_folder_moves_to_another_commit_writes_nothing_it_read_since(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`codeloupe index --store` recorded every file at the commit the folder was at as the run began, even one read
    once a checkout had moved the folder to another commit: it was cited at the first commit with the other's text
    (a queued run's workers check the folder's commit around each batch). Before each group of files is written
    the run now compares the folder's commit with its own; once it moved, the run stops with nothing of the group
    written and its commit not pinned, each file written before cited at the commit it was read at."""
    root, overrides, first, ws = _indexed_at_first(tmp_path, pg_url, monkeypatch)
    second = _charges(root, ("alpha", "beta"), "second")
    [served] = open_shared(["svc"], overrides)
    moved: list[str] = []

    def move_once_alpha_is_written(told: Progress) -> None:
        if not moved:  # beta.py is read after this, at the third commit
            moved.append(_charges(root, ("beta",), "third"))

    try:
        with pytest.raises(postgres.StoreError, match="moved from commit"):
            ws.index(move_once_alpha_is_written)
        [third] = moved
        assert served.revision == first
        assert _cited(served) == {"alpha.py": f"{second} return 'second'", "beta.py": f"{first} return 'first'",
                                  "gamma.py": f"{first} return 'first'"}
        assert "did not finish" in shared_repositories(pg_url)[0].indexing
    finally:
        served.close()
        ws.close()
    capsys.readouterr()
    assert main(["index", str(root), "--store", pg_url, "--no-embed"]) == 0  # a run at the folder's commit now
    assert "indexed" in capsys.readouterr().out
    [served] = open_shared(["svc"], overrides)
    try:
        assert served.revision == third
        assert _cited(served) == {"alpha.py": f"{third} return 'second'", "beta.py": f"{third} return 'third'",
                                  "gamma.py": f"{third} return 'first'"}
    finally:
        served.close()


def whole_file(text: str, lines: list[str]) -> list[tuple[int, int, str]]:
    """A chunk strategy: the file as one chunk named "whole"."""
    return [(1, len(lines), "whole")]


def test_a_direct_index_run_chunks_again_the_files_a_changed_strategy_claims_without_dropping_them_first(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose chunk strategies differ from those the index was built with deleted every file either set claims
    as it began (so it would chunk them again): while it wrote them, answers lacked them all, and a run cut off left
    them out. They now stay, chunked as before, each chunked again as the run writes it."""
    root, overrides, first, ws = _indexed_at_first(tmp_path, pg_url, monkeypatch)
    [served] = open_shared(["svc"], overrides)
    meanwhile: list[dict[str, str]] = []
    add_chunk_strategy("whole-python", [".py"], whole_file)
    try:
        with pytest.raises(IndexStopped):  # cut off once alpha.py is written
            ws.index(lambda told: meanwhile.append(_cited(served)), should_stop=lambda: meanwhile != [])
        every = {f"{name}.py": f"{first} return 'first'" for name in ("alpha", "beta", "gamma")}
        assert meanwhile == [every] and _cited(served) == every
        ws.index()
        assert {name for (name,) in ws.store.query("SELECT name FROM chunks")} == {"whole"}
        assert _cited(served) == every
    finally:
        unregister_strategy("whole-python")
        served.close()
        ws.close()
