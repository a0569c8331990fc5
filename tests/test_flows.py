"""The flow cache end to end: real index, real retrieval, real HTTP to the scripted model, which also embeds.

The scripted embedder puts each test question at a chosen cosine from the cached one, so the serve / attach /
nothing thresholds are crossed on purpose; everything else (chunks) gets the server's usual hash vectors.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chat_server import ChatServer, Reply, cite, embedding_for, request_text
from codeloupe.api import Workspace
from codeloupe.ask import AskEvent, AskResult
from codeloupe.ask.flows import append_sources, context_text, coverage
from codeloupe.ask.prompts import BACKGROUND
from codeloupe.cli import main as cli_main
from codeloupe.store.flows import FlowRow
from codeloupe.types import Bundle, FileHit
from test_ask_run import FILES  # the same small login app

QUESTION = "how does login check the password"
# Each later question's cosine to QUESTION under the scripted embedder.
PARAPHRASE = "how does the login check a password"  # 0.90: served (above 0.88, below the 0.92 that replaces)
COMPOUND = "how does login check the password and how are expired sessions purged"  # 0.95, coverage 3/6
NEARBY = "where are login sessions opened"  # 0.70: attached
UNRELATED = "what formats the log output"  # 0.30: nothing
SIMILARITY = {QUESTION: 1.0, PARAPHRASE: 0.90, COMPOUND: 0.95, NEARBY: 0.70, UNRELATED: 0.30}
DIM = 8
CHOSEN: dict[str, list[float]] = {}  # more texts with chosen vectors, set by a test (through monkeypatch)


def scripted_embedding(text: str) -> list[float]:
    """Questions on axis 0 at their chosen cosine (each with its own second axis); a question followed by
    prose (a flow's semantic vector) on axis 7, so the question vectors alone decide; anything else hashed."""
    if text in SIMILARITY:
        similarity, other = SIMILARITY[text], 1 + list(SIMILARITY).index(text)
        vector = [0.0] * DIM
        vector[0], vector[other] = similarity, math.sqrt(max(0.0, 1 - similarity ** 2))
        return vector
    if text in CHOSEN:
        return CHOSEN[text]
    if text.split("\n\n", 1)[0] in SIMILARITY:
        return [0.0] * (DIM - 1) + [1.0]
    return embedding_for(text)


def narrated(body: dict[str, Any]) -> str:
    k = cite(body, "app/auth.py", 15)
    return f"`login` looks the user up and compares password hashes [[{k}:16-17]]."


@pytest.fixture
def repo(make_tree: Callable[[dict[str, str]], Path]) -> Path:
    return make_tree(FILES)


@pytest.fixture
def chat():
    with ChatServer(embedder=scripted_embedding) as server:
        yield server
    assert server.errors == []


def settings(chat: ChatServer) -> dict[str, Any]:
    return {"embed_provider": "openai", "embed_base_url": chat.base_url, "embed_model": "scripted-embed",
            "embed_dimensions": DIM, "chat_base_url": chat.base_url, "chat_model": "scripted",
            "chat_timeout_s": 5.0}


@pytest.fixture
def ws(repo: Path, chat: ChatServer):
    workspace = Workspace(repo, overrides=settings(chat))
    workspace.index()
    workspace.embed()
    yield workspace
    workspace.close()


def ask(ws: Workspace, question: str) -> tuple[list[AskEvent], AskResult]:
    events = list(ws.ask(question, agents=False))
    assert events[-1].type == "done" and events[-1].result is not None
    json.dumps([e.to_dict() for e in events])
    return events, events[-1].result


def chat_calls(chat: ChatServer) -> int:
    return len(chat.requests)


def cached(ws: Workspace, chat: ChatServer) -> AskResult:
    """Ask QUESTION fresh (one scripted narrator call) so the cache holds its walkthrough."""
    chat.add(Reply(render=narrated))
    _, result = ask(ws, QUESTION)
    assert result.fallback is None and result.citations and result.flow is None
    assert result.metrics["flow_stored"] is not None
    return result


def background_of(body: dict[str, Any]) -> str | None:
    """The attach lane's section of a narrator request (None when there is none)."""
    text = request_text(body)
    if BACKGROUND not in text:
        return None
    return text.split(BACKGROUND, 1)[1].split("Excerpts:", 1)[0]


# ------------------------------------------------------------------------------------------- serve


def test_a_repeated_question_is_served_verbatim_with_no_model_call(ws: Workspace, chat: ChatServer) -> None:
    first = cached(ws, chat)
    calls = chat_calls(chat)
    events, again = ask(ws, PARAPHRASE)  # no reply scripted: a model call would fail the ask
    assert chat_calls(chat) == calls
    assert again.flow is not None and again.flow.action == "served" and again.flow.question == QUESTION
    assert again.flow.similarity == pytest.approx(0.90, abs=1e-3) and again.flow.coverage == 1.0
    assert again.fallback is None and again.citations == first.citations
    narrated_part = first.answer.split("\n---\n")[0]
    assert again.answer.startswith(narrated_part)
    assert [e.type for e in events][:2] == ["retrieval", "flow"]
    assert events[-1].to_dict()["flow"]["action"] == "served"  # what `ask --json` prints in `done`
    assert ws.flows()[0].served == 1 and len(ws.flows()) == 1  # 0.90 < 0.92: served, nothing replaced


def test_serving_rechecks_every_cited_file_on_disk(ws: Workspace, chat: ChatServer, repo: Path) -> None:
    cached(ws, chat)
    auth = repo / "app/auth.py"
    auth.write_text(auth.read_text().replace("bad credentials", "wrong password"))  # not re-indexed
    chat.add(Reply(render=narrated))
    calls = chat_calls(chat)
    _, result = ask(ws, PARAPHRASE)
    assert chat_calls(chat) == calls + 1, "a changed cited file must be asked again, not served"
    assert result.flow is None or result.flow.action != "served"
    assert "wrong password" in result.answer or all("bad credentials" not in c.text for c in result.citations)


def test_a_reindex_prunes_flows_citing_a_changed_file(ws: Workspace, chat: ChatServer, repo: Path) -> None:
    cached(ws, chat)
    (repo / "app/db.py").write_text("# untouched by the answer\n" + (repo / "app/db.py").read_text())
    ws.index()
    assert [f.stale for f in ws.flows()] == [False], "a file the answer does not cite changes nothing"
    auth = repo / "app/auth.py"
    auth.write_text(auth.read_text() + "\n\ndef logout():\n    return None\n")
    ws.index()
    assert [f.stale for f in ws.flows()] == [True]
    chat.add(Reply(render=narrated))
    calls = chat_calls(chat)
    _, result = ask(ws, QUESTION)
    assert chat_calls(chat) == calls + 1 and result.flow is None  # a stale flow is neither served nor attached
    assert [(f.question, f.stale) for f in ws.flows()] == [(QUESTION, False)]  # the fresh answer replaced it
    (repo / "app/auth.py").unlink()
    ws.index()
    assert [f.stale for f in ws.flows()] == [True]


# ------------------------------------------------------------------------------------ attach, nothing


def test_a_compound_question_is_not_served_but_gets_the_flow_as_context(ws: Workspace, chat: ChatServer) -> None:
    first = cached(ws, chat)
    assert coverage(QUESTION, COMPOUND) < 0.8
    chat.add(Reply(render=narrated))
    _, result = ask(ws, COMPOUND)
    assert result.flow is not None and result.flow.action == "attached"
    assert result.flow.similarity == pytest.approx(0.95, abs=1e-3)
    background = background_of(chat.requests[-1])
    assert background is not None and "looks the user up and compares password hashes" in background
    assert first.citations[0].text not in background  # the code of the cached answer never goes back


def test_a_nearby_question_is_attached_and_an_unrelated_one_gets_nothing(ws: Workspace, chat: ChatServer) -> None:
    cached(ws, chat)
    chat.add(Reply(render=narrated), Reply(render=narrated))
    _, nearby = ask(ws, NEARBY)
    assert nearby.flow is not None and nearby.flow.action == "attached"
    assert background_of(chat.requests[-1]) is not None
    _, unrelated = ask(ws, UNRELATED)
    assert unrelated.flow is None and background_of(chat.requests[-1]) is None


def test_the_attach_lane_strips_citation_chrome(ws: Workspace, chat: ChatServer) -> None:
    def imitating(body: dict[str, Any]) -> str:
        k = cite(body, "app/auth.py", 15)
        return (f"## Login\n`login` compares hashes [[{k}:16-17]] like [2] app/auth.py lines 1-9 shows, "
                "see app/db.py:4-6 and lines 3-5.\n```python\nreturn 'made up'\n```\n")

    chat.add(Reply(render=imitating))
    _, first = ask(ws, QUESTION)
    assert first.citations
    chat.add(Reply(render=narrated))
    ask(ws, NEARBY)
    background = background_of(chat.requests[-1])
    assert background is not None and "compares hashes" in background
    for chrome in ("[[", "[2]", "lines 1-9", "lines 3-5", "app/db.py:4", "```", "made up", "##", "`"):
        assert chrome not in background, chrome
    hostile = "# Title\n[[3:1-2]] [4] a.py lines 1-2\n~~~\ncode\n~~~\n> quoted `x` at a.py:3\nplain words"
    assert context_text(hostile) == "quoted x at\nplain words"


def test_flow_sources_append_to_related_never_reorder() -> None:
    hit = FileHit("a.py", "python", 1, 1.0, 1, 2, [], "", chunks=[])
    bundle = Bundle("q", "/", "code", False, [hit], [], [], {})
    cited = [{"kind": "code", "text": "x\n", "markdown": "x", "citation": {
        "k": 1, "path": path, "start_line": 1, "end_line": 1, "text": "x\n", "language": "python",
        "requested": None, "snapped": False, "changed": False}} for path in ("a.py", "b.py", "c.py", "d.py", "e.py")]
    append_sources(bundle, FlowRow(1, "q", "code", "m", np.zeros(DIM, np.float32), np.zeros(DIM, np.float32),
                                   "", cited, 0.0, 0, False, {}))
    assert [h.path for h in bundle.core] == ["a.py"]
    assert [(h.path, h.via, h.rank) for h in bundle.related] == [("b.py", "flow", 2), ("c.py", "flow", 3),
                                                                   ("d.py", "flow", 4)]


# ------------------------------------------------------------------------------------ off switches


@pytest.mark.parametrize("switch", ["environment", "workspace"])
def test_the_kill_switch_and_the_workspace_setting_turn_the_cache_off(
        repo: Path, chat: ChatServer, monkeypatch: pytest.MonkeyPatch, switch: str) -> None:
    if switch == "environment":
        monkeypatch.setenv("CODELOUPE_NO_FLOWS", "1")
    else:
        (repo / ".codeloupe.toml").write_text("flows = false\n")  # an untrusted workspace may set this one
    off = Workspace(repo, overrides=settings(chat))
    try:
        assert off.settings.ignored is None
        off.index()
        off.embed()
        chat.add(Reply(render=narrated))
        _, result = ask(off, QUESTION)
        assert result.citations and off.flows() == []
    finally:
        off.close()


# ------------------------------------------------------------------------------------------- CLI


def test_cli_lists_flows_and_ask_json_marks_a_served_one(
        ws: Workspace, chat: ChatServer, repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    cached(ws, chat)
    ws.close()
    monkeypatch.setenv("CODELOUPE_EMBED_DIMENSIONS", str(DIM))
    flags = ["--embed-provider", "openai", "--embed-base-url", chat.base_url, "--embed-model", "scripted-embed"]
    assert cli_main(["flows", str(repo), "--json", *flags]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(f["question"], f["files"], f["stale"]) for f in listed["flows"]] == [(QUESTION, ["app/auth.py"], False)]
    assert cli_main(["ask", str(repo), PARAPHRASE, "--json", "--no-agents", *flags,
                     "--chat-base-url", chat.base_url, "--chat-model", "scripted"]) == 0
    done = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert done["type"] == "done" and done["flow"]["action"] == "served" and done["flow"]["question"] == QUESTION
    assert cli_main(["flows", str(repo), *flags]) == 0
    shown = capsys.readouterr().out
    assert QUESTION in shown and re.search(r"served 1\b", shown)


def test_cli_names_a_long_cached_question_by_its_start(
        ws: Workspace, chat: ChatServer, repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A served walkthrough's question was echoed whole on stderr, a pasted page and all."""
    long_question = QUESTION + ", " + " ".join(["step by step"] * 40)
    monkeypatch.setitem(SIMILARITY, long_question, 1.0)  # where QUESTION is: PARAPHRASE is served from it
    chat.add(Reply(render=narrated))
    ask(ws, long_question)
    ws.close()
    monkeypatch.setenv("CODELOUPE_EMBED_DIMENSIONS", str(DIM))
    assert cli_main(["ask", str(repo), PARAPHRASE, "--no-agents", "--embed-provider", "openai", "--embed-base-url",
                     chat.base_url, "--embed-model", "scripted-embed", "--chat-base-url", chat.base_url,
                     "--chat-model", "scripted"]) == 0
    said = " ".join(capsys.readouterr().err.split())  # as the console wraps it
    assert f"answered from the walkthrough cached for {long_question[:60]!r}... ({len(long_question)} characters)" \
        in said
    assert long_question[:61] not in said


def test_refresh_reasks_stale_flows_and_warm_preasks_the_main_workflows(
        ws: Workspace, chat: ChatServer, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached(ws, chat)
    auth = repo / "app/auth.py"
    auth.write_text(auth.read_text().replace("bad credentials", "wrong password"))
    ws.index()
    assert [f.stale for f in ws.flows()] == [True]
    chat.add(Reply(render=narrated))
    outcomes = ws.refresh_flows()
    assert [(o.question, o.outcome) for o in outcomes] == [(QUESTION, "answered")]
    assert [(f.question, f.stale) for f in ws.flows()] == [(QUESTION, False)]
    served = ask(ws, PARAPHRASE)[1]
    assert served.flow is not None and "wrong password" in served.answer  # the refreshed answer, from disk
    questions = [f"how does {s.name} work" for s in ws.tour(limit=2).stops]
    for axis, question in enumerate(questions, 5):  # apart from each other and from QUESTION
        monkeypatch.setitem(CHOSEN, question, [1.0 if i == axis else 0.0 for i in range(DIM)])
    chat.add(Reply(render=narrated, times=len(questions)))
    warmed = ws.warm_flows(limit=2)
    assert [o.question for o in warmed] == questions
    assert questions and {o.outcome for o in warmed} == {"answered"} and len(ws.flows()) == 1 + len(questions)
    assert ws.refresh_flows() == []  # nothing stale


def test_the_cache_keeps_the_newest_flows_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from codeloupe.store import Store
    from codeloupe.store import flows as flow_store

    monkeypatch.setattr(flow_store, "MAX_FLOWS", 2)
    store = Store(tmp_path / "index.sqlite")
    try:
        vector = np.ones(DIM, np.float32)
        for question in ("first", "second", "third"):
            flow_store.put_flow(store, question=question, mode="code", model="m", question_vec=vector,
                                semantic_vec=vector, prose="p", parts=[], files={"a.py": "0" * 64})
        assert [f.question for f in flow_store.flow_rows(store)] == ["third", "second"]
        assert store.query("SELECT count(*) FROM flow_files")[0][0] == 2  # the evicted one's files went too
    finally:
        store.close()


def test_cli_flows_says_when_it_cannot_ask_or_keeps_nothing(repo: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`flows --warm` with no chat model reported each question failed, one by one, with status 0; with flows
    switched off the listing said 'no cached walkthroughs yet' as if asking would add one."""
    monkeypatch.delenv("CODELOUPE_CHAT_BASE_URL", raising=False)
    monkeypatch.delenv("CODELOUPE_CHAT_MODEL", raising=False)
    assert cli_main(["flows", str(repo), "--warm", "--embed-provider", "none"]) == 2
    assert "--refresh and --warm ask a chat model" in capsys.readouterr().err
    monkeypatch.setenv("CODELOUPE_NO_FLOWS", "1")
    assert cli_main(["flows", str(repo), "--embed-provider", "none"]) == 0
    assert capsys.readouterr().out.startswith("flows are turned off")


def test_cli_flows_says_they_are_off_when_it_lists_flows_kept_before(
        ws: Workspace, chat: ChatServer, repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With flows switched off, the walkthroughs kept before were listed as ever, with nothing to say that no
    question is answered from them now."""
    cached(ws, chat)
    ws.close()
    monkeypatch.setenv("CODELOUPE_NO_FLOWS", "1")
    assert cli_main(["flows", str(repo), "--embed-provider", "none"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("flows are turned off") and QUESTION in shown


def test_cli_flows_shows_a_long_question_by_its_start_and_refuses_a_warm_limit_below_one(
        ws: Workspace, chat: ChatServer, repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pasted 10 KB question was listed whole, a screenful per flow; `--warm-limit -1` asked nothing, silently."""
    long_question = " ".join([QUESTION] * 300)
    chat.add(Reply(render=narrated))
    assert ask(ws, long_question)[1].metrics["flow_stored"] is not None
    ws.close()
    monkeypatch.setenv("CODELOUPE_EMBED_DIMENSIONS", str(DIM))
    flags = ["--embed-provider", "openai", "--embed-base-url", chat.base_url, "--embed-model", "scripted-embed"]
    assert cli_main(["flows", str(repo), *flags]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"#1  {long_question[:60]!r}... ({len(long_question)} characters)  [code]"), first
    with pytest.raises(SystemExit) as refused:
        cli_main(["flows", str(repo), "--warm", "--warm-limit", "-1", *flags])
    assert refused.value.code == 2
    assert "--warm-limit: expected a whole number of at least 1, got '-1'" in capsys.readouterr().err


def test_cli_flows_warm_says_which_earlier_flow_an_answer_replaced(
        ws: Workspace, chat: ChatServer, repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A warmed question whose answer took the place of an earlier flow (its question at >= 0.92) was reported
    "answered", as if the cache had gained a walkthrough; the list below it held as many as before."""
    cached(ws, chat)
    question = f"how does {ws.tour(limit=1).stops[0].name} work"
    ws.close()
    monkeypatch.setitem(CHOSEN, question, [1.0] + [0.0] * (DIM - 1))  # QUESTION's own direction: cosine 1
    monkeypatch.setenv("CODELOUPE_EMBED_DIMENSIONS", str(DIM))
    chat.add(Reply(render=narrated))
    assert cli_main(["flows", str(repo), "--warm", "--warm-limit", "1", "--embed-provider", "openai",
                     "--embed-base-url", chat.base_url, "--embed-model", "scripted-embed",
                     "--chat-base-url", chat.base_url, "--chat-model", "scripted"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == f"replaced  {question}: in place of the earlier flow of {QUESTION!r}", shown
    assert [line.split("  ")[1] for line in shown if line.startswith("#")] == [repr(question)]


def test_every_field_ask_json_and_flows_json_print_is_documented(
        ws: Workspace, chat: ChatServer, repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`ask --json`'s metrics named `flows_replaced` (the flows an answer took the place of) nowhere in
    docs/protocol.md, nor the shape of its events or of `flows --json`: every key they print is named there."""
    cached(ws, chat)
    ws.close()
    auth = repo / "app/auth.py"  # the cached flow's cited file changes: the next answer replaces it
    auth.write_text(auth.read_text() + "\n\ndef logout():\n    return None\n")
    monkeypatch.setenv("CODELOUPE_EMBED_DIMENSIONS", str(DIM))
    flags = ["--embed-provider", "openai", "--embed-base-url", chat.base_url, "--embed-model", "scripted-embed",
             "--chat-base-url", chat.base_url, "--chat-model", "scripted"]
    events = []
    for question in (QUESTION, PARAPHRASE):  # narrated (replacing the stale flow), then served
        chat.add(Reply(render=narrated))
        assert cli_main(["ask", str(repo), question, "--json", "--no-agents", *flags]) == 0
        events += [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[-1]["flow"]["action"] == "served"
    metrics = [event["metrics"] for event in events if event["type"] == "done"]
    assert metrics[0]["flows_replaced"] == [{"id": 1, "question": QUESTION}]
    chat.add(Reply(render=narrated))
    assert cli_main(["flows", str(repo), "--json", "--warm", "--warm-limit", "1", *flags]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["flows"] and listed["asked"]

    printed = ({key for event in events for key in event} | {key for m in metrics for key in m}
               | set(listed) | {key for flow in listed["flows"] for key in flow}
               | {key for asked in listed["asked"] for key in asked})
    doc = (Path(__file__).resolve().parents[1] / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = doc[doc.index("\n## The CLI's JSON"):]
    named = {word for quoted in re.findall(r"`([^`]+)`", section) for word in re.findall(r"[\w*]+", quoted)}
    undocumented = {key for key in printed if key not in named and not (key.startswith("splice_")
                                                                      and "splice_*" in named)}
    assert not undocumented, f"printed by ask --json / flows --json, not named in docs/protocol.md: {undocumented}"


def test_cli_lists_a_cached_walkthroughs_files_escaped(
        make_tree: Callable[[dict[str, str]], Path], chat: ChatServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`flows` listed the files a walkthrough cites raw: a cited file named with a bidi override or an escape
    sequence reordered the line or drove the terminal. They are shown as every other file name is."""
    from codeloupe.types import CONTROL_CHARACTERS, one_line

    hostile = "app/auth\u202egnp\x1b[2J.py"
    repo = make_tree({hostile if rel == "app/auth.py" else rel: text for rel, text in FILES.items()})
    ws = Workspace(repo, overrides=settings(chat))
    try:
        ws.index()
        ws.embed()
        chat.add(Reply(render=lambda body:  # the model finds the file by its header, which names it one_line'd
                       f"`login` compares password hashes [[{cite(body, one_line(hostile), 15)}:16-17]]."))
        _, result = ask(ws, QUESTION)
        assert result.fallback is None and result.metrics["flow_stored"] is not None
    finally:
        ws.close()
    monkeypatch.setenv("CODELOUPE_EMBED_DIMENSIONS", str(DIM))
    assert cli_main(["flows", str(repo), "--embed-provider", "openai", "--embed-base-url", chat.base_url,
                     "--embed-model", "scripted-embed"]) == 0
    shown = capsys.readouterr().out
    assert not CONTROL_CHARACTERS.search(shown) and f"      cites {one_line(hostile)}" in shown.splitlines(), shown
