"""Community names from one cached model call (the scripted loopback model), failing open to the built-in ones."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from chat_server import ChatServer, Reply, request_text
from codeloupe.api import Workspace
from codeloupe.graph.build import load_graph
from test_graph_engine import FIXTURES

_GROUP = re.compile(r"^(\d+)\. ", re.M)


def named(body: dict[str, Any]) -> str:
    groups = _GROUP.findall(request_text(body))
    return json.dumps({"names": {g: f"area {g} logic" for g in groups}})


@pytest.fixture
def chat():
    with ChatServer() as server:
        yield server
    assert server.errors == []


def open_python(tmp_path: Path, chat: ChatServer | None) -> Workspace:
    root = tmp_path / "python"
    if not root.exists():
        shutil.copytree(FIXTURES / "python", root)
    chat_settings = {"chat_base_url": chat.base_url, "chat_model": "scripted"} if chat else {}
    ws = Workspace(root, overrides={"embed_provider": "none", **chat_settings})
    ws.index()
    return ws


def test_one_model_call_names_the_communities_and_is_cached(tmp_path: Path, chat: ChatServer) -> None:
    ws = open_python(tmp_path, chat)
    try:
        ws.warm()  # the index's own refresh never calls the model
        assert chat.requests == []
        built = load_graph(ws).community_names
        chat.add(Reply(render=named))
        names = {c.id: c.name for c in ws.graph_map().communities}
        multi = [c for c in ws.graph_map().communities if c.size > 1]
        assert multi and len(chat.requests) == 1  # the second map read the cache
        assert all(names[c.id] == f"area {c.id} logic" for c in multi)
        assert all(names[c.id] == built[c.id] for c in ws.graph_map().communities if c.size == 1)
        member = multi[0].members[0]
        assert ws.file_summary(member).community_name == f"area {multi[0].id} logic"  # hovers read the cache
    finally:
        ws.close()
    again = open_python(tmp_path, chat)  # another process later: still cached in the index
    try:
        assert {c.name for c in again.graph_map().communities} == set(names.values())
        assert len(chat.requests) == 1
    finally:
        again.close()


@pytest.mark.parametrize("reply", [
    Reply(status=500),
    Reply(text="Sure! Here are some names: shop, payments."),
    Reply(text=json.dumps({"names": {"0": "<b>bold</b>", "1": "x" * 80, "2": ["not", "text"]}})),
])
def test_a_failed_or_garbled_reply_leaves_the_built_in_names(tmp_path: Path, chat: ChatServer, reply: Reply) -> None:
    ws = open_python(tmp_path, chat)
    try:
        built = load_graph(ws).community_names
        chat.add(reply)
        assert [c.name for c in ws.graph_map().communities] == built
        assert [c.name for c in ws.graph_map().communities] == built
        assert len(chat.requests) == 1  # the failure is remembered until the communities change
    finally:
        ws.close()


def test_without_a_chat_model_the_names_are_the_built_in_ones(tmp_path: Path) -> None:
    ws = open_python(tmp_path, None)
    try:
        assert [c.name for c in ws.graph_map().communities] == load_graph(ws).community_names
    finally:
        ws.close()
