"""Forge: the census, strategies written by the (scripted) chat model and accepted only by the partition
check, and strategy files that run only with the user's trust in their exact bytes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from chat_server import ChatServer, Reply
from codeloupe.api import Workspace, add_chunk_strategy
from codeloupe.chunk import chunk_file, detect_language
from codeloupe.chunk.strategies import (
    Strategy,
    StrategyError,
    apply_strategy,
    load_workspace_strategies,
    unregister_strategy,
)
from codeloupe.cli import main
from codeloupe.trust import TRUSTED, TrustStore, file_digest

GOOD = '''import re

EXTENSIONS = (".zog",)


def chunk(text, lines):
    if not lines:
        return []
    starts = [i + 1 for i, line in enumerate(lines) if re.match(r"rule ", line)]
    if not starts or starts[0] != 1:
        starts = [1] + starts
    ends = [s - 1 for s in starts[1:]] + [len(lines)]
    return [(s, e, lines[s - 1].split()[1] if lines[s - 1].startswith("rule ") else "")
            for s, e in zip(starts, ends)]
'''
OVERLAPPING = '''EXTENSIONS = (".zog",)


def chunk(text, lines):
    return [(1, len(lines)), (1, len(lines))]
'''
ESCAPING = '''import os

EXTENSIONS = (".zog",)


def chunk(text, lines):
    os.system("touch /tmp/forged")
    return [(1, len(lines))]
'''


def fenced(code: str) -> str:
    return f"Here is the strategy.\n\n```python\n{code}```\n"


def zog(name: str, rules: int) -> str:
    return "".join(f"rule {name}{i} {{\n  when x > {i}\n  then y\n}}\n" for i in range(rules))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "rules").mkdir(parents=True)
    (root / "rules" / "alpha.zog").write_text("# header comment\n" + zog("alpha", 3))
    (root / "rules" / "beta.zog").write_text(zog("beta", 2))
    (root / "rules" / "gamma.zog").write_text(zog("gamma", 4))
    (root / "one.qux").write_text("a lone file\n")
    (root / "main.py").write_text("def main():\n    return 1\n")
    (root / "README.md").write_text("# Title\n\nText.\n")
    (root / "notes.txt").write_text("plain prose\n")
    return root


def open_ws(root: Path, chat: ChatServer | None = None) -> Workspace:
    overrides = {"embed_provider": "none"}
    if chat is not None:
        overrides |= {"chat_base_url": chat.base_url, "chat_model": "scripted"}
    return Workspace(root, overrides=overrides)


def chunks_of(ws: Workspace, path: str) -> list[tuple[int, int, str, str]]:
    row = ws.store.file_rows()[path]
    return ws.store.query("SELECT start_line, end_line, kind, name FROM chunks WHERE file_id=? ORDER BY ord",
                          (row.id,))


# ---------------------------------------------------------------------- the census


def test_scan_counts_only_the_extensions_no_chunker_covers(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(repo), "--json", "--embed-provider", "none"]) == 0
    census = json.loads(capsys.readouterr().out)
    assert [(c["extension"], c["files"]) for c in census["uncovered"]] == [(".zog", 3), (".qux", 1)]
    assert census["uncovered"][0]["paths"] == ["rules/alpha.zog", "rules/beta.zog", "rules/gamma.zog"]
    assert (census["files"], census["covered"]) == (7, 3)  # main.py, README.md, notes.txt
    assert main(["scan", str(repo), "--json", "--embed-provider", "none"]) == 0
    assert json.loads(capsys.readouterr().out) == census  # deterministic


def test_scan_of_a_folder_never_indexed_opens_no_index(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`scan` opened the workspace's index to count files on disk, so a folder never indexed was left an empty
    index (a command that reads nothing of it leaving state behind, as `stats` did before it refused such a
    folder), after which the folder looked indexed to every command's workspace lookup. The census is of the
    files alone: it is given, and the cache holds nothing after it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("CODELOUPE_CACHE_DIR", str(cache))
    assert main(["scan", str(repo), "--embed-provider", "none"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{repo}: 7 files, 3 covered by a chunker"
    assert not cache.exists() or not any(path.is_file() for path in cache.rglob("*")), list(cache.rglob("*"))


def test_scan_text_says_one_file_not_one_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It said "1 file, no chunker of their own"."""
    (tmp_path / "one.qux").write_text("a lone file\n")
    for name in ("a.zz", "b.zz"):
        (tmp_path / name).write_text("a pair\n")
    assert main(["scan", str(tmp_path), "--embed-provider", "none"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{tmp_path}: 3 files, 0 covered by a chunker",
                                                    "  .zz                  2 files, no chunker of their own  (forge can write one)",
                                                    "  .qux                 1 file, no chunker of its own"]


def test_scan_says_every_file_type_has_a_chunker_only_when_codeloupes_own_files_have_one_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file under `.codeloupe/` no chunker covers is in no list of the census: the text said "2 files, 1
    covered by a chunker" and then "every file type has a chunker"."""
    (tmp_path / "main.py").write_text("def main():\n    return 1\n")
    (tmp_path / ".codeloupe").mkdir()
    (tmp_path / ".codeloupe" / "notes.qux").write_text("kept beside the settings\n")
    assert main(["scan", str(tmp_path), "--embed-provider", "none"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path}: 2 files, 1 covered by a chunker",
        "  every file type outside .codeloupe/ has a chunker",
        "  .codeloupe/          1 file of codeloupe's own, no chunker (no chunk strategy cuts it)"]
    (tmp_path / ".codeloupe" / "notes.qux").unlink()
    assert main(["scan", str(tmp_path), "--embed-provider", "none"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{tmp_path}: 1 file, 1 covered by a chunker",
                                                    "  every file type has a chunker"]


def test_scan_counts_an_extension_its_strategy_chunks_as_forged_whatever_codeloupes_own_folder_holds(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A strategy never claims a file under `.codeloupe/`: the census asked whether an extension is forged of its
    first file only, and with `.codeloupe/x.zog` first it reported `.zog` uncovered beside its trusted strategy;
    then it counted that file among those the strategy chunks (the fallback chunker cuts it)."""
    strategy = repo / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(GOOD)
    assert main(["trust", "--strategy", str(strategy)]) == 0
    (repo / ".codeloupe" / "x.zog").write_text(zog("own", 1))
    capsys.readouterr()
    assert main(["scan", str(repo), "--json", "--embed-provider", "none"]) == 0
    census = json.loads(capsys.readouterr().out)
    assert [(c["extension"], c["files"], c["strategy"]) for c in census["forged"]] == [(".zog", 3, "zog")], census
    assert census["forged"][0]["paths"] == ["rules/alpha.zog", "rules/beta.zog", "rules/gamma.zog"]
    assert [c["extension"] for c in census["uncovered"]] == [".qux"]  # not .zog: no strategy cuts .codeloupe/x.zog
    assert (census["files"], census["covered"]) == (9, 7)  # the strategy module is Python


def test_chunks_cuts_a_file_as_its_workspace_index_does(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`codeloupe chunks` chunked with the default budget and no workspace strategy: it showed a partition the
    index of the file's workspace never held."""
    (repo / ".codeloupe.toml").write_text("chunk_budget = 100\n")  # a harmless setting: no trust needed
    (repo / "main.py").write_text("".join(f"def step_{i}(value):\n    return value * {i} + len('{'x' * 40}')\n\n\n"
                                          for i in range(6)))
    strategy = repo / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(GOOD)
    assert main(["trust", "--strategy", str(strategy)]) == 0
    ws = open_ws(repo)
    try:
        ws.index()
        indexed = {path: chunks_of(ws, path) for path in ("rules/alpha.zog", "main.py")}
    finally:
        ws.close()
    assert len(indexed["main.py"]) > 1 and [kind for *_, kind, _ in indexed["rules/alpha.zog"]] != []
    for path, chunks in indexed.items():
        capsys.readouterr()
        assert main(["chunks", str(repo / path), "--json"]) == 0
        shown = [(r["start_line"], r["end_line"], r["kind"], r["name"]) for r in json.loads(capsys.readouterr().out)]
        assert shown == [tuple(chunk) for chunk in chunks], path
    assert main(["chunks", str(repo / "main.py"), "--json", "--chunk-budget", "4000"]) == 0
    assert len(json.loads(capsys.readouterr().out)) < len(indexed["main.py"])  # the flag `index` takes, on top


# ---------------------------------------------------------------------- forging with the scripted model


def test_a_good_strategy_is_accepted_written_trusted_and_used_without_the_model(repo: Path) -> None:
    with ChatServer() as chat:
        chat.add(Reply(text=fenced(GOOD)))
        ws = open_ws(repo, chat)
        try:
            [outcome] = ws.forge()
            assert outcome.accepted and outcome.extension == ".zog" and outcome.files == 3
            assert [a.problems for a in outcome.attempts] == [[]]
            prompt = chat.requests[0]["messages"][1]["content"]
            assert "1-based, inclusive `(start, end)`" in prompt  # the real contract's text
            assert "rule gamma3 {" in prompt and "EXTENSIONS = (\".zog\",)" in prompt
            written = repo / ".codeloupe" / "strategies" / "zog.py"
            assert outcome.path == str(written)
            assert TrustStore.default().strategy_state(written, file_digest(written.read_bytes())) == TRUSTED
            calls = len(chat.received)
            ws.index()
            assert chunks_of(ws, "rules/gamma.zog") == [(1, 4, "block", "gamma0"), (5, 8, "block", "gamma1"),
                                                         (9, 12, "block", "gamma2"), (13, 16, "block", "gamma3")]
            assert chunks_of(ws, "rules/alpha.zog")[0][:2] == (1, 1)  # the header before the first rule
            assert ws.search("gamma2").core[0].path == "rules/gamma.zog"
            assert len(chat.received) == calls  # indexing and search never call the model
        finally:
            ws.close()
    reopened = open_ws(repo)  # a new process loads the trusted file without a warning
    try:
        assert reopened.strategy_load.warnings == [] and [s.name for s in reopened.strategies()] == ["zog"]
    finally:
        reopened.close()


def forged_after_a_repair(repo: Path, first: str) -> tuple[Any, list[dict[str, Any]]]:
    """Forge `.zog` with a model whose first answer is `first` and whose repair is GOOD: the outcome, and the
    repair request's messages."""
    with ChatServer() as chat:
        chat.add(Reply(text=fenced(first)), Reply(text=fenced(GOOD), when="failed the check"))
        ws = open_ws(repo, chat)
        try:
            [outcome] = ws.forge([".zog"])
        finally:
            ws.close()
        return outcome, chat.requests[1]["messages"]


def test_a_broken_strategy_is_repaired_on_the_second_attempt(repo: Path) -> None:
    outcome, repair = forged_after_a_repair(repo, OVERLAPPING)
    assert outcome.accepted and [len(a.problems) for a in outcome.attempts] == [3, 0]
    assert repair[2] == {"role": "assistant", "content": fenced(OVERLAPPING)}
    assert "rules/alpha.zog: not a line partition: chunk 1 (lines 1-13) starts at line 1; expected 14" \
        in repair[3]["content"]
    assert (repo / ".codeloupe" / "strategies" / "zog.py").read_text().endswith(GOOD)


def test_a_strategy_that_never_passes_writes_nothing_after_three_attempts(
        repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    marker = repo.parent / "forged-marker"
    with ChatServer() as chat:
        chat.add(Reply(text=fenced(ESCAPING.replace("/tmp/forged", str(marker)))),
                 Reply(text=fenced(OVERLAPPING), times=2))
        monkeypatch.setenv("CODELOUPE_CHAT_BASE_URL", chat.base_url)
        monkeypatch.setenv("CODELOUPE_CHAT_MODEL", "scripted")
        status = main(["forge", str(repo), "--ext", "zog", "--embed-provider", "none", "--json"])
        assert len(chat.requests) == 3
    assert status == 1
    [outcome] = json.loads(capsys.readouterr().out)
    assert not outcome["accepted"] and "in 3 attempts" in outcome["reason"]
    assert "imports 'os'" in outcome["attempts"][0]["problems"][0]  # refused before any of it ran
    assert not marker.exists()
    assert not (repo / ".codeloupe").exists()
    assert TrustStore.default().strategy_entries() == []


def test_forge_needs_enough_uncovered_files(repo: Path) -> None:
    from codeloupe.forge import ForgeError

    with ChatServer() as chat:
        ws = open_ws(repo, chat)
        try:
            with pytest.raises(ForgeError, match=r"\.qux"):
                ws.forge([".qux"])
        finally:
            ws.close()
        assert chat.received == []


def test_forge_without_a_chat_model_says_where_to_set_one(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`codeloupe forge` with no chat model ended on "forge needs a chat model: no chat model configured", where
    `ask` and `flows --warm` say which settings, variables and flags set one."""
    monkeypatch.delenv("CODELOUPE_CHAT_BASE_URL", raising=False)
    monkeypatch.delenv("CODELOUPE_CHAT_MODEL", raising=False)
    assert main(["forge", str(repo), "--embed-provider", "none"]) == 2
    said = capsys.readouterr().err
    assert "forge asks a chat model: set chat_base_url and chat_model in your config.toml" in said, said
    assert "CODELOUPE_CHAT_BASE_URL" in said and "--chat-base-url" in said, said
    assert not (repo / ".codeloupe").exists()


# ---------------------------------------------------------------------- trust decides what runs


def hostile_strategy(root: Path, marker: Path) -> Path:
    path = root / ".codeloupe" / "strategies" / "zog.py"
    path.parent.mkdir(parents=True)
    path.write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n" + GOOD)
    return path


def test_a_cloned_strategy_file_runs_nothing_until_its_bytes_are_trusted(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = repo.parent / "imported-marker"
    path = hostile_strategy(repo, marker)
    assert main(["index", str(repo), "--no-embed", "--embed-provider", "none"]) == 0
    assert not marker.exists()
    assert "not loading the chunk strategy" in capsys.readouterr().err
    assert main(["trust", "--strategy", str(path)]) == 0
    load = load_workspace_strategies(repo)  # trusted, it still runs only within the strategy contract
    assert load.strategies == [] and not marker.exists()
    assert "imports 'pathlib'" in load.warnings[0]
    path.write_text(GOOD)
    assert main(["trust", "--strategy", str(path)]) == 0
    ws = open_ws(repo)  # trusted: imported, and the index re-chunks the files it claims
    try:
        ws.index()
        assert chunks_of(ws, "rules/beta.zog") == [(1, 4, "block", "beta0"), (5, 8, "block", "beta1")]
    finally:
        ws.close()
    assert main(["trust", "--list"]) == 0
    assert f"strategy {path}  trusted" in capsys.readouterr().out
    path.write_text(path.read_text() + "# edited\n")
    assert main(["trust", "--list"]) == 0
    assert f"strategy {path}  CHANGED" in capsys.readouterr().out
    load = load_workspace_strategies(repo)
    assert load.strategies == [] and not marker.exists()
    assert "CHANGED since you trusted it" in load.warnings[0]
    assert main(["trust", "--revoke", "--strategy", str(path)]) == 0
    assert TrustStore.default().strategy_entries() == []
    ws = open_ws(repo)  # the strategy is gone: its files go back to the built-in chunkers
    try:
        ws.index()
        assert all(kind != "block" for _, _, kind, _ in chunks_of(ws, "rules/beta.zog"))
    finally:
        ws.close()


def test_a_strategy_folder_link_is_never_written_through(repo: Path, tmp_path: Path) -> None:
    from codeloupe.forge import ForgeError

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / ".codeloupe").symlink_to(elsewhere)
    with ChatServer() as chat:
        chat.add(Reply(text=fenced(GOOD)))
        ws = open_ws(repo, chat)
        try:
            with pytest.raises(ForgeError, match="link"):
                ws.forge()
        finally:
            ws.close()
    assert list(elsewhere.iterdir()) == []


def test_forge_takes_the_chat_model_on_its_command_line_as_ask_does(repo: Path) -> None:
    """`forge` had no --chat-base-url / --chat-model: only settings files or variables could name the model."""
    with ChatServer() as chat:
        chat.add(Reply(text=fenced(GOOD)))
        assert main(["forge", str(repo), "--embed-provider", "none", "--chat-base-url", chat.base_url,
                     "--chat-model", "scripted"]) == 0
    assert (repo / ".codeloupe" / "strategies" / "zog.py").read_text().endswith(GOOD)


def test_a_strategy_that_cannot_be_trusted_is_not_left_written(repo: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A trust store that cannot be written (its folder a file, read-only) ended `codeloupe forge` in a traceback
    after the strategy was written, leaving a file every index then warned about as untrusted."""
    (tmp_path / "not-a-folder").write_text("", encoding="utf-8")
    monkeypatch.setenv("CODELOUPE_CONFIG_DIR", str(tmp_path / "not-a-folder"))
    with ChatServer() as chat:
        chat.add(Reply(text=fenced(GOOD)))
        assert main(["forge", str(repo), "--embed-provider", "none", "--chat-base-url", chat.base_url,
                     "--chat-model", "scripted"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(".zog: nothing written: the strategy passed the check but could not be trusted ("), out
    assert not (repo / ".codeloupe" / "strategies" / "zog.py").exists()


# ---------------------------------------------------------------------- strategies from the API, and failures


def python_halves(text: str, lines: list[str]) -> list[tuple[int, int]]:
    return [(1, len(lines))] if lines else []


def raises_on_beta(text: str, lines: list[str]) -> list[tuple[int, int]]:
    if "beta" in text.lower():
        raise ValueError("cannot read beta")
    return [(1, len(lines))]


# A module of two definitions, each over the budget `chunked_as_without` chunks at: its grammar cuts it in two.
ADDS = "".join(f"    total += {i}\n" for i in range(40))
TOOLS = (f"def alpha(total):\n{ADDS}    return total\n\n\nclass Beta:\n    def gamma(self, total):\n"
         f"{ADDS.replace('    ', '        ')}        return total\n")
BUDGET = 400


def chunked_as_without(ws: Workspace, path: str) -> list[tuple[int, int, str, str]]:
    """The chunks the built-in chunkers give the file, with no strategy at all."""
    text = (ws.root / path).read_text()
    return [(c.start_line, c.end_line, c.kind, c.name)
            for c in chunk_file(path, text, detect_language(path, text[:200]), BUDGET).chunks]


def test_an_api_strategy_runs_ahead_of_the_built_ins_and_a_failing_file_falls_back_to_its_built_in_chunker(
        repo: Path, caplog: pytest.LogCaptureFixture) -> None:
    (repo / "tools.py").write_text(TOOLS)
    add_chunk_strategy("python-or-fail", [".py"], raises_on_beta)
    add_chunk_strategy("zog-or-fail", ["zog"], raises_on_beta)
    try:
        ws = Workspace(repo, overrides={"embed_provider": "none", "chunk_budget": BUDGET})
        try:
            ws.index()
            assert chunks_of(ws, "main.py") == [(1, 2, "block", "")]
            assert chunks_of(ws, "rules/alpha.zog") == [(1, 13, "block", "")]
            # The files it fails on are chunked as without it: tools.py by the Python grammar, beta.zog as text.
            assert chunks_of(ws, "tools.py") == chunked_as_without(ws, "tools.py") == [
                (1, 42, "function", "alpha"), (43, 87, "class", "Beta")]
            assert chunks_of(ws, "rules/beta.zog") == chunked_as_without(ws, "rules/beta.zog")
            assert "cannot read beta" in caplog.text
            reasons = dict(ws.store.query("SELECT path, fallback_reason FROM files"))
            assert reasons["tools.py"] == "strategy python-or-fail: ValueError: cannot read beta"
            assert reasons["main.py"] == ""
            assert "gamma" in {name for (name,) in ws.store.query("SELECT name FROM symbols")}
        finally:
            ws.close()
    finally:
        unregister_strategy("python-or-fail")
        unregister_strategy("zog-or-fail")


def hangs(text: str, lines: list[str]) -> list[tuple[int, int]]:
    while True:
        pass


def test_a_hanging_strategy_is_cut_off_on_the_main_thread_and_on_a_server_thread() -> None:
    text = zog("x", 2)
    lines = text.splitlines(keepends=True)
    with pytest.raises(StrategyError, match="time bound"):
        apply_strategy(Strategy("hangs", (".zog",), function=hangs), text, lines, timeout_s=0.2)
    release = threading.Event()  # ends the abandoned call when the test is done (a real hang never would)

    def waits(text: str, lines: list[str]) -> list[tuple[int, int]]:
        release.wait(30)
        return [(1, len(lines))]

    errors: list[BaseException] = []

    def on_thread() -> None:  # where the language server indexes
        for _ in range(2):
            try:
                apply_strategy(Strategy("waits-on-thread", (".zog",), function=waits), text, lines, timeout_s=0.2)
            except StrategyError as exc:
                errors.append(exc)

    worker = threading.Thread(target=on_thread)
    worker.start()
    worker.join(5)
    release.set()
    assert not worker.is_alive()
    assert "time bound" in str(errors[0])
    assert "disabled in this process" in str(errors[1])  # never started again after it ran late


def test_chunk_file_falls_back_when_a_strategy_returns_no_partition() -> None:
    text = zog("x", 2)
    gapped = Strategy("gapped", (".zog",), function=lambda t, lines: [(1, 2), (4, len(lines))])
    chunked = chunk_file("a.zog", text, "text", strategies=[gapped])
    assert chunked.fallback_reason.startswith("strategy gapped: not a line partition")
    assert chunked.chunks == chunk_file("a.zog", text, "text").chunks  # as without the strategy: text sections
    assert chunk_file("a.zog", text, "no-such-grammar", strategies=[gapped]).fallback_reason == (
        f"{chunked.fallback_reason}; no grammar for 'no-such-grammar'")  # and line windows where that is all


def backtracks(text: str, lines: list[str]) -> list[tuple[int, int]]:
    import re

    re.match(r"(a+)+$", "a" * 64 + "b")  # exponential: hours without the bound
    return [(1, len(lines))]


def test_a_catastrophic_regular_expression_is_cut_off_too() -> None:
    text = zog("x", 1)
    with pytest.raises(StrategyError, match="time bound"):
        apply_strategy(Strategy("backtracks", (".zog",), function=backtracks), text, text.splitlines(keepends=True),
                       timeout_s=0.2)


# Each reaches `os` without importing it or naming anything forbidden; the allowed modules were handed out whole.
THROUGH_A_MODULE = '''import re

EXTENSIONS = (".zog",)
re.enum.sys.modules["os"].system("touch MARKER")


def chunk(text, lines):
    return [(1, len(lines))]
'''
THROUGH_A_FRAME = '''EXTENSIONS = (".zog",)


def frames():
    yield running.gi_frame.f_back


def chunk(text, lines):
    global running
    running = frames()
    caller = next(running)
    while caller is not None:
        if "logging" in caller.f_globals:
            caller.f_globals["logging"].os.system("touch MARKER")
        caller = caller.f_back
    return [(1, len(lines))]
'''
THROUGH_A_WRAPPER = '''import functools
import re

EXTENSIONS = (".zog",)


def chunk(text, lines):
    functools.update_wrapper(chunk, re.compile, assigned=(), updated=("__globals__",))
    enum.sys.modules["os"].system("touch MARKER")
    return [(1, len(lines))]
'''


def test_forged_code_reaches_nothing_but_the_text_modules_it_may_import(repo: Path) -> None:
    marker = repo.parent / "forged-marker"
    with ChatServer() as chat:
        chat.add(*(Reply(text=fenced(code.replace("MARKER", str(marker))), times=1)
                   for code in (THROUGH_A_MODULE, THROUGH_A_FRAME, THROUGH_A_WRAPPER)))
        ws = open_ws(repo, chat)
        try:
            [outcome] = ws.forge([".zog"])
        finally:
            ws.close()
    assert not marker.exists()
    assert not outcome.accepted and [bool(a.problems) for a in outcome.attempts] == [True, True, True]
    assert not (repo / ".codeloupe").exists()


# Dunders that no Name or Attribute node names: a match statement's class pattern reads attributes named as
# plain strings (a reviewer's probe ran `touch` through os.system this way), and a parameter's name.
ESCAPES_BY_NAME = {
    "a match pattern": '''EXTENSIONS = (".zog",)


def chunk(text, lines):
    match text:
        case object(__class__=cls):
            match cls:
                case object(__mro__=mro):
                    match mro[-1]:
                        case object(__subclasses__=subclasses):
                            for sub in subclasses():
                                match sub:
                                    case object(__name__="_wrap_close", __init__=init):
                                        match init:
                                            case object(__globals__=g):
                                                g["system"]("touch MARKER")
    return [(1, len(lines))]
''',
    "a keyword's name": '''EXTENSIONS = (".zog",)


def chunk(text, lines, __class__=None):
    return [(1, len(lines))]
''',
}


@pytest.mark.parametrize("source", ESCAPES_BY_NAME.values(), ids=list(ESCAPES_BY_NAME))
def test_a_dunder_named_as_a_plain_string_is_refused_before_anything_runs(tmp_path: Path, source: str) -> None:
    from codeloupe.chunk.strategies import StrategyError, compile_strategy

    marker = tmp_path / "pattern-marker"
    with pytest.raises(StrategyError, match="refused"):
        _, chunk = compile_strategy(source.replace("MARKER", str(marker)), "zog.py")
        chunk("x", ["x"])  # what the code did when it was not refused
    assert not marker.exists()


# ------------------------------------------------------------- a strategy's regular expressions run on RE2

# Python's engine takes hours on this line (2^40 ways to split the a's); nothing can cut it off on a thread.
CATASTROPHIC = '''import re

EXTENSIONS = (".zog",)


def chunk(text, lines):
    for line in lines:
        re.match(r"(a+)+$", line)
    return [(1, len(lines))] if lines else []
'''
ON_A_WRITER_THREAD = '''
import sys, threading
from codeloupe.api import Workspace

kinds = []
def index():  # as the language server does: on a writer thread
    ws = Workspace(sys.argv[1], overrides={"embed_provider": "none"})
    ws.index()
    row = ws.store.file_rows()["rules/bad.zog"]
    kinds.extend(r[0] for r in ws.store.query("SELECT kind FROM chunks WHERE file_id=?", (row.id,)))
    ws.close()

writer = threading.Thread(target=index)
writer.start()
writer.join()
print(kinds)
'''


def test_a_catastrophic_pattern_in_a_trusted_strategy_cannot_hang_indexing_on_a_thread(repo: Path) -> None:
    (repo / "rules" / "bad.zog").write_text("a" * 40 + "b\n" + zog("bad", 1))
    strategy = repo / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(CATASTROPHIC)
    assert main(["trust", "--strategy", str(strategy)]) == 0
    # In a process of its own: the old engine held the interpreter lock for hours, so no thread of the
    # test could have noticed; this timeout only ends a hung run.
    try:
        done = subprocess.run([sys.executable, "-c", ON_A_WRITER_THREAD, str(repo)], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("indexing on a thread hung on the strategy's regular expression")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['block']"  # the strategy ran to its end: RE2 answered at once


LOOKBEHIND = GOOD.replace('re.match(r"rule ", line)', 're.search(r"(?<!#)rule ", line)')
BACKREFERENCE_CONSTANT = GOOD.replace('EXTENSIONS = (".zog",)', 'RULE = r"(rule) \\1"\nEXTENSIONS = (".zog",)').replace(
    're.match(r"rule ", line)', 're.match(RULE, line)')


def test_forge_sends_a_pattern_re2_cannot_run_back_to_the_model_before_running_it(repo: Path) -> None:
    outcome, repair = forged_after_a_repair(repo, LOOKBEHIND)
    assert outcome.accepted and [len(a.problems) for a in outcome.attempts] == [1, 0]
    [problem] = outcome.attempts[0].problems
    assert problem.startswith("line 9: RE2 (linear time) cannot run '(?<!#)rule '")
    assert "lookahead and lookbehind are not supported" in repair[3]["content"]


def test_a_stored_strategy_with_a_pattern_re2_cannot_run_is_refused_when_loaded(repo: Path) -> None:
    strategy = repo / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(BACKREFERENCE_CONSTANT)
    assert main(["trust", "--strategy", str(strategy)]) == 0
    load = load_workspace_strategies(repo)
    assert load.strategies == []
    [warning] = load.warnings
    assert f"the trusted chunk strategy {strategy} failed to load" in warning
    assert "RE2 (linear time) cannot run '(rule) \\\\1': backreferences are not supported" in warning


RUN_TIME_PATTERNS = '''import re

EXTENSIONS = (".zog",)


def chunk(text, lines):
    re.compile("(?" + "=rule)")  # made at run time: refused when it is compiled
    return [(1, len(lines))]
'''
END_OF_TEXT = '''import re

EXTENSIONS = (".zog",)


def chunk(text, lines):
    re.search(r"\\}$", text)  # Python's `$`: the end, or before a last newline, of a text of many lines
    return [(1, len(lines))]
'''


@pytest.mark.parametrize(("source", "why"), [
    (RUN_TIME_PATTERNS, "lookahead and lookbehind are not supported"),
    (END_OF_TEXT, "`$` without re.MULTILINE in a text of several lines ending in a newline has no RE2 form"),
])
def test_a_pattern_re2_cannot_run_made_at_run_time_sends_the_file_to_its_built_in_chunker(source: str, why: str) -> None:
    strategy = Strategy("zog", (".zog",), source, file_digest(source.encode()), origin="zog.py")
    text = zog("x", 2)
    with pytest.raises(StrategyError, match="cannot run|has no RE2 form") as raised:
        apply_strategy(strategy, text, text.splitlines(keepends=True))
    assert why in str(raised.value)
    chunked = chunk_file("a.zog", text, "text", strategies=[strategy])
    assert chunked.fallback_reason.startswith("strategy zog: error: ") and why in chunked.fallback_reason
    assert chunked.chunks == chunk_file("a.zog", text, "text").chunks


# ------------------------------------------------ off the main thread a strategy runs in a worker process

LOOPS = '''EXTENSIONS = (".zog",)


def chunk(text, lines):
    while True:
        pass
'''
HOLDS_IN_C = '''import math

EXTENSIONS = (".zog",)


def chunk(text, lines):
    math.factorial(10 ** 7)
    return [(1, len(lines))]
'''
# One block over the strategy's cap (512 MiB over its worker's own) and well under this test's guard (3 GiB), so
# only the project's own cap can make it fail: the guard alone would let it through.
HUNGRY = '''EXTENSIONS = (".zog",)


def chunk(text, lines):
    block = "x" * 1_200_000_000
    return [(1, len(lines))] if block else []
'''
# Opens and indexes the workspace: on a writer thread, as the language server does ("thread"), or on the main
# thread, as `codeloupe index` does ("main"). Then what is left: threads, child processes and how they stand
# (R: running), and this process's peak memory.
INDEX_AND_REPORT = '''
import json, os, sys, threading
from pathlib import Path
from codeloupe.api import Workspace

reasons, warnings = {}, []
def index():
    ws = Workspace(sys.argv[1], overrides={"embed_provider": "none"})
    ws.index()
    reasons.update(ws.store.query("SELECT path, fallback_reason FROM files"))
    warnings.extend(ws.strategy_load.warnings)
    ws.close()

if sys.argv[2] == "main":
    index()
else:
    writer = threading.Thread(target=index, name="codeloupe-writer-repo")
    writer.start()
    writer.join()
processes = []  # (state, parent) of each process, read once: the machine's processes come and go meanwhile
for p in Path("/proc").glob("[0-9]*"):
    try:
        processes.append((p / "stat").read_text().rsplit(")", 1)[1].split()[:2])
    except OSError:  # it ended since the listing
        pass
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1]
print(json.dumps({"reasons": reasons, "warnings": warnings, "threads": [t.name for t in threading.enumerate()],
                  "children": [state for state, parent in processes if parent == str(os.getpid())],
                  "peak_kib": int(peak)}))
'''
TEST_PROCESS_MEMORY = 3 * 2**30  # the machine's guard, should the strategy's memory go unbounded


def _cap_test_process() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (TEST_PROCESS_MEMORY, TEST_PROCESS_MEMORY))


def index_in_a_process(repo: Path, source: str, where: str) -> dict[str, Any]:
    """Index `repo` with `source` as its trusted `.zog` strategy in a process of its own, capped at
    TEST_PROCESS_MEMORY; what INDEX_AND_REPORT reports."""
    strategy = repo / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(source)
    assert main(["trust", "--strategy", str(strategy)]) == 0
    # In a process of its own: a call into C holds the interpreter lock for as long as it runs, so no thread of
    # the test could notice; this timeout only ends a run that was held up.
    try:
        done = subprocess.run([sys.executable, "-c", INDEX_AND_REPORT, str(repo), where], capture_output=True,
                              text=True, timeout=120, preexec_fn=_cap_test_process)
    except subprocess.TimeoutExpired:
        pytest.fail(f"indexing on the {where} thread was held up by the strategy")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_bounded(left: dict[str, Any], why: str) -> None:
    """Every .zog file fell back to the built-in chunker with the strategy's reason, `why` among them, and nothing of
    the strategy is left running, nor ever held this process's memory."""
    for path in ("rules/alpha.zog", "rules/beta.zog", "rules/gamma.zog"):
        assert left["reasons"][path].startswith("strategy zog: ")
    assert why in left["reasons"]["rules/alpha.zog"] + left["reasons"]["rules/beta.zog"]
    assert left["threads"] == ["MainThread"]  # no strategy left running on a thread of the process
    assert "R" not in left["children"]  # nor in a worker process
    assert left["peak_kib"] < 1024 * 1024  # the strategy's memory was never this process's


@pytest.mark.parametrize(("source", "why"), [(LOOPS, "time bound"), (HOLDS_IN_C, "time bound"),
                                              (HUNGRY, "ran out of memory")], ids=["loops", "in-c", "hungry"])
def test_a_late_or_hungry_strategy_cannot_hold_up_or_exhaust_indexing_on_a_thread(
        repo: Path, source: str, why: str) -> None:
    assert_bounded(index_in_a_process(repo, source, "thread"), why)


# A call into C that would run for hours: sum's loop over a range checks for no signal, so on a main thread an
# interval timer could only cut it off once it returned.
HOLDS_IN_C_FOR_HOURS = '''EXTENSIONS = (".zog",)


def chunk(text, lines):
    sum(range(10 ** 13))
    return [(1, len(lines))]
'''
# Modules whose top level holds or exhausts whatever runs it; their EXTENSIONS is a literal.
TOP_LEVEL_IN_C = '''import math

EXTENSIONS = (".zog",)
TABLE = math.factorial(10 ** 7)


def chunk(text, lines):
    return [(1, len(lines))]
'''
TOP_LEVEL_FOR_HOURS = TOP_LEVEL_IN_C.replace("math.factorial(10 ** 7)", "sum(range(10 ** 13))")
TOP_LEVEL_HUNGRY = TOP_LEVEL_IN_C.replace("math.factorial(10 ** 7)", '"x" * 1_200_000_000')
# EXTENSIONS the top level computes: only running the module (in the worker) tells what it claims.
TOP_LEVEL_EXTENSIONS_IN_C = '''import math

EXTENSIONS = (".zog",) if math.factorial(10 ** 7) else ()


def chunk(text, lines):
    return [(1, len(lines))]
'''


@pytest.mark.parametrize(("where", "source", "why"), [
    ("main", HOLDS_IN_C_FOR_HOURS, "time bound"),
    ("main", HUNGRY, "ran out of memory"),
    ("main", TOP_LEVEL_IN_C, "time bound"),
    ("main", TOP_LEVEL_FOR_HOURS, "time bound"),
    ("thread", TOP_LEVEL_FOR_HOURS, "time bound"),
    ("main", TOP_LEVEL_HUNGRY, "ran out of memory"),
], ids=["main-in-c", "main-hungry", "top-level-in-c", "top-level-for-hours", "top-level-on-a-thread",
        "top-level-hungry"])
def test_a_strategy_runs_within_the_worker_bounds_on_the_main_thread_and_at_its_top_level(
        repo: Path, where: str, source: str, why: str) -> None:
    """`codeloupe index` (the main thread), and opening any workspace (a module's top level), give a strategy
    the same bounds as the language server: no in-process time or memory of its own. A top level that fails
    is said once, as a load warning."""
    left = index_in_a_process(repo, source, where)
    assert_bounded(left, why)
    at_top_level = source in (TOP_LEVEL_IN_C, TOP_LEVEL_FOR_HOURS, TOP_LEVEL_HUNGRY)
    assert ["zog.py failed to load (" in w and why in w for w in left["warnings"]] == ([True] if at_top_level else [])


def test_a_top_level_that_computes_extensions_runs_in_the_worker_and_fails_the_load(repo: Path) -> None:
    left = index_in_a_process(repo, TOP_LEVEL_EXTENSIONS_IN_C, "main")
    [warning] = left["warnings"]
    assert "failed to load (ran past its time bound of 2s (its worker process was stopped))" in warning
    assert not left["reasons"]["rules/alpha.zog"].startswith("strategy zog")  # not loaded: the built-ins chunk
    assert "R" not in left["children"] and left["peak_kib"] < 1024 * 1024


# A trusted strategy claiming .py: EXTENSIONS is a literal, so it loads without running; its top level raises.
PYTHON_TOP_LEVEL_RAISES = '''EXTENSIONS = (".py",)
TABLE = 1 / 0


def chunk(text, lines):
    return [(1, len(lines))]
'''
PYTHON_RAISES_ON_BETA = '''EXTENSIONS = (".py",)


def chunk(text, lines):
    if "class Beta" in text:
        raise ValueError("cannot read Beta")
    return [(1, len(lines))]
'''


def trusted_python_strategy(repo: Path, source: str) -> Path:
    (repo / "tools.py").write_text(TOOLS)
    (repo / "more.py").write_text(TOOLS.replace("alpha", "delta"))
    strategy = repo / ".codeloupe" / "strategies" / "py.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(source)
    assert main(["trust", "--strategy", str(strategy)]) == 0
    return strategy


def test_a_trusted_strategy_whose_top_level_fails_leaves_its_files_to_their_grammar_and_warns_once(
        repo: Path) -> None:
    strategy = trusted_python_strategy(repo, PYTHON_TOP_LEVEL_RAISES)
    ws = Workspace(repo, overrides={"embed_provider": "none", "chunk_budget": BUDGET})
    try:
        assert [s.name for s in ws.strategy_load.strategies] == ["py"] and ws.strategy_load.warnings == []
        report = ws.index()
        for path in ("tools.py", "more.py", "main.py"):  # chunked by the Python grammar, the reason recorded
            assert chunks_of(ws, path) == chunked_as_without(ws, path)
        assert chunks_of(ws, "more.py") == [(1, 42, "function", "delta"), (43, 87, "class", "Beta")]
        reasons = dict(ws.store.query("SELECT path, fallback_reason FROM files"))
        for path in ("tools.py", "more.py", "main.py"):
            assert reasons[path] == "strategy py: its module did not load: ZeroDivisionError: division by zero"
        assert {"alpha", "delta", "gamma"} <= {name for (name,) in ws.store.query("SELECT name FROM symbols")}
        # Said once, as a load warning, not once a file.
        [warning] = report.strategy_warnings
        assert warning == (f"codeloupe: the trusted chunk strategy {strategy} failed to load (ZeroDivisionError: "
                           "division by zero); the files it claims are chunked as they would be without it")
        assert ws.strategy_load.warnings == [warning]
        (repo / "tools.py").write_text(TOOLS + "\n\ndef epsilon():\n    return 3\n")
        assert ws.update_files([repo / "tools.py"]).strategy_warnings == [warning]
        assert ws.strategy_load.warnings == [warning]
        assert chunks_of(ws, "tools.py")[0] == (1, 42, "function", "alpha")
    finally:
        ws.close()


def test_the_files_a_strategy_failed_on_are_listed_by_stats_and_mcp_status(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A strategy's failure was kept only as each file's `fallback_reason` in the index: nothing a user reads
    (`codeloupe stats`, MCP's `status`) said which files were not chunked as planned, or why."""
    import json

    from codeloupe.cli import main

    trusted_python_strategy(repo, PYTHON_TOP_LEVEL_RAISES)
    ws = Workspace(repo, overrides={"embed_provider": "none", "chunk_budget": BUDGET})
    try:
        ws.index()
        why = "strategy py: its module did not load: ZeroDivisionError: division by zero"
        problems = [(p.path, p.reason) for p in ws.chunking_problems()]
        assert problems == [(path, why) for path in ("main.py", "more.py", "tools.py")]
    finally:
        ws.close()
    args = [str(repo), "--embed-provider", "none", "--chunk-budget", str(BUDGET)]
    assert main(["stats", *args]) == 0
    said = capsys.readouterr().out
    assert "chunking  3 files not chunked as planned" in said and "(--skipped lists them)" in said
    assert main(["stats", *args, "--skipped"]) == 0
    said = capsys.readouterr().out
    assert f"    more.py  ({why})" in said
    assert main(["stats", *args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["chunking_problems"][0] == {"path": "main.py", "reason": why}

    import anyio
    from mcp import Client

    from codeloupe_mcp.server import build_server
    from codeloupe_serving.warm import WarmWorkspace

    async def status() -> dict:
        async with Client(build_server(warm)) as client:
            answer = await client.call_tool("status", {})
            return json.loads("".join(part.text for part in answer.content))

    warm = WarmWorkspace(repo)
    try:
        told = anyio.run(status)
    finally:
        warm.close()
    assert told["chunking_problems"][1] == {"path": "more.py", "reason": why}
    assert told["chunking_problems_not_listed"] == 0


PYTHON_IN_ONE_BLOCK = 'EXTENSIONS = (".py",)\n\n\ndef chunk(text, lines):\n    return [(1, len(lines), "all")]\n'


def test_codeloupes_own_files_are_indexed_but_never_chunked_by_a_strategy(repo: Path) -> None:
    """A strategy claiming .py claimed its own module too (and any other .py under `.codeloupe/`): codeloupe's own
    files are indexed as the workspace's other files are, chunked as they would be without any strategy."""
    strategy = trusted_python_strategy(repo, PYTHON_IN_ONE_BLOCK)
    (strategy.parent.parent / "notes.py").write_text(TOOLS)
    ws = Workspace(repo, overrides={"embed_provider": "none", "chunk_budget": BUDGET})
    try:
        assert [s.name for s in ws.strategy_load.strategies] == ["py"]
        ws.index()
        assert {name for *_, name in chunks_of(ws, "tools.py")} == {"all"}  # the strategy chunks the workspace's .py
        for path in (".codeloupe/strategies/py.py", ".codeloupe/notes.py"):
            assert chunks_of(ws, path) == chunked_as_without(ws, path)
        assert chunks_of(ws, ".codeloupe/notes.py")[0] == (1, 42, "function", "alpha")
        assert ws.chunking_problems() == []
    finally:
        ws.close()
    add_chunk_strategy("python-in-one-block", [".py"], in_one_block)  # nor does one registered through the API
    try:
        for path in ("tools.py", ".codeloupe/notes.py", "nested/.codeloupe/strategies/py.py"):
            chunks = chunk_file(path, TOOLS, "python", BUDGET).chunks
            assert ({c.name for c in chunks} == {"all"}) is (path == "tools.py")
    finally:
        unregister_strategy("python-in-one-block")


def in_one_block(text: str, lines: list[str]) -> list[tuple[int, int, str]]:
    return [(1, len(lines), "all")]


def test_codeloupe_index_says_once_that_a_strategy_did_not_load(repo: Path) -> None:
    strategy = trusted_python_strategy(repo, PYTHON_TOP_LEVEL_RAISES)
    done = subprocess.run([sys.executable, "-m", "codeloupe", "index", str(repo), "--no-embed", "--embed-provider",
                           "none"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(f"the trusted chunk strategy {strategy} failed to load (ZeroDivisionError") == 1, \
        done.stderr
    assert "its module did not load" not in done.stderr  # no line for each file


@pytest.mark.parametrize("command", [["index", "{repo}", "--embed-provider", "none"],
                                     ["chunks", "{repo}/rules/alpha.zog"]])
def test_a_command_that_ran_a_strategy_ends_without_its_worker_s_traceback(repo: Path, command: list[str]) -> None:
    # At exit multiprocessing ends the daemon strategy worker with SIGTERM; forked, it had the CLI's SIGTERM
    # handler, which raised there, and every command that ran a trusted strategy ended in its traceback.
    (repo / ".git").mkdir()  # the root `chunks` finds above the file
    strategy = repo / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(GOOD)
    assert main(["trust", "--strategy", str(strategy)]) == 0
    done = subprocess.run([sys.executable, "-m", "codeloupe", *(a.format(repo=repo) for a in command)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "zog" in done.stdout and "alpha0" in done.stdout if command[0] == "chunks" else "zog 3" in done.stdout, \
        done.stdout
    assert "Traceback" not in done.stderr and "codeloupe-strategy-worker" not in done.stderr, done.stderr


def test_a_trusted_strategy_failing_on_one_file_leaves_that_file_to_its_grammar(repo: Path) -> None:
    trusted_python_strategy(repo, PYTHON_RAISES_ON_BETA)
    ws = Workspace(repo, overrides={"embed_provider": "none", "chunk_budget": BUDGET})
    try:
        report = ws.index()
        assert chunks_of(ws, "tools.py") == chunked_as_without(ws, "tools.py") == [
            (1, 42, "function", "alpha"), (43, 87, "class", "Beta")]
        assert chunks_of(ws, "main.py") == [(1, 2, "block", "")]  # the strategy chunks the others
        reasons = dict(ws.store.query("SELECT path, fallback_reason FROM files"))
        assert reasons["tools.py"] == "strategy py: ValueError: cannot read Beta" and reasons["main.py"] == ""
        assert report.strategy_warnings == [] and ws.strategy_load.warnings == []  # the module did load
    finally:
        ws.close()


def test_extensions_are_read_from_the_syntax_tree_only_where_running_the_module_cannot_change_them() -> None:
    from codeloupe.chunk.strategies import literal_extensions, strategy_extensions

    tail = "\n\ndef chunk(text, lines):\n    return [(1, len(lines))]\n"
    assert literal_extensions('EXTENSIONS = (".ZOG", "zag")' + tail) == (".zog", ".zag")
    assert literal_extensions('EXTENSIONS: tuple = [".zog"]' + tail) == (".zog",)
    computed = {  # each read from the syntax tree would claim something else than the module does when it runs
        'EXTENSIONS = [".zog"]\nEXTENSIONS.append(".zag")': (".zog", ".zag"),
        'EXTENSIONS = (".zog",)\nEXTENSIONS = (".zag",)': (".zag",),
        'EXTENSIONS = tuple(".zog zag".split())': (".zog", ".zag"),
        'if True:\n    EXTENSIONS = (".zag",)': (".zag",),
    }
    for head, claimed in computed.items():
        source = head + tail
        assert literal_extensions(source) is None
        assert strategy_extensions(source, file_digest(source.encode()), "zog.py") == claimed


# A module whose top level keeps a table of most of the worker's cap, one whose chunk needs more than what is left
# beside it, and small ones.
KEEPS_A_TABLE = 'EXTENSIONS = (".zog",)\nTABLE = "x" * 400_000_000\n\ndef chunk(text, lines):\n    return [(1, 1)]\n'
ALLOCATES_PER_CALL = '''EXTENSIONS = (".zog",)


def chunk(text, lines):
    block = "x" * 200_000_000
    return [(1, 1)] if block else []
'''
SMALL = 'EXTENSIONS = (".zog",)\n\ndef chunk(text, lines):\n    return [(1, 1)]\n'


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker's memory is capped on Linux only")
def test_a_module_keeping_a_large_table_is_let_go_once_enough_other_modules_ran() -> None:
    """The worker keeps at most KEPT_MODULES compiled modules under its one memory cap (forge's candidates, each
    version trusted anew, every workspace of a server): one more starts a fresh worker, so a module that kept
    a large table leaves the others its memory."""
    from codeloupe.chunk import strategy_process

    def ranges(source: str, sha256: str) -> list[list[int | str]]:
        return strategy_process.run_in_worker(source, sha256, f"{sha256}.py", "a\n", 30.0)

    assert ranges(KEEPS_A_TABLE, "table") == [[1, 1, ""]]
    with pytest.raises(strategy_process.StrategyProcessError, match="ran out of memory"):
        ranges(ALLOCATES_PER_CALL, "allocates")  # beside the table, over the cap
    for n in range(strategy_process.KEPT_MODULES):
        assert ranges(SMALL, f"small-{n}") == [[1, 1, ""]]
    assert ranges(ALLOCATES_PER_CALL, "allocates") == [[1, 1, ""]]


# Starts the strategy worker from this process's only thread (so it is forked), says the worker's pid, then dies by
# SIGKILL, as a CLI killed by the system or a user does: no exit handler runs.
STARTS_WORKER_THEN_DIES = '''
import os, signal, sys
from codeloupe.chunk import strategy_process

source = 'EXTENSIONS = (".zog",)\\ndef chunk(text, lines):\\n    return [(1, len(lines))]\\n'
assert strategy_process.run_in_worker(source, "sha", "zog.py", "a\\n", 30.0) == [[1, 1, ""]]
print(strategy_process._worker.process.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
'''


def _running(pid: int) -> bool:
    """Whether process `pid` exists and has not ended (a zombie has ended: it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_strategy_worker_ends_when_the_process_that_started_it_is_killed() -> None:
    # Its output is read up to the pid only: the worker inherited the pipe, so reading to its end would wait for
    # the worker too.
    with subprocess.Popen([sys.executable, "-c", STARTS_WORKER_THEN_DIES], stdout=subprocess.PIPE, text=True) as run:
        assert run.stdout is not None
        worker = int(run.stdout.readline())
        assert run.wait(60) == -9
    # The worker notices within a second or two; this deadline only ends a test whose worker stays.
    for _ in range(300):
        if not _running(worker):
            return
        threading.Event().wait(0.1)
    import os
    import signal

    os.kill(worker, signal.SIGKILL)
    pytest.fail("the strategy worker outlived the process that started it")


def test_a_strategy_call_cut_off_by_ctrl_c_leaves_no_answer_behind_for_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C lands while this process waits for the worker's answer (the worker itself ignores it): the answer
    still on its way must not be taken for the next file's."""
    from multiprocessing.connection import Connection

    from codeloupe.chunk import strategy_process

    source = 'EXTENSIONS = (".zog",)\n\n\ndef chunk(text, lines):\n    return [(i + 1, i + 1) for i in range(len(lines))]\n'
    sha256 = file_digest(source.encode())
    assert strategy_process.run_in_worker(source, sha256, "zog.py", "a\n", 30.0) == [[1, 1, ""]]  # started
    poll = Connection.poll

    def interrupted(self: Connection, timeout: float = 0.0) -> bool:
        monkeypatch.setattr(Connection, "poll", poll)
        raise KeyboardInterrupt

    monkeypatch.setattr(Connection, "poll", interrupted)  # this process's end only: the worker runs already
    with pytest.raises(KeyboardInterrupt):
        strategy_process.run_in_worker(source, sha256, "zog.py", "a\nb\n", 30.0)
    assert strategy_process.run_in_worker(source, sha256, "zog.py", "a\nb\nc\n", 30.0) == [
        [1, 1, ""], [2, 2, ""], [3, 3, ""]]



# Ptrace-attaches to process argv[1] and holds it until killed: a traced process that ends is a zombie only its
# tracer sees, so its parent cannot reap it meanwhile (as one that takes long to die, or is not reaped in time on a
# loaded machine). Killed, not told through its stdin: a worker started meanwhile is forked with that pipe's end.
HOLDS_REAPING = '''
import ctypes, signal, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_SEIZE = 0x4206
if libc.ptrace(PTRACE_SEIZE, int(sys.argv[1]), None, None) != 0:
    print("refused", ctypes.get_errno(), flush=True)
    sys.exit(1)
print("holding", flush=True)
signal.pause()
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="holds the worker's reaping with ptrace")
def test_a_strategy_worker_stopped_but_not_reaped_yet_is_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed by the system is stopped and not asked again, even while its reaping is late (not within
    `_REAP_S`, here none at all): it was kept, its pipe closed, and the next file failed with it."""
    import os
    import signal

    from codeloupe import parallel
    from codeloupe.chunk import strategy_process

    source = 'EXTENSIONS = (".zog",)\n\n\ndef chunk(text, lines):\n    return [(1, len(lines))]\n'
    sha256 = file_digest(source.encode())
    assert strategy_process.run_in_worker(source, sha256, "zog.py", "a\n", 30.0) == [[1, 1, ""]]  # started
    assert strategy_process._worker is not None
    killed = strategy_process._worker.process.pid
    monkeypatch.setattr(parallel, "REAP_S", 0.0)  # its reaping is looked for once, not waited for
    with subprocess.Popen([sys.executable, "-c", HOLDS_REAPING, str(killed)], stdout=subprocess.PIPE,
                          text=True) as tracer:
        assert tracer.stdout is not None
        held = tracer.stdout.readline().strip()
        if held != "holding":
            tracer.wait(30)
            pytest.skip(f"this machine does not let a process trace its sibling ({held})")
        try:
            os.kill(killed, signal.SIGKILL)  # as the system's out-of-memory killer does
            with pytest.raises(strategy_process.StrategyProcessError, match="its worker process ended"):
                strategy_process.run_in_worker(source, sha256, "zog.py", "a\n", 30.0)
            # The next file is answered, by a new worker.
            assert strategy_process.run_in_worker(source, sha256, "zog.py", "a\nb\n", 30.0) == [[1, 2, ""]]
            assert strategy_process._worker is not None and strategy_process._worker.process.pid != killed
        finally:
            tracer.kill()
            tracer.wait(30)


class _RunsOnUnpickling:
    """What an escaped strategy could send down the worker's pipe: unpickled, it creates a file (it could run any
    call at all)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.path,))


def test_what_the_strategy_worker_sends_back_is_never_unpickled(tmp_path: Path) -> None:
    """The worker's answers are read as JSON: a strategy that got out of its sandbox and onto the worker's end of
    the pipe could otherwise have the process that chunks (an editor's server) run a call of its choosing."""
    from multiprocessing import Pipe

    from codeloupe.chunk import strategy_process

    source = 'EXTENSIONS = (".zog",)\n\n\ndef chunk(text, lines):\n    return [(1, len(lines))]\n'
    sha256 = file_digest(source.encode())
    assert [list(r) for r in strategy_process.run_in_worker(source, sha256, "zog.py", "a\n", 30.0)] == [[1, 1, ""]]
    worker = strategy_process._worker
    assert worker is not None
    # The escaped strategy's end of the pipe: what it writes is what this process reads next.
    ours, escaped = Pipe()
    worker.connection.close()
    worker.connection = ours
    ran = tmp_path / "ran"
    escaped.send(("ok", _RunsOnUnpickling(ran)))
    with pytest.raises(strategy_process.StrategyProcessError, match="answered something else"):
        worker.call((source, sha256, "zog.py", "b\n", 30.0), 30.0)
    assert not ran.exists()
    escaped.close()
    strategy_process.stop_worker()
    # A worker started afresh answers again.
    assert strategy_process.run_in_worker(source, sha256, "zog.py", "a\nb\n", 30.0) == [[1, 2, ""]]


def test_an_answer_nested_too_deep_to_read_fails_the_strategy_and_stops_its_worker(tmp_path: Path) -> None:
    """JSON nested deeper than the interpreter's recursion limit (a few kilobytes of `[`) is not a ValueError but
    a RecursionError: an escaped strategy that wrote it on the pipe made the check of a module being forged (or
    loaded) raise out of `loaded_extensions` instead of failing that module."""
    from multiprocessing import Pipe

    from codeloupe.chunk import strategy_process
    from codeloupe.chunk.strategies import StrategyError, loaded_extensions

    source = 'EXTENSIONS = (".zog",)\n\n\ndef chunk(text, lines):\n    return [(1, len(lines))]\n'
    sha256 = file_digest(source.encode())
    assert strategy_process.run_in_worker(source, sha256, "zog.py", "a\n", 30.0) == [[1, 1, ""]]
    worker = strategy_process._worker
    assert worker is not None
    ours, escaped = Pipe()
    worker.connection.close()
    worker.connection = ours
    escaped.send_bytes(b"[" * 100_000)  # read as the answer to the next request
    other = source.replace(".zog", ".zig")
    with pytest.raises(StrategyError, match="answered something else"):
        loaded_extensions(other, file_digest(other.encode()), "zig.py")
    assert not worker.process.is_alive() and ours.closed  # not trusted again
    assert strategy_process._worker is None
    escaped.close()
    assert strategy_process.run_in_worker(source, sha256, "zog.py", "a\nb\n", 30.0) == [[1, 2, ""]]


# A partition of a 1 MB file (the default max_file_bytes) of one-line records, each range named with a label of
# 120 characters: about 70 MB as JSON, over what the process that chunks reads back.
LABELLED_RECORDS = '''EXTENSIONS = (".zog",)
LABEL = "a record of the ledger, one per line, " * 4


def chunk(text, lines):
    return [(i + 1, i + 1, LABEL) for i in range(len(lines))]
'''


def test_an_answer_over_the_bound_read_back_fails_saying_so_and_keeps_the_worker() -> None:
    """A strategy's answer over `MAX_ANSWER_BYTES` (a large file partitioned finely, with long names) was cut off
    by the process that chunks after its length alone: the worker was killed and the file's fallback said
    "its worker process ended (exit code -9)", as if it had crashed. The worker now says the answer is too
    large, and goes on."""
    from codeloupe.chunk import strategy_process

    sha256 = file_digest(LABELLED_RECORDS.encode())
    with pytest.raises(strategy_process.StrategyProcessError,
                       match=r"its answer \(500000 ranges\) is \d+ MiB as JSON, over the 64 MiB"):
        strategy_process.run_in_worker(LABELLED_RECORDS, sha256, "zog.py", "x\n" * 500_000, 60.0)
    worker = strategy_process._worker
    assert worker is not None and worker.process.is_alive()
    assert strategy_process.run_in_worker(LABELLED_RECORDS, sha256, "zog.py", "x\n", 60.0) == [
        [1, 1, ("a record of the ledger, one per line, " * 4)[:120]]]  # names are cut to 120 characters
    assert strategy_process._worker is worker


# A strategy answering a one-line file with a million named ranges (about 400 MB once this process had read them
# back), and one whose module claims three million extensions.
MILLION_RANGES = '''EXTENSIONS = (".zog",)


def chunk(text, lines):
    return [(1, len(lines), "n" * 119 + str(i % 10)) for i in range(1_000_000)]
'''
MILLIONS_OF_EXTENSIONS = '''EXTENSIONS = tuple(".z" + str(i) for i in range(3_000_000))


def chunk(text, lines):
    return [(1, len(lines))]
'''
APPLY_AND_REPORT = '''
import json, sys
from codeloupe.chunk import strategies
from codeloupe.chunk.strategies import Strategy, StrategyError, apply_strategy, strategy_extensions
from codeloupe.trust import file_digest

strategies.STRATEGY_TIMEOUT_S = 60.0  # the size is under test, not the time: 3M extensions took over 2 s under load
source = sys.argv[1]
sha256 = file_digest(source.encode())
try:
    strategy_extensions(source, sha256, "zog.py")
    apply_strategy(Strategy("zog", (".zog",), source, sha256, origin="zog.py"), "a\\n", ["a\\n"])
    why = ""
except StrategyError as exc:
    why = str(exc)
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1]
print(json.dumps({"why": why, "peak_kib": int(peak)}))
'''


@pytest.mark.parametrize(("source", "why"), [(MILLION_RANGES, "1000000 ranges for 1 line"),
                                              (MILLIONS_OF_EXTENSIONS, "claims 3000000 extensions")],
                         ids=["ranges", "extensions"])
def test_a_strategy_answer_too_large_to_be_a_partition_never_reaches_the_process_that_chunks(
        source: str, why: str) -> None:
    done = subprocess.run([sys.executable, "-c", APPLY_AND_REPORT, source], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    left = json.loads(done.stdout)
    assert why in left["why"]
    assert left["peak_kib"] < 200 * 1024  # what the worker built stayed there


@pytest.mark.parametrize("expression", ["1 + " * 20_000 + "1", "-" * 100_000 + "1"], ids=["long-sum", "deep-unary"])
def test_a_module_too_deeply_nested_to_parse_is_refused_not_a_crash(repo: Path, expression: str) -> None:
    from codeloupe.forge import check_strategy

    source = f'EXTENSIONS = (".zog",)\nTABLE = {expression}\n\n\ndef chunk(text, lines):\n    return [(1, len(lines))]\n'
    [problem] = check_strategy(source, ".zog", {"a.zog": "a\n"})
    assert problem.startswith("not valid Python: too deeply nested")
    strategy = repo / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(source)
    assert main(["trust", "--strategy", str(strategy)]) == 0
    [warning] = load_workspace_strategies(repo).warnings
    assert "failed to load (refused: not valid Python: too deeply nested" in warning


def test_a_strategy_that_ran_late_is_disabled_but_its_corrected_code_runs() -> None:
    """A strategy is disabled for the process by its code, not its file name: the language server keeps running
    once the user fixed and trusted the file again (and another workspace's `zog.py` is other code)."""
    text = "a\nb\n"
    late = Strategy("zog", (".zog",), LOOPS, file_digest(LOOPS.encode()), origin="zog.py")
    with pytest.raises(StrategyError, match="time bound"):
        apply_strategy(late, text, text.splitlines(keepends=True), timeout_s=0.2)
    with pytest.raises(StrategyError, match="disabled in this process"):
        apply_strategy(late, text, text.splitlines(keepends=True))
    source = LOOPS.replace("while True:\n        pass", "return [(1, len(lines))]")
    corrected = Strategy("zog", (".zog",), source, file_digest(source.encode()), origin="zog.py")
    assert apply_strategy(corrected, text, text.splitlines(keepends=True)) == [(1, 2, "")]


@pytest.mark.parametrize("where", ["chunk", "top level"])
def test_a_strategy_failing_with_a_huge_message_leaves_a_short_reason(where: str) -> None:
    """The message becomes each failing file's stored fallback reason and a line of the index's log: a
    strategy's exception carrying megabytes must not fill the index and the terminal once per file."""
    raising = 'raise ValueError("y" * 5_000_000)'
    source = ('EXTENSIONS = (".zog",)\n' + (raising + "\n" if where == "top level" else "")
              + "\n\ndef chunk(text, lines):\n    " + raising + "\n")
    strategy = Strategy("zog", (".zog",), source, file_digest(source.encode()), origin="zog.py")
    text = "a\nb\n"
    with pytest.raises(StrategyError) as failure:
        apply_strategy(strategy, text, text.splitlines(keepends=True))
    assert "ValueError: yyy" in str(failure.value) and "more characters" in str(failure.value)
    assert len(str(failure.value)) < 1_000


# A program whose worker processes start slowly (spawned, they import its main script again: here it sleeps as
# a loaded machine's imports may take) chunks a file with a strategy, from a thread so that the worker is spawned.
SLOW_TO_START = '''
import sys, threading, time

if __name__ == "__mp_main__":  # the spawned worker importing this script again
    time.sleep(3)


def chunk_one(answers):
    from codeloupe.chunk.strategy_process import run_in_worker

    source = 'EXTENSIONS = (".zog",)\\ndef chunk(text, lines):\\n    return [(1, len(lines))]\\n'
    try:
        answers.append(run_in_worker(source, "sha", "zog.py", "a\\nb\\n", 2.0))
    except Exception as exc:
        answers.append(str(exc))


if __name__ == "__main__":
    answers = []
    thread = threading.Thread(target=chunk_one, args=(answers,))
    thread.start()
    thread.join()
    print(answers[0])
'''


def test_the_time_bound_counts_the_strategy_not_its_worker_starting(tmp_path: Path) -> None:
    script = tmp_path / "slow_to_start.py"
    script.write_text(SLOW_TO_START)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[[1, 2, '']]"


# A program whose strategy worker cannot start (spawned, it imports the program's script again, which here ends
# that process at once, as a crashing import would) indexes the workspace on a thread, as the language server
# does; each worker it tried to start leaves a line in `starts`, its name (a strategy worker's, or the kept worker's
# that parses the files, which cannot start either: they are then parsed in the indexing process).
CANNOT_START = '''
import json, multiprocessing, os, sys, threading
from pathlib import Path

if __name__ == "__mp_main__":  # a spawned strategy worker importing this script again
    with open(Path(__file__).with_name("starts"), "a") as starts:
        starts.write(multiprocessing.current_process().name + "\\\\n")
    os._exit(3)


def index(repo, told):
    from codeloupe.api import Workspace

    ws = Workspace(repo, overrides={"embed_provider": "none"})
    try:
        report = ws.index()
        told["warnings"] = report.strategy_warnings
        told["reasons"] = dict(ws.store.query("SELECT path, fallback_reason FROM files"))
        (Path(repo) / "rules" / "beta.zog").write_text("rule changed {\\\\n}\\\\n")
        told["saved_warnings"] = ws.update_files([Path(repo) / "rules" / "beta.zog"]).strategy_warnings
        told["starts_before_the_next_run"] = Path(__file__).with_name("starts").read_text().count("strategy-worker")
        (Path(repo) / "rules" / "gamma.zog").write_text("rule changed {\\\\n}\\\\n")
        told["next_run_warnings"] = ws.index().strategy_warnings
    finally:
        ws.close()


if __name__ == "__main__":
    told = {}
    thread = threading.Thread(target=index, args=(sys.argv[1], told), name="codeloupe-writer-repo")
    thread.start()
    thread.join()
    print(json.dumps(told))
'''


def indexed_where_no_strategy_worker_starts(repo: Path, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """The repository's GOOD strategy trusted, then indexed by CANNOT_START: (the strategy, what it told)."""
    strategy = repo / ".codeloupe" / "strategies" / "zog.py"
    strategy.parent.mkdir(parents=True)
    strategy.write_text(GOOD)
    assert main(["trust", "--strategy", str(strategy)]) == 0
    script = tmp_path / "cannot_start.py"
    script.write_text(CANNOT_START)
    done = subprocess.run([sys.executable, str(script), str(repo)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return strategy, json.loads(done.stdout)


def test_a_strategy_worker_that_cannot_start_is_not_waited_for_again_in_the_same_index_run(
        repo: Path, tmp_path: Path) -> None:
    """Every file a strategy claims waited for a worker of its own to start (60 s each when it never did): after
    one failed start, the rest of the run is chunked as without the strategy at once, and said once."""
    strategy, told = indexed_where_no_strategy_worker_starts(repo, tmp_path)
    why = "not run: its worker process ended while starting (exit code 3)"
    warning = (f"codeloupe: the trusted chunk strategy {strategy} failed to load ({why}); the files it claims are "
               "chunked as they would be without it")
    assert told["warnings"] == [warning]  # said once
    for path in ("rules/alpha.zog", "rules/beta.zog", "rules/gamma.zog"):  # each chunked as without the strategy
        assert told["reasons"][path].startswith(f"strategy zog: its module did not load: {why}")
    assert told["saved_warnings"] == [warning]  # a file saved after the run falls back at once too
    assert told["starts_before_the_next_run"] == 1
    assert told["next_run_warnings"] == [warning]  # the next index run tries a worker again, once
    assert (tmp_path / "starts").read_text().count("strategy-worker") == 2


def test_files_chunked_without_their_strategy_because_no_worker_started_are_chunked_by_it_once_one_does(
        repo: Path, tmp_path: Path) -> None:
    """A file cut into line windows because no strategy worker could start stayed so until it changed on disk:
    its row was as current as any other. The next index run where the strategy runs chunks it by the strategy."""
    indexed_where_no_strategy_worker_starts(repo, tmp_path)
    ws = open_ws(repo)
    try:
        report = ws.index()
        assert report.files_indexed == 3 and report.strategy_warnings == []
        reasons = dict(ws.store.query("SELECT path, fallback_reason FROM files"))
        assert [reasons[f"rules/{name}.zog"] for name in ("alpha", "beta", "gamma")] == ["", "", ""]
        assert [name for *_, name in chunks_of(ws, "rules/alpha.zog")] == ["", "alpha0", "alpha1", "alpha2"]
        assert ws.index().files_indexed == 0  # current now
    finally:
        ws.close()


def test_only_a_strategy_that_did_not_run_on_a_file_leaves_its_chunks_to_be_done_again() -> None:
    """Its verdict on the file (running late on it or on a file before it, an error) is the same for the same
    code and file: chunked again only when either changes. A strategy disabled in the process is never started
    there again, so the files after it are not left to be done again either: each index run of a language
    server would rewrite (and embed anew) every file the strategy claims."""
    text = "a\nb\n"
    source = LOOPS + "# code of its own: disabled in this process by no other test\n"
    late = Strategy("zog", (".zog",), source, file_digest(source.encode()), origin="zog.py")
    first = chunk_file("first.zog", text, "text", strategies=[late])
    assert "time bound" in first.fallback_reason and not first.strategy_not_run
    after = chunk_file("after.zog", text, "text", strategies=[late])
    assert "disabled in this process" in after.fallback_reason and not after.strategy_not_run
    raising = Strategy("raises", (".zog",), OVERLAPPING, file_digest(OVERLAPPING.encode()), origin="raises.py")
    assert not chunk_file("other.zog", text, "text", strategies=[raising]).strategy_not_run


def test_forge_names_a_file_type_of_the_workspace_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The extension forge works on is the workspace's (the end of its files' names): one holding an escape
    sequence drove the terminal in every attempt's line and in the outcome. They are shown escaped."""
    from codeloupe.types import CONTROL_CHARACTERS

    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("alpha", "beta"):
        (repo / f"{name}.zo\x1b[2Jg").write_text(zog(name, 2))
    with ChatServer() as chat:
        for _ in range(3):
            chat.add(Reply(text="no code here"))
        assert main(["forge", str(repo), "--embed-provider", "none", "--chat-base-url", chat.base_url,
                     "--chat-model", "scripted"]) == 1
    out, err = capsys.readouterr()
    assert not CONTROL_CHARACTERS.search(out + err), (out, err)
    assert ".zo\\x1b[2jg: nothing written: " in out and "  .zo\\x1b[2jg attempt 1: refused" in err, (out, err)
