"""The command line over the shared index (run in this process): `index --store --queue`, `worker --store`,
`search --store --repo`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from codeloupe.cli import main
from processes import unprivileged

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"


def test_queued_by_index_filled_by_a_worker_searched_by_search(tmp_path: Path, pg_url: str,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = tmp_path / "service"
    shutil.copytree(FIXTURES / "python", root)
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc", "--queue"]) == 0
    assert capsys.readouterr().out.startswith("queued 1 batch of svc")
    assert main(["worker", "--store", pg_url, "--exit-when-idle", "0"]) == 0
    files = sum(1 for p in root.rglob("*") if p.is_file())
    assert f"1 batch, {files} files, 0 texts embedded, graph edges of 1 repository resolved" in \
        capsys.readouterr().err
    assert main(["search", str(root), "charge the card total price", "--store", pg_url, "--repo", "svc",
                 "--json", "--no-embed"]) == 0
    assert json.loads(capsys.readouterr().out)["core"]
    assert main(["index", str(root), "--store", pg_url, "--repo", "svc", "--no-embed"]) == 0
    assert "repository svc at the files on disk" in capsys.readouterr().out
    assert main(["index", str(root), "--queue"]) == 2
    assert "--store" in capsys.readouterr().err


def test_every_command_that_takes_store_takes_the_store_url_setting_where_it_is_left_out(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`index` and `search` took CODELOUPE_STORE_URL; `worker` and `admin` refused to start without `--store`."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    monkeypatch.setenv("CODELOUPE_STORE_URL", pg_url)
    root = tmp_path / "service"
    shutil.copytree(FIXTURES / "python", root)
    assert main(["index", str(root), "--repo", "svc", "--queue"]) == 0
    assert main(["admin", "queue"]) == 0
    assert "1 waiting, 0 claimed" in capsys.readouterr().out
    assert main(["worker", "--exit-when-idle", "0"]) == 0
    assert "1 batch, " in capsys.readouterr().err
    assert main(["admin", "--json", "repos"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["svc"]
    assert main(["search", "--repo", "svc", "charge the card total price", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["core"]
    # `--store` wins over the setting, as for every other setting
    assert main(["admin", "--store", pg_url.replace("/t_", "/nowhere_", 1), "repos"]) == 2
    assert "nowhere_" in capsys.readouterr().err


def test_a_password_in_the_store_url_is_never_printed(tmp_path: Path, pg_url: str,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq takes the password as a URL parameter too: it is left out of every report of the URL (`index`,
    `stats`, an error, `serve`'s /v1/status), as the user part's password is."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    root = tmp_path / "service"
    shutil.copytree(FIXTURES / "python", root)
    secret = "s3cret-Pa55"  # the test server trusts local connections: any password opens it
    url = f"{pg_url}&password={secret}&application_name=codeloupe"
    assert main(["index", str(root), "--store", url]) == 0
    assert main(["stats", str(root), "--store", url]) == 0
    out = capsys.readouterr().out
    assert out.count("application_name=codeloupe") == 2 and secret not in out
    unreachable = f"postgresql://someone:{secret}@127.0.0.1:1/x?password={secret}"
    assert main(["search", str(root), "anything", "--store", unreachable]) == 2
    out, err = capsys.readouterr()
    assert "127.0.0.1:1/x" in err and secret not in out + err


def test_a_repository_indexed_from_another_folder_is_replaced_only_when_asked(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`index --repo NAME` on a folder other than the one NAME was indexed from is refused, queued or not,
    saying how to do it (`--replace`) and leaving the repository as it was; a folder named like another's
    repository too."""
    from codeloupe.store.postgres import PgStore, repository_names

    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    first, other = tmp_path / "a" / "service", tmp_path / "b" / "service"
    shutil.copytree(FIXTURES / "python", first)
    shutil.copytree(FIXTURES / "go", other)
    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")

    def files() -> set[str]:
        return set(store.file_rows())

    assert main(["index", str(first), "--store", pg_url, "--repo", "svc", "--no-embed"]) == 0
    indexed = files()
    capsys.readouterr()
    for extra in ([], ["--queue"]):
        assert main(["index", str(other), "--store", pg_url, "--repo", "svc", *extra]) == 2
        err = capsys.readouterr().err
        assert f"holds the files of {first}" in err and "--replace" in err
        assert files() == indexed and store.source_root == str(first)
    assert main(["index", str(first), "--store", pg_url]) == 0  # repository "service" from a/service
    assert main(["index", str(other), "--store", pg_url]) == 2  # b/service: another folder of that name
    assert "--replace" in capsys.readouterr().err
    assert main(["index", str(other), "--store", pg_url, "--repo", "svc", "--replace", "--no-embed"]) == 0
    assert store.source_root == str(other) and files() and not files() & indexed
    assert sorted(repository_names(pg_url)) == ["service", "svc"]
    assert main(["index", str(other), "--replace"]) == 2
    assert "only with --store" in capsys.readouterr().err
    store.close()


def test_a_queued_replace_keeps_the_repository_answering_until_a_worker_writes_the_new_folder(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`index OTHER --queue --replace` deleted every file the old folder had and OTHER lacks at once: a folder of
    other files left the repository empty, every search answering nothing until a worker had written OTHER's
    files. The old files now answer until the worker writing the queue's last batch deletes them."""
    from codeloupe.store.postgres import PgStore

    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    first, other = tmp_path / "a" / "service", tmp_path / "b" / "service"
    shutil.copytree(FIXTURES / "python", first)
    shutil.copytree(FIXTURES / "go", other)
    assert main(["index", str(first), "--store", pg_url, "--repo", "svc"]) == 0
    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")
    indexed = set(store.file_rows())
    capsys.readouterr()

    def found() -> set[str]:
        assert main(["search", "--store", pg_url, "--repo", "svc", "charge the card total price", "--json"]) == 0
        return {hit["path"] for hit in json.loads(capsys.readouterr().out)["core"]}

    answered = found()
    assert answered and answered <= indexed
    assert main(["index", str(other), "--store", pg_url, "--repo", "svc", "--queue", "--replace"]) == 0
    assert set(store.file_rows()) == indexed and store.source_root == str(other)
    capsys.readouterr()
    assert found() == answered
    assert main(["worker", "--store", pg_url, "--exit-when-idle", "0"]) == 0
    capsys.readouterr()
    written = set(store.file_rows())
    assert written and not written & indexed and all(path in written for path in found())
    store.close()


def test_a_process_whose_folder_another_replaced_as_the_source_writes_nothing_into_the_repository(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that opened a folder as repository svc (an editor's folder, `serve PATH --store`) was never
    checked again once another replaced svc's source (`index OTHER --repo svc --replace`): its next save wrote
    its folder's file into svc, among the other folder's files. Its writes are now refused, naming both folders
    and the ways on, and svc keeps the other folder's files only."""
    from codeloupe.api import StoreError, Workspace
    from codeloupe.store.postgres import PgStore

    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    first, other = tmp_path / "a" / "service", tmp_path / "b" / "service"
    shutil.copytree(FIXTURES / "python", first)
    shutil.copytree(FIXTURES / "go", other)
    shared = {"store_url": pg_url, "store_repository": "svc"}
    editor = Workspace(first, overrides=shared)  # the first process: its folder is svc's source
    editor.index()
    replacing = Workspace(other, overrides=shared, replace_source=True)  # the second: `index --replace`
    replacing.index()
    replacing.close()
    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")
    replaced = store.file_rows()
    assert replaced and not any(path.endswith(".py") for path in replaced)
    saved = first / "src" / "shop" / "saved.py"
    saved.write_text("def saved_after_the_replace():\n    return 1\n")
    for write in (lambda: editor.update_files([saved]), editor.index):
        with pytest.raises(StoreError) as refused:
            write()
        message = str(refused.value)
        assert f"holds the files of {other}, not {first}" in message and "--replace" in message, message
    assert store.file_rows() == replaced and store.source_root == str(other)
    editor.close()
    store.close()


@pytest.mark.parametrize("write", ["save", "index"])
def test_a_replace_landing_between_a_writes_check_and_its_write_lets_nothing_of_the_old_folder_through(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, write: str) -> None:
    """The check that this process's folder is still the repository's source and the write it guards are one
    transaction: a replace (`index OTHER --repo svc --replace`) committing while a save or a re-index of the old
    folder is under way refuses that write, rather than letting the old folder's file in among the new source's
    (a re-index: rather than making the old folder the source again). The test holds the replace's update of
    the repository's row open (`PgStore.set_source`'s) until the write waits for it, then commits it."""
    import threading

    import psycopg

    from codeloupe.api import SourceConflict, StoreError, Workspace
    from codeloupe.store.postgres import PgStore

    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    first, other = tmp_path / "a" / "service", tmp_path / "b" / "service"
    shutil.copytree(FIXTURES / "python", first)
    shared = {"store_url": pg_url, "store_repository": "svc"}
    editor = Workspace(first, overrides=shared)
    editor.index()
    saved = first / "src" / "shop" / "saved.py"
    saved.write_text("def saved_during_the_replace():\n    return 1\n")
    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")
    outcome: list[BaseException | None] = []

    def write_the_old_folder() -> None:
        try:
            editor.update_files([saved]) if write == "save" else editor.index()
            outcome.append(None)
        except StoreError as exc:
            outcome.append(exc)

    replacing = psycopg.connect(pg_url)  # its first statement opens the transaction, held until committed
    writer = threading.Thread(target=write_the_old_folder)
    try:
        replacing.execute("UPDATE repositories SET root = %s, commit_sha = '' WHERE name = 'svc'", (str(other),))
        writer.start()
        _wait_for_a_lock_wait(pg_url)
        replacing.commit()
        writer.join(60)  # a bound for a failing run only
    finally:
        replacing.rollback()
        replacing.close()
        writer.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], SourceConflict), outcome
    assert f"holds the files of {other}, not {first}" in str(outcome[0])
    assert "src/shop/saved.py" not in store.file_rows() and store.source_root == str(other)
    editor.close()
    store.close()


def _wait_for_a_lock_wait(pg_url: str) -> None:
    """Until a session of the test's database waits for a lock (polled: no duration is asserted)."""
    import time

    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as watcher:
        for _ in range(1200):
            if watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                               " AND datname = current_database()").fetchone()[0]:
                return
            time.sleep(0.05)
    raise AssertionError("the write never waited for the replace's lock on the repository's row")


def test_a_process_whose_folder_another_replaced_as_the_source_answers_nothing_from_it(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that opened folder A as repository svc went on answering once another made folder B svc's
    source: its searches ranked B's chunks, and reading a hit (`get`, expand) showed A's file from disk under
    B's indexed lines. Its searches and reads are now refused, naming both folders, as its writes are."""
    from codeloupe.api import SourceConflict, Workspace

    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    first, other = tmp_path / "a" / "service", tmp_path / "b" / "service"
    shutil.copytree(FIXTURES / "python", first)
    shutil.copytree(FIXTURES / "python", other)
    (other / "src" / "shop" / "pricing.py").write_text("def total_price():\n    return 'indexed from b'\n")
    shared = {"store_url": pg_url, "store_repository": "svc"}
    editor = Workspace(first, overrides=shared)
    editor.index()
    assert "decimal" in editor.expand("src/shop/pricing.py").text
    replacing = Workspace(other, overrides=shared, replace_source=True)
    replacing.index()
    replacing.close()
    for read in (lambda: editor.search("total price"), lambda: editor.expand("src/shop/pricing.py"),
                 lambda: editor.read_lines("src/shop/pricing.py")):
        with pytest.raises(SourceConflict) as refused:
            read()
        assert f"holds the files of {other}, not {first}" in str(refused.value)
    editor.close()


def test_a_folder_is_not_answered_from_a_repository_indexed_from_another_folder(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """search, stats and get on a folder whose repository name holds another folder's files are refused, naming
    the ways on (the repository's own ranking would show this folder's files from disk as what was indexed);
    the repository searched with no folder answers with the code indexed."""
    from codeloupe.store.postgres import PgStore

    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    first, other = tmp_path / "a" / "service", tmp_path / "b" / "service"
    shutil.copytree(FIXTURES / "python", first)
    shutil.copytree(FIXTURES / "python", other)
    (other / "src" / "shop" / "pricing.py").write_text("def total_price():\n    return 'not the indexed code'\n")
    assert main(["index", str(first), "--store", pg_url, "--repo", "svc", "--no-embed"]) == 0
    store = PgStore(pg_url, "svc", local_dir=tmp_path / "local")
    indexed = store.file_rows()
    capsys.readouterr()
    for command in (["search", str(other), "total price", "--no-embed"], ["stats", str(other)],
                    ["get", str(other), "src/shop/pricing.py"]):
        assert main([*command, "--store", pg_url, "--repo", "svc"]) == 2, command
        out, err = capsys.readouterr()
        assert "not the indexed code" not in out and f"holds the files of {first}, not {other}" in err
        assert "--replace" in err and '`codeloupe search --store URL --repo svc "QUERY"`' in err
    assert store.file_rows() == indexed and store.source_root == str(first)
    assert main(["search", "total_price decimal", "--store", pg_url, "--repo", "svc", "--json"]) == 0
    shown = {hit["path"]: hit for hit in json.loads(capsys.readouterr().out)["core"]}
    assert "decimal.Decimal(0)" in shown["src/shop/pricing.py"]["chunks"][0]["text"]
    store.close()


def test_a_folder_indexed_under_another_name_is_named_when_asked_for_by_its_own(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's `index ~/src/billing-v2 --repo billing --replace`, then a search of that folder without
    --repo: refused as `billing-v2: not in the shared index ... (index the folder first, or name one it holds with
    --repo NAME)`, though its files are indexed, under another name. The refusal names that repository."""
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    first, second = tmp_path / "billing", tmp_path / "billing-v2"
    shutil.copytree(FIXTURES / "python", first)
    shutil.copytree(FIXTURES / "python", second)
    assert main(["index", str(first), "--store", pg_url]) == 0
    assert main(["index", str(second), "--store", pg_url, "--repo", "billing", "--replace"]) == 0
    capsys.readouterr()
    for command in (["search", str(second), "total price"], ["stats", str(second)]):
        assert main([*command, "--store", pg_url]) == 2, command
        err = capsys.readouterr().err
        assert "billing-v2: not in the shared index" in err and "(it holds billing)" in err, err
        assert "this folder is indexed as billing: name it with --repo billing" in err, err
    assert main(["search", str(first), "total price", "--store", pg_url, "--repo", "nobilling"]) == 2
    err = capsys.readouterr().err  # a folder no repository is indexed from: the general way on
    assert "nobilling: not in the shared index" in err and "index the folder first" in err, err
    assert main(["search", "total price", "--store", pg_url, "--repo", "billing-v2"]) == 2
    assert "this folder" not in capsys.readouterr().err  # no folder: a repository's name, not a folder asked for
    assert main(["search", str(second), "total price", "--store", pg_url, "--repo", "billing"]) == 0


def test_index_queue_keeps_the_unreadable_folders_count_and_names_as_index_does(tmp_path: Path, pg_url: str) -> None:
    """`index --queue` forgot the unreadable folders `index` had named but kept the count `index` stored: stats
    said 'unreadable folder 1' and '... and 1 more', naming none, and went on saying it once the folder could be
    read. The queue now remembers the walk's unreadable folders and their count as `index` does."""
    root = tmp_path / "service"
    shutil.copytree(FIXTURES / "python", root)
    locked = root / "locked"
    locked.mkdir()
    # A child that a chmod 0 stops reaches the server's socket only through a folder it may pass (as a user's)
    sockets = Path(parse_qs(urlsplit(pg_url).query)["host"][0])
    mode = sockets.stat().st_mode & 0o7777

    def codeloupe(*args: str) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "codeloupe", *args, str(root), "--store", pg_url, "--repo",
                               "svc", "--embed-provider", "none"], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ), **unprivileged())
        assert done.returncode == 0, done.stderr
        return [line.strip() for line in done.stdout.splitlines() if "unreadable" in line]

    sockets.chmod(mode | 0o011)
    locked.chmod(0)
    try:
        codeloupe("index")
        indexed = codeloupe("stats", "--skipped")
        codeloupe("index", "--queue")
        queued = codeloupe("stats", "--skipped")
        locked.chmod(0o755)
        codeloupe("index", "--queue")
        readable = codeloupe("stats", "--skipped")
    finally:
        locked.chmod(0o755)
        sockets.chmod(mode)
    assert "locked/  (unreadable folder)" in indexed, indexed
    assert queued == indexed
    assert readable == []


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _committed(tmp_path: Path) -> tuple[Path, str]:
    """A copy of the python fixture committed in a new git repository, and its commit."""
    if shutil.which("git") is None:
        pytest.fail("git is not installed: these tests need it, as CI has it")
    root = tmp_path / "service"
    shutil.copytree(FIXTURES / "python", root)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        _git(root, *args)
    return root, _git(root, "rev-parse", "HEAD")


def test_a_folder_with_uncommitted_edits_is_pinned_to_no_commit(tmp_path: Path, pg_url: str) -> None:
    """`index --store` of a folder with an uncommitted edit said `at <HEAD>` and every answer named HEAD, while
    `git show HEAD:file` has the old text. It is now pinned to `<HEAD>-dirty`, in words on stderr; a clean folder
    (the edit committed) is pinned to its commit again."""
    import psycopg

    root, head = _committed(tmp_path)
    edited = next(p for p in sorted(root.rglob("*.py")) if p.stat().st_size)
    edited.write_text(edited.read_text() + "\ndef uncommitted_helper():\n    return 42\n")

    def codeloupe(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "codeloupe", *args, "--store", pg_url, "--repo", "svc",
                               "--embed-provider", "none"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done

    indexed = codeloupe("index", str(root))
    assert f"repository svc at {head}-dirty" in indexed.stdout
    assert f"differ from commit {head}" in indexed.stderr and "clean checkout" in indexed.stderr
    found = json.loads(codeloupe("search", "uncommitted_helper", "--json").stdout)
    assert found["core"] and {chunk["revision"] for chunk in found["core"]} == {f"{head}-dirty"}
    with psycopg.connect(pg_url) as conn:
        assert {r[0] for r in conn.execute("SELECT commit_sha FROM files")} == {f"{head}-dirty"}
    # The lines that shorten a revision keep the suffix (cut to 12 characters, it read as the commit).
    assert f"@ {head[:12]}-dirty" in codeloupe("search", "uncommitted_helper").stdout
    repos = subprocess.run([sys.executable, "-m", "codeloupe", "admin", "--store", pg_url, "repos"],
                           capture_output=True, text=True, timeout=120)
    assert f"@ {head[:12]}-dirty" in repos.stdout, repos.stdout + repos.stderr

    _git(root, "commit", "-q", "-a", "-m", "y")
    clean = codeloupe("index", str(root))
    committed = _git(root, "rev-parse", "HEAD")
    assert f"repository svc at {committed}\n" in clean.stdout and "warning" not in clean.stderr
    # Its files, rows read while the folder was dirty and unchanged since, are cited at the commit now.
    found = json.loads(codeloupe("search", "uncommitted_helper", "--json").stdout)
    assert {hit["revision"] for hit in found["core"] + found["related"]} == {committed}
