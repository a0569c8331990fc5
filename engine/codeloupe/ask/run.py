"""`run_ask`: retrieval, then (optionally) rerank, then one narrator or a team of agents, spliced from disk.

Every path ends in exactly one `done` event. Whatever goes wrong with a model (nothing configured, a
timeout, an error mid-stream, an answer that cites nothing) the result is the plain retrieval bundle with the
reason in `fallback`; a failure of retrieval itself is the caller's error, raised.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

from codeloupe.ask import flows
from codeloupe.ask.agents import make_plan, run_agents
from codeloupe.ask.cancel import Cancellation
from codeloupe.ask.chat import ChatError, ChatModel, ChatUnavailable
from codeloupe.ask.events import AnswerPart, AskEvent, AskResult
from codeloupe.ask.excerpts import Excerpts
from codeloupe.ask.prompts import excerpt_index, narrator_messages, synthesis_messages
from codeloupe.ask.render import bundle_parts, footer_parts
from codeloupe.ask.rerank import rerank
from codeloupe.ask.shape import classify
from codeloupe.ask.sources import Sources
from codeloupe.ask.splice import SpanResolver, Splicer, dropped_summary, note_part, prose_part
from codeloupe.context import WorkspaceContext
from codeloupe.types import Bundle, FlowUse

MODES = ("code", "docs", "both")
ABSTAINED_NOTE = "The retrieved code does not answer this question."
NO_CITATIONS = "the model cited none of the retrieved code"
_CITED_K = re.compile(r"\[\[\s*(\d+)")


class AskError(ValueError):
    """A request `ask` refuses before doing anything (an empty question, an unknown mode)."""


class AskRun:
    """The events of one ask (see `AskEvent`), as an iterator, or its answer alone (`result`); `cancel()`, from
    any thread and at any time, ends it early: the model call in flight is cut off (the thread waiting on it
    returns at once), no other is made, and the events end as after any failed model call, with `fallback` and
    `done` carrying the plain bundle."""

    def __init__(self, events: Generator[AskEvent, None, None], cancellation: Cancellation) -> None:
        self._events = events
        self.cancellation = cancellation

    def __iter__(self) -> AskRun:
        return self

    def __next__(self) -> AskEvent:
        return next(self._events)

    def cancel(self) -> None:
        self.cancellation.cancel()

    def result(self, on_event: Callable[[AskEvent], None] | None = None) -> AskResult | None:
        """Take the events to the end (each shown to `on_event` first) and return the `done` event's result; None
        when they end without one, or once the run is cancelled: its answer then goes to no one, so nothing more
        is taken or shown, and a run cancelled before this call never starts (no retrieval, no model call). A
        server cancels from its event loop while a worker thread is here, whenever its client goes."""
        try:
            while not self.cancellation.cancelled:
                event = next(self, None)
                if event is None or self.cancellation.cancelled:
                    return None
                if on_event is not None:
                    on_event(event)
                if event.type == "done":
                    return event.result
            return None
        finally:
            self.close()

    def close(self) -> None:
        """Stop here (from the thread taking the events, between two of them), as a generator's `close`."""
        self._events.close()


class _Session:
    """One question's shared state: the bundle, the numbering, the disk reader and the metrics."""

    def __init__(self, ws: WorkspaceContext, question: str, bundle: Bundle, mode: str, started: float) -> None:
        self.ws = ws
        self.question = question
        self.bundle = bundle
        self.mode = mode
        self.started = started
        self.sources = Sources(ws)
        self.excerpts = Excerpts.from_bundle(bundle, self.sources)
        self.resolver = SpanResolver(self.excerpts, self.sources, whole_sections=mode == "docs")
        self.metrics: dict[str, Any] = {}
        self.chat: ChatModel | None = None
        self.flow: FlowUse | None = None

    def rebundle(self, bundle: Bundle) -> None:
        """Adopt a reordered bundle (rerank): the excerpt numbering follows the new order."""
        self.bundle = bundle
        self.excerpts = Excerpts.from_bundle(bundle, self.sources)
        self.resolver = SpanResolver(self.excerpts, self.sources, whole_sections=self.mode == "docs")

    def splice(self, deltas: Iterable[str]) -> Generator[AskEvent, None, tuple[Splicer, list[AnswerPart]]]:
        splicer = Splicer(self.resolver)
        pieces: list[AnswerPart] = []
        first_token: float | None = None
        for delta in deltas:
            first_token = first_token or time.perf_counter()
            for piece in splicer.feed(delta):
                pieces.append(piece)
                yield from _piece_events(piece)
        for piece in splicer.finish():
            pieces.append(piece)
            yield from _piece_events(piece)
        if first_token is not None:
            self.metrics["first_token_ms"] = round((first_token - self.started) * 1000, 1)
        return splicer, pieces

    def _done(self, parts: list[AnswerPart], *, citations: list | None = None, abstained: bool = False,
              fallback: str | None = None) -> AskEvent:
        cited = {c.path for c in citations or []}
        self.metrics.update({
            "elapsed_ms": round((time.perf_counter() - self.started) * 1000, 1),
            "excerpts": len(self.excerpts), "excerpts_omitted": self.excerpts.omitted,
            "excerpts_withheld": self.excerpts.withheld,
            "citations": len(citations or []), **{f"splice_{k}": v for k, v in sorted(self.resolver.stats.items())},
        })
        if self.chat is not None:
            self.metrics.update({"model_calls": self.chat.calls, "model_failures": self.chat.failures})
        result = AskResult(answer="".join(p.markdown for p in parts), citations=list(citations or []),
                           uncited=[h for h in self.bundle.files if h.path not in cited], abstained=abstained,
                           fallback=fallback, bundle=self.bundle, metrics=self.metrics, parts=parts,
                           flow=self.flow)
        return AskEvent("done", result=result)

    def fallback(self, reason: str) -> Iterator[AskEvent]:
        yield AskEvent("fallback", {"reason": reason})
        yield self._done(bundle_parts(self.bundle, self.resolver), fallback=reason)

    def finish(self, splicer: Splicer, pieces: list[AnswerPart]) -> Iterator[AskEvent]:
        if splicer.abstained:
            said = _stripped(pieces)
            parts = [note_part(f"{ABSTAINED_NOTE}\n\n"), *said, *([prose_part("\n\n")] if said else []),
                     *bundle_parts(self.bundle, self.resolver)]
            yield self._done(parts, citations=splicer.citations, abstained=True)
        elif not splicer.citations:
            summary = dropped_summary(splicer.dropped)
            yield from self.fallback(f"{NO_CITATIONS} ({summary})" if summary else NO_CITATIONS)
        else:
            self._record(pieces)
            cited = {c.path for c in splicer.citations}
            footer = footer_parts([h for h in self.bundle.files if h.path not in cited])
            yield self._done([*pieces, *footer], citations=splicer.citations)

    def _record(self, pieces: list[AnswerPart]) -> None:
        """Keep the walkthrough in the flow cache; a failure to keep it never costs the answer."""
        try:
            stored = flows.record(self.ws, self.question, self.mode, pieces)
        except Exception as exc:  # an embedding endpoint gone, a locked index: the answer stands
            self.metrics["flow_store_error"] = str(exc)
            return
        flow_id, replaced = stored if stored is not None else (None, [])
        self.metrics["flow_stored"] = flow_id
        if replaced:  # the earlier flows it took the place of (`flows --warm` says so)
            self.metrics["flows_replaced"] = [{"id": f.id, "question": f.question} for f in replaced]

    def serve(self, lookup: flows.Lookup) -> Iterator[AskEvent]:
        """The cached walkthrough verbatim (its cited files hash as they did), with today's uncited files."""
        assert lookup.flow is not None and lookup.use is not None
        parts, citations = flows.served_parts(lookup.flow)
        flows.append_sources(self.bundle, lookup.flow, parts)
        self.flow = lookup.use
        yield AskEvent("flow", dataclasses.asdict(lookup.use))
        for part in parts:
            yield from _piece_events(part)
        cited = {c.path for c in citations}
        footer = footer_parts([h for h in self.bundle.files if h.path not in cited])
        yield self._done([*parts, *footer], citations=citations)


def _stripped(parts: list[AnswerPart]) -> list[AnswerPart]:
    """The parts without the whitespace around them (what a model said after abstaining)."""
    kept = list(parts)
    while kept and kept[0].kind == "prose" and not kept[0].text.strip():
        kept.pop(0)
    while kept and kept[-1].kind == "prose" and not kept[-1].text.strip():
        kept.pop()
    if kept and kept[0].kind == "prose":
        kept[0] = prose_part(kept[0].text.lstrip())
    if kept and kept[-1].kind == "prose":
        kept[-1] = prose_part(kept[-1].text.rstrip())
    return kept


def _piece_events(piece: AnswerPart) -> Iterator[AskEvent]:
    if piece.citation is not None and piece.kind == "code":
        yield AskEvent("citation", piece.citation.to_dict())
    # `text` stays the markdown older clients concatenate; `plain` is the part's text as `done.parts` carries it (a
    # draft shown as text showed the markdown's escapes: a model's `\*` read `\\*`), with a ref's or code's span.
    yield AskEvent("delta", {**piece.to_dict(), "text": piece.markdown, "plain": piece.text})


def run_ask(ws: WorkspaceContext, question: str, *, mode: str = "code", agents: bool | None = None,
            best: bool = False) -> AskRun:
    """Answer `question` over the workspace; see `AskEvent` for the stream. `agents` forces fan-out on/off."""
    question = question.strip()
    if not question:
        raise AskError("the question is empty")
    if mode not in MODES:
        raise AskError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")
    cancellation = Cancellation()
    return AskRun(_run(ws, question, mode, agents, best, cancellation), cancellation)


def _run(ws: WorkspaceContext, question: str, mode: str, agents: bool | None, best: bool,
         cancellation: Cancellation) -> Generator[AskEvent, None, None]:
    started = time.perf_counter()
    bundle = ws.search(question, mode=mode)
    session = _Session(ws, question, bundle, mode, started)
    session.metrics["retrieval_ms"] = round((time.perf_counter() - started) * 1000, 1)
    yield AskEvent("retrieval", {"query": question, "mode": mode, "core": [h.path for h in bundle.core],
                                 "related": [h.path for h in bundle.related], "timing_ms": bundle.timing_ms})
    looked = time.perf_counter()
    cached = flows.lookup(ws, question, bundle, mode)
    session.metrics["flow_lookup_ms"] = round((time.perf_counter() - looked) * 1000, 1)
    if cached.served:
        yield from session.serve(cached)
        return
    if cached.use is not None and cached.flow is not None:
        flows.append_sources(bundle, cached.flow)
        session.flow = cached.use
        yield AskEvent("flow", dataclasses.asdict(cached.use))
    try:
        session.chat = chat = ChatModel.from_settings(ws.settings, cancellation)
    except ChatUnavailable as exc:
        yield from session.fallback(str(exc))
        return
    if best:
        reordered, details = rerank(chat, question, bundle)
        session.metrics["rerank"] = details
        session.rebundle(reordered)
        yield AskEvent("rerank", details)
    if not len(session.excerpts):
        yield from session.fallback("nothing was retrieved to narrate")
        return
    try:
        deltas = yield from _deltas(ws, chat, session, agents, cached.context)
        if deltas is None:
            return
        splicer, pieces = yield from session.splice(deltas)
    except ChatError as exc:
        yield from session.fallback(str(exc))
        return
    yield from session.finish(splicer, pieces)


def _deltas(ws: WorkspaceContext, chat: ChatModel, session: _Session, agents: bool | None,
            context: str) -> Generator[AskEvent, None, Iterable[str] | None]:
    """The text to splice: one narrator's stream, or the agents' merged answer. None: already fell back."""
    question, excerpts = session.question, session.excerpts
    shape = classify(session.bundle, question)
    # A docs walkthrough reads sections in order: one narrator, unless agents are asked for.
    fan_out = (shape.broad and session.mode != "docs") if agents is None else agents
    session.metrics["broad"] = {"broad": shape.broad, "reasons": list(shape.reasons), "fan_out": fan_out}
    tasks, source = make_plan(chat, question, excerpts.all()) if fan_out else ([], "single narrator")
    yield AskEvent("plan", {"broad": shape.broad, "reasons": list(shape.reasons), "source": source,
                            "agents": [{"agent": t.id, "question": t.question, "excerpts": list(t.ks)}
                                       for t in tasks]})
    if len(tasks) < 2:
        return chat.stream(narrator_messages(question, excerpts.render(), docs=session.mode == "docs",
                                             context=context))
    outcomes = yield from run_agents(ws, chat, question, tasks, excerpts, session.sources, session.mode)
    session.metrics["agents"] = [{"agent": o.task.id, "ok": o.answer is not None, "error": o.error,
                                  "tool_calls": o.tool_calls, "elapsed_ms": round(o.elapsed_ms, 1)}
                                 for o in outcomes]
    answered = [(o.task.question, o.answer) for o in outcomes if o.answer]
    if not answered:
        yield from session.fallback("every agent failed: " + "; ".join(sorted({o.error or "" for o in outcomes})))
        return None
    if len(answered) == 1:
        return [answered[0][1]]
    cited = sorted({int(k) for _, text in answered for k in _CITED_K.findall(text)})
    index = excerpt_index([e for e in excerpts.all() if e.k in cited])
    return chat.stream(synthesis_messages(question, answered, index))
