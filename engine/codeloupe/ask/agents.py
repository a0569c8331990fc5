"""Broad questions: a planner splits the question, agents research their slices in parallel with model-free
tools, and every excerpt any of them reads is numbered in the one shared `Excerpts`, so the synthesiser's
merged answer is spliced exactly like a single narrator's.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from codeloupe.ask.chat import ChatError, ChatModel, ToolRequest
from codeloupe.ask.events import AskEvent
from codeloupe.ask.excerpts import Excerpt, Excerpts, chunk_text
from codeloupe.ask.prompts import agent_messages, excerpt_index, planner_messages
from codeloupe.ask.shape import top_dir
from codeloupe.ask.sources import Sources
from codeloupe.context import WorkspaceContext
from codeloupe.errors import WorkspaceError
from codeloupe.secrets import looks_secret
from codeloupe.store import FileRow
from codeloupe.types import one_line, shown_name_of, split_lines

MAX_AGENTS = 4
MAX_TOOL_ROUNDS = 3
TOOL_OUTPUT_CHARS = 6_000  # per tool call: one agent cannot flood its own context
CUT_NOTE = "\n(cut: output limit)"
NOTES_RESERVE = 500  # of each reply, for the notes around the excerpts (a cut head, the list of the rest)
GET_FILE_MAX_LINES = 150
SEARCH_MORE_FILES = 5
GET_SYMBOL_MATCHES = 3
WAIT_GRACE_S = 1.0  # past an agent's own deadline, before its thread is given up on

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "search_more",
        "description": "Search the workspace index again (no model involved); returns numbered excerpts.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "get_file",
        "description": f"Read lines of a workspace file (at most {GET_FILE_MAX_LINES}); returns a numbered excerpt.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "start_line": {"type": "integer"}, "end_line": {"type": "integer"}},
            "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "get_symbol",
        "description": "Read the definition of a function, class or method by name (e.g. Parser.parse).",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}},
]


@dataclass(frozen=True)
class AgentTask:
    id: int
    question: str
    ks: tuple[int, ...]


@dataclass(frozen=True)
class AgentOutcome:
    task: AgentTask
    answer: str | None
    error: str | None
    tool_calls: int
    elapsed_ms: float


# ------------------------------------------------------------------------------------------------ plan


def parse_plan(content: str, excerpts: list[Excerpt]) -> list[AgentTask] | None:
    """The planner's JSON as disjoint tasks covering every excerpt, or None when it is unusable."""
    start, end = content.find("{"), content.rfind("}")
    try:
        data = json.loads(content[start:end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError:
        return None
    agents = data.get("agents") if isinstance(data, dict) else None
    if not isinstance(agents, list):
        return None
    known = {e.k: e for e in excerpts}
    claimed: set[int] = set()
    slices: list[tuple[str, list[int]]] = []
    for agent in agents:
        if not isinstance(agent, dict) or not isinstance(agent.get("question"), str):
            continue
        raw = agent.get("excerpts")
        ks = [k for k in raw if isinstance(k, int) and k in known and k not in claimed] if isinstance(
            raw, list) else []
        if agent["question"].strip() and ks:
            claimed.update(ks)
            slices.append((agent["question"].strip(), ks))
    if not slices:
        return None
    for _, ks in slices[MAX_AGENTS:]:  # too many agents: the extra slices go to the last one kept
        slices[MAX_AGENTS - 1][1].extend(ks)
    slices = slices[:MAX_AGENTS]
    for k in (k for k in known if k not in claimed):  # unassigned excerpts join the slice nearest by directory
        best = max(slices, key=lambda s: (sum(top_dir(known[j].path) == top_dir(known[k].path) for j in s[1]),
                                          -len(s[1])))
        best[1].append(k)
    return [AgentTask(i, q, tuple(sorted(ks))) for i, (q, ks) in enumerate(slices, 1)]


def cluster_plan(question: str, excerpts: list[Excerpt]) -> list[AgentTask]:
    """Deterministic slices by top-level directory (first-seen order); past 4 directories the rest share one."""
    groups: dict[str, list[int]] = {}
    for e in excerpts:
        groups.setdefault(top_dir(e.path), []).append(e.k)
    named = list(groups.items())
    if len(named) > MAX_AGENTS:
        rest = [k for _, ks in named[MAX_AGENTS - 1:] for k in ks]
        named = [*named[:MAX_AGENTS - 1], ("the other directories", rest)]
    return [AgentTask(i, f"{question} (focus on the code in {one_line(d)})", tuple(ks)) for i, (d, ks) in
            enumerate(named, 1)]


def make_plan(chat: ChatModel, question: str, excerpts: list[Excerpt]) -> tuple[list[AgentTask], str]:
    """(tasks, source): the planner's split, or directory clusters when the planner fails or talks nonsense."""
    try:
        reply = chat.complete(planner_messages(question, excerpt_index(excerpts)))
    except ChatError as exc:
        return cluster_plan(question, excerpts), f"clusters ({exc})"
    tasks = parse_plan(reply.content, excerpts)
    if tasks is None:
        return cluster_plan(question, excerpts), "clusters (unusable plan)"
    return tasks, "planner"


# ------------------------------------------------------------------------------------------------ tools


@dataclass(frozen=True)
class Span:
    """Lines of a workspace file a tool found, before it is numbered (only what is shown gets a number)."""

    path: str
    language: str
    start_line: int
    text: str
    label: str

    def lines(self) -> list[str]:
        return split_lines(self.text)

    @property
    def end_line(self) -> int:
        return self.start_line + max(len(self.lines()), 1) - 1


def _rendered_chars(span: Span, lines: list[str]) -> int:
    """What `Excerpt.render` of these lines costs, give or take the number's digits."""
    width = len(str(span.start_line + len(lines)))
    header = len(one_line(span.path)) + len(one_line(span.label)) + 40
    return header + sum(width + 3 + len(line.rstrip("\n")) + 1 for line in lines)


def cap_reply(text: str, limit: int = TOOL_OUTPUT_CHARS) -> str:
    """Every tool reply fits the cap, whatever it holds (a single minified line included)."""
    return text if len(text) <= limit else text[:limit - len(CUT_NOTE)] + CUT_NOTE


class Tools:
    """The agents' model-free tools. Every span they show is numbered in the shared excerpts.

    They read only what the index holds (so discovery's ignore rules apply: a gitignored file is not there),
    never a file that looks like a secret, and only through paths that stay inside the workspace: a path
    with `..`, an absolute path or one through a symbolic link is refused before anything is opened.
    """

    def __init__(self, ws: WorkspaceContext, excerpts: Excerpts, sources: Sources, mode: str) -> None:
        self.ws = ws
        self.sources = sources
        self.excerpts = excerpts
        self.mode = mode
        self._rows: dict[str, FileRow] = ws.store.file_rows()
        self._paths_by_id = {row.id: path for path, row in self._rows.items()}

    def run(self, request: ToolRequest) -> tuple[str, list[int]]:
        """(text for the model, at most `TOOL_OUTPUT_CHARS`; excerpt numbers it introduced)."""
        args = request.arguments
        if request.name == "search_more" and isinstance(args.get("query"), str) and args["query"].strip():
            text, ks = self._search_more(args["query"])
        elif request.name == "get_file" and isinstance(args.get("path"), str):
            text, ks = self._get_file(args["path"], args.get("start_line"), args.get("end_line"))
        elif request.name == "get_symbol" and isinstance(args.get("name"), str) and args["name"].strip():
            text, ks = self._get_symbol(args["name"].strip())
        else:
            text, ks = f"error: unknown tool or bad arguments: {request.name}({request.raw_arguments})", []
        return cap_reply(text), ks

    def refusal(self, path: str) -> str:
        """Why `path` may not be read ("" when it may): the same answer for every tool."""
        parts = path.split("/")
        if not path or path.startswith(("/", "~")) or "\\" in path or ":" in parts[0] or ".." in parts:
            return "outside the workspace (give a path relative to the workspace root, without '..')"
        if looks_secret(path):
            return "refused: the file looks like a secret (keys, credentials, .env files are never shown)"
        if path not in self._rows:
            return "not an indexed file of the workspace"
        try:
            if self.ws.relative(path) != path:
                return "outside the workspace (a symbolic link)"
        except WorkspaceError:
            return "outside the workspace (a symbolic link)"
        return ""

    def _span(self, path: str, start: int, end: int, label: str) -> Span | str:
        """Lines `start..end` of an indexed file, decoded as the indexer decoded them; or why not."""
        refused = self.refusal(path)
        if refused:
            return refused
        source = self.sources.get(path)
        if source.lines is None:
            return source.problem
        if start > len(source.lines):
            return f"lines {start}-{end} are outside the file (1-{len(source.lines)})"
        return Span(path, self._rows[path].language, start, "".join(source.lines[start - 1:end]), label)

    def _collect(self, spans: list[Span], origin: str) -> tuple[str, list[int]]:
        """Number and render what fits. The first span is always shown, cut to its head when it alone is
        over the cap (never nothing: the model needs code to cite); what does not fit is listed by name."""
        if not spans:
            return "no results", []
        room = TOOL_OUTPUT_CHARS - NOTES_RESERVE - sum(len(_listed(s)) + 1 for s in spans[1:])
        parts, ks, listed = [], [], []
        for span in spans:
            lines = span.lines()
            if listed or (ks and _rendered_chars(span, lines) > room):
                listed.append(span)
                continue
            kept = lines
            while len(kept) > 1 and _rendered_chars(span, kept) > room:
                kept = kept[:len(kept) * 3 // 4]
            excerpt = self.excerpts.add(span.path, span.language, span.start_line,
                                        span.start_line + len(kept) - 1, "".join(kept), span.label, origin)
            parts.append(excerpt.render())
            if len(kept) < len(lines):
                parts.append(one_line(f"([{excerpt.k}] is the head of {span.label}, lines {span.start_line}-"
                                      f"{span.end_line}: output limit; get_file {span.path} from line "
                                      f"{excerpt.end_line + 1} reads on)"))
            ks.append(excerpt.k)
            room -= _rendered_chars(span, kept)
        if listed:
            parts.append("Also found (not shown: output limit; read them with get_file or get_symbol):\n"
                         + "\n".join(_listed(s) for s in listed))
        return "\n\n".join(parts), ks

    def _search_more(self, query: str) -> tuple[str, list[int]]:
        bundle = self.ws.search(query, mode=self.mode, limit=SEARCH_MORE_FILES)
        spans = []
        for hit in bundle.files[:SEARCH_MORE_FILES]:
            if self.refusal(hit.path):
                continue
            for chunk in hit.chunks[:1]:
                text = chunk_text(hit.path, chunk, self.sources)
                if text:
                    spans.append(Span(hit.path, hit.language, chunk.start_line, text,
                                      chunk.breadcrumb or chunk.name))
        return self._collect(spans, "search_more")

    def _get_file(self, path: str, start: Any, end: Any) -> tuple[str, list[int]]:
        first = start if isinstance(start, int) and start >= 1 else 1
        last = end if isinstance(end, int) and end >= first else first + GET_FILE_MAX_LINES - 1
        rel = path.strip().removeprefix("./")
        if rel not in self._rows:  # the name as an excerpt header shows it (`one_line`): the model asks by that
            rel = shown_name_of(rel, self._rows) or rel
        span = self._span(rel, first, min(last, first + GET_FILE_MAX_LINES - 1), f"read of {rel}")
        if isinstance(span, str):
            return f"error: {path}: {span}", []
        return self._collect([span], "get_file")

    def _get_symbol(self, name: str) -> tuple[str, list[int]]:
        rows = self.ws.store.symbol_rows()
        exact = [s for s in rows if name in (s.name, f"{s.parent}.{s.name}" if s.parent else s.name)]
        found = exact or [s for s in rows if name.lower() in (s.name.lower(), f"{s.parent}.{s.name}".lower())]
        spans = []
        for symbol in found:
            path = self._paths_by_id.get(symbol.file_id)
            if path is None:
                continue
            end = min(symbol.end_line, symbol.start_line + GET_FILE_MAX_LINES - 1)
            span = self._span(path, symbol.start_line, end, f"{symbol.kind} {symbol.name}")
            if isinstance(span, Span):
                spans.append(span)
            if len(spans) == GET_SYMBOL_MATCHES:
                break
        return self._collect(spans, "get_symbol") if spans else (f"no symbol named {name!r}", [])


def _listed(span: Span) -> str:
    return one_line(f"- {span.path} lines {span.start_line}-{span.end_line} ({span.label})")


# ------------------------------------------------------------------------------------------------ agents


def run_agent(chat: ChatModel, tools: Tools, question: str, task: AgentTask, excerpts: Excerpts,
              emit: Callable[[AskEvent], None]) -> AgentOutcome:
    started = time.monotonic()
    deadline = started + chat.timeout_s
    messages = agent_messages(question, task.question, excerpts.render(list(task.ks)))
    calls = 0

    def outcome(answer: str | None, error: str | None) -> AgentOutcome:
        return AgentOutcome(task, answer, error, calls, (time.monotonic() - started) * 1000)

    def answered(content: str) -> AgentOutcome:
        text = content.strip()
        return outcome(text, None) if text else outcome(None, "empty answer")

    try:
        for _ in range(MAX_TOOL_ROUNDS):
            reply = chat.complete(messages, tools=TOOL_SCHEMAS, timeout_s=deadline - time.monotonic())
            if not reply.tool_calls:
                return answered(reply.content)
            messages.append({"role": "assistant", "content": reply.content or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
                for c in reply.tool_calls]})
            for call in reply.tool_calls:
                calls += 1
                text, new = tools.run(call)
                emit(AskEvent("agent", {"agent": task.id, "phase": "tool", "tool": call.name,
                                        "arguments": call.arguments, "excerpts": new}))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        # Out of tool rounds: ask for the answer with what it has (no tools offered).
        return answered(chat.complete(messages, timeout_s=deadline - time.monotonic()).content)
    except ChatError as exc:
        return outcome(None, str(exc))
    except Exception as exc:  # a tool bug must not take the other agents (or the answer) down
        return outcome(None, f"agent failed: {exc!r}")


def run_agents(ws: WorkspaceContext, chat: ChatModel, question: str, tasks: list[AgentTask], excerpts: Excerpts,
               sources: Sources, mode: str) -> Generator[AskEvent, None, list[AgentOutcome]]:
    """Run the agents in parallel threads, yielding their events as they happen; returns their outcomes.

    Each agent's model calls share one deadline (`chat_timeout_s`); an agent still running past it (plus a
    grace) is abandoned as timed out without holding up the others. Threads are daemons: a hung socket
    never keeps the process alive.
    """
    events: queue.Queue[AskEvent | AgentOutcome] = queue.Queue()
    tools = Tools(ws, excerpts, sources, mode)
    for task in tasks:
        events.put(AskEvent("agent", {"agent": task.id, "phase": "start", "question": task.question,
                                      "excerpts": list(task.ks)}))
        threading.Thread(target=lambda t=task: events.put(run_agent(chat, tools, question, t, excerpts,
                                                                    events.put)),
                         name=f"ask-agent-{task.id}", daemon=True).start()
    give_up = time.monotonic() + chat.timeout_s + WAIT_GRACE_S
    outcomes: dict[int, AgentOutcome] = {}
    while len(outcomes) < len(tasks):
        try:
            item = events.get(timeout=max(give_up - time.monotonic(), 0.0))
        except queue.Empty:
            break
        if isinstance(item, AgentOutcome):
            outcomes[item.task.id] = item
            yield _finished(item)
        else:
            yield item
    for task in tasks:
        if task.id not in outcomes:
            outcomes[task.id] = AgentOutcome(task, None, f"timed out after {chat.timeout_s:g}s", 0,
                                             chat.timeout_s * 1000)
            yield _finished(outcomes[task.id])
    return [outcomes[t.id] for t in tasks]


def _finished(outcome: AgentOutcome) -> AskEvent:
    data: dict[str, Any] = {"agent": outcome.task.id, "phase": "done" if outcome.answer else "failed",
                            "tool_calls": outcome.tool_calls, "elapsed_ms": round(outcome.elapsed_ms, 1)}
    if outcome.error:
        data["error"] = outcome.error
    return AskEvent("agent", data)
