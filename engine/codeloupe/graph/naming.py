"""Community names from one cached model call, when the user configured a chat model.

Only an explicit map request (`Workspace.graph_map`, the CLI, the editor's map) may call the model, once for
every community it has no cached name for; hovers, lenses and the index's own graph refresh read the cache and
never wait on a model. A name is cached by its community's exact member list (and the model), so it survives
every change that leaves the community as it is; so is a failure to name it. Any failure (no model, an error, a
reply that is not the JSON asked for, a name that is not short plain words) leaves the deterministic name of
`build._names`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import TYPE_CHECKING

from codeloupe.graph.build import Graph

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext

log = logging.getLogger("codeloupe.graph")

META_KEY = "community_names"
MEMBERS_SHOWN = 12  # per community in the prompt: enough to see what it is about
MAX_COMMUNITIES = 60  # the largest ones; the long tail of small groups keeps its deterministic names
NAMING_TIMEOUT_S = 20.0  # an editor's map request waits for this call
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ,&/+._-]{0,39}")

PROMPT = """\
You name groups of source files of one code base. For each numbered group below, give a name of 2 to 4 plain \
words saying what the group does (no file names, no punctuation beyond hyphens). Reply with JSON only: \
{"names": {"<group number>": "<name>", ...}}"""


def _model_key(ws: WorkspaceContext) -> str:
    return f"{ws.settings.chat_base_url.strip()}|{ws.settings.chat_model.strip()}"


def _members_key(graph: Graph, community: int) -> str:
    members = sorted(graph.paths[m] for m in graph.members(community))
    return hashlib.sha256("\n".join(members).encode()).hexdigest()[:32]


def _cached(ws: WorkspaceContext) -> dict[str, str]:
    try:
        saved = json.loads(ws.store.get_meta(META_KEY, "{}"))
    except ValueError:
        return {}
    if not isinstance(saved, dict) or saved.get("model") != _model_key(ws) or not isinstance(saved.get("names"), dict):
        return {}
    return {str(k): str(v) for k, v in saved["names"].items()}


def community_names(ws: WorkspaceContext, graph: Graph, *, ask_model: bool = False) -> list[str]:
    """The graph's community names, a model's where one is cached (or, with `ask_model`, just asked for)."""
    names = list(graph.community_names)
    if not ws.settings.chat_model.strip() or not ws.settings.chat_base_url.strip():
        return names
    cached = _cached(ws)
    keys = {c: _members_key(graph, c) for c in range(len(names)) if len(graph.members(c)) > 1}
    missing = sorted((c for c in keys if keys[c] not in cached), key=lambda c: -len(graph.members(c)))
    if ask_model and missing:
        asked = _ask(ws, graph, missing[:MAX_COMMUNITIES])
        kept = {keys[c]: cached[keys[c]] for c in keys if keys[c] in cached}
        # A community the reply left unnamed is remembered as such ("": the built-in name), so a model that is
        # down or unhelpful costs one wait per change of the communities, not one per map.
        kept.update({keys[c]: asked.get(c, "") for c in missing[:MAX_COMMUNITIES]})
        ws.store.set_meta(META_KEY, json.dumps({"model": _model_key(ws), "names": kept}, sort_keys=True))
        cached = kept
    used = set(names)
    for c, key in keys.items():
        name = cached.get(key, "")
        if name and name not in used:  # a model name equal to another community's is no name at all
            used.add(name)
            names[c] = name
    return names


def community_name(ws: WorkspaceContext, graph: Graph, community: int) -> str:
    """One community's name from the cache alone (hovers and lenses: no model call, no other community's key)."""
    name = graph.community_names[community]
    if len(graph.members(community)) < 2 or not ws.settings.chat_model.strip():
        return name
    return _cached(ws).get(_members_key(graph, community)) or name


def _ask(ws: WorkspaceContext, graph: Graph, communities: list[int]) -> dict[int, str]:
    """One model call; {community: name} for every valid name in the reply ({} on any failure)."""
    from codeloupe.ask.chat import ChatError, ChatModel, ChatUnavailable

    groups = []
    for c in communities:
        members = sorted(graph.paths[m] for m in graph.members(c))
        shown = ", ".join(members[:MEMBERS_SHOWN]) + (f" and {len(members) - MEMBERS_SHOWN} more"
                                                       if len(members) > MEMBERS_SHOWN else "")
        groups.append(f"{c}. ({graph.community_names[c]}) {shown}")
    messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": "\n".join(groups)}]
    try:
        reply = ChatModel.from_settings(ws.settings).complete(
            messages, timeout_s=min(ws.settings.chat_timeout_s, NAMING_TIMEOUT_S)).content
    except (ChatUnavailable, ChatError) as exc:
        log.info("community names stay deterministic: %s", exc)
        return {}
    return _parse(reply, set(communities))


def _parse(reply: str, wanted: set[int]) -> dict[int, str]:
    start, end = reply.find("{"), reply.rfind("}")
    try:
        found = json.loads(reply[start:end + 1]) if start >= 0 else {}
    except ValueError:
        return {}
    names = found.get("names") if isinstance(found, dict) else None
    out: dict[int, str] = {}
    for key, value in (names.items() if isinstance(names, dict) else ()):
        name = " ".join(value.split()) if isinstance(value, str) else ""
        if str(key).isdigit() and int(key) in wanted and _NAME.fullmatch(name):
            out[int(key)] = name
    return out
