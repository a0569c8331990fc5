"""The flow cache: a walkthrough is never computed twice.

A successful answer is stored with the SHA-256 of every file it cites and two vectors from one embedding
batch: the question alone (near-exact matching) and the question plus the model's prose (semantic). Code is
never embedded: prose parts hold none.

A later question is matched on the query vector retrieval already computed (the provider's query memo: no
second embedding, no model call):
- question similarity >= SERVE_SIMILARITY and the coverage guard holds and every cited file hashes on disk
  as it did: the cached walkthrough is served verbatim (its code was read from those very bytes);
- otherwise the best flow at >= ATTACH_SIMILARITY (question or semantic vector) goes to the narrator as
  background it cannot cite, stripped of code, citation markers, locations and headings;
- below: nothing.
A flow never reorders or displaces a retrieved file; files it cites that retrieval missed join the end of
RELATED (at most MAX_RELATED).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from codeloupe.ask.events import AnswerPart, Citation
from codeloupe.context import WorkspaceContext
from codeloupe.errors import WorkspaceError
from codeloupe.index import content_hash
from codeloupe.lanes.tokens import STOP_WORDS, stem
from codeloupe.store.flows import FlowRow, count_served, delete_flows, flow_parts, flow_rows, put_flow
from codeloupe.types import Bundle, FileHit, FlowOutcome, FlowUse

log = logging.getLogger("codeloupe.flows")

# The thresholds issue 17 set. Measured with the local MiniLM against "how does login check the password":
# a reworded copy 0.987 (served), "how is the password verified at login" 0.854 and the same question with a
# second one appended 0.686 (both attached), "where are login sessions opened" 0.476 and "what formats the log
# output" 0.269 (nothing). Serving is meant for repeats, not for every paraphrase.
REPLACE_SIMILARITY = 0.92
SERVE_SIMILARITY = 0.88
ATTACH_SIMILARITY = 0.62
# Share of the new question's content words the cached question must hold to be served: "how does login
# work and how are sessions expired" is close to "how does login work" in vector space but asks for more.
SERVE_COVERAGE = 0.8
MAX_RELATED = 3
CONTEXT_MAX_CHARS = 2000
KILL_SWITCH = "CODELOUPE_NO_FLOWS"

# Words that shape a question without saying what it is about ("how does ... work").
_SCAFFOLDING = frozenset(stem(w) for w in """
how does do did work works working what where why which when who explain show tell me walk through happen
happens happening code codebase implemented implementation
""".split())
_WORD = re.compile(r"[A-Za-z0-9_]+")

# What the attach lane strips: anything that looks like the chrome of a citable excerpt or an answer.
_FENCE = re.compile(r"(```|~~~).*?(\1|\Z)", re.S)
_HEADING = re.compile(r"^\s*#+.*$", re.M)
_EXCERPT_HEADER = re.compile(r"\[\d+\]\s+\S+\s+lines?\s+\d+(?:\s*-\s*\d+)?", re.I)  # "[3] a.py lines 1-9"
_MARKER = re.compile(r"\[\[[^\]]*\]\]?|\[\d+(?::[\d\s-]*)?\]")
_LOCATION = re.compile(r"\S+:\d+(?:-\d+)?|\blines?\s+\d+(?:\s*-\s*\d+)?", re.I)
_CHROME = re.compile(r"[`#*>|]")


def enabled(ws: WorkspaceContext) -> bool:
    """The workspace's `flows` setting, unless the environment's kill switch is on."""
    killed = os.environ.get(KILL_SWITCH, "").strip().lower() not in ("", "0", "false", "no", "off")
    return ws.settings.flows and not killed


def content_words(text: str) -> set[str]:
    return {stem(w) for w in (m.lower() for m in _WORD.findall(text))
            if w not in STOP_WORDS and stem(w) not in _SCAFFOLDING}


def coverage(cached_question: str, question: str) -> float:
    """Share of `question`'s content words that `cached_question` holds (1.0 when it has none)."""
    wanted = content_words(question)
    return len(wanted & content_words(cached_question)) / len(wanted) if wanted else 1.0


def context_text(prose: str) -> str:
    """A cached answer's prose as background for a model: no code, markers, locations or headings, so nothing
    in it looks like an excerpt the model could cite or imitate."""
    text = _FENCE.sub(" ", prose)
    text = _HEADING.sub(" ", text)
    text = _EXCERPT_HEADER.sub(" ", text)
    text = _MARKER.sub(" ", text)
    text = _LOCATION.sub(" ", text)
    text = _CHROME.sub("", text)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    text = "\n".join(line for line in lines if line)
    return text[:CONTEXT_MAX_CHARS]


@dataclass
class Lookup:
    """What the cache offers one question: a flow to serve, or one to attach, or neither."""

    use: FlowUse | None = None
    flow: FlowRow | None = None

    @property
    def served(self) -> bool:
        return self.use is not None and self.use.action == "served"

    @property
    def context(self) -> str:
        return context_text(self.flow.prose) if self.flow is not None and not self.served else ""


def _model(ws: WorkspaceContext) -> str:
    from codeloupe.embed import describe_provider

    return describe_provider(ws.settings)[1]


def query_vector(ws: WorkspaceContext, bundle: Bundle) -> np.ndarray | None:
    """The vector retrieval embedded the query with; None when retrieval did not embed it (no provider, no
    vectors yet, an issue's variants), since computing one here would be a second embedding."""
    dense = next((lane for lane in bundle.lanes if lane.name == "dense"), None)
    if bundle.issue_mode or dense is None or not dense.ready:
        return None
    provider = ws.embedding_provider()
    try:
        return None if provider is None else provider.embed_query(bundle.query)  # the searcher's memo
    except Exception as exc:  # the searcher already searched without it
        log.warning("no query vector for the flow cache: %s", exc)
        return None


def disk_hashes_match(ws: WorkspaceContext, files: dict[str, str]) -> bool:
    for path, digest in files.items():
        try:
            if content_hash(ws.read_bytes(path)) != digest:
                return False
        except (WorkspaceError, OSError):
            return False
    return True


def lookup(ws: WorkspaceContext, question: str, bundle: Bundle, mode: str) -> Lookup:
    if not enabled(ws):
        return Lookup()
    vector = query_vector(ws, bundle)
    model = _model(ws)
    if vector is None or not model:
        return Lookup()
    flows = [f for f in flow_rows(ws.store, mode=mode, model=model, live_only=True, with_parts=False)
             if len(f.question_vec) == len(vector)]
    scored = sorted(((float(vector @ f.question_vec), float(vector @ f.semantic_vec), f) for f in flows),
                    key=lambda s: (-s[0], -s[1], -s[2].created))
    for near, _, flow in scored:
        if near < SERVE_SIMILARITY:
            break
        share = coverage(flow.question, question)
        if share >= SERVE_COVERAGE and disk_hashes_match(ws, flow.files):
            count_served(ws.store, flow.id)
            flow.parts = flow_parts(ws.store, flow.id)
            return Lookup(FlowUse("served", flow.id, flow.question, round(near, 4), round(share, 3)), flow)
    attachable = [(max(near, semantic), near, flow) for near, semantic, flow in scored
                  if max(near, semantic) >= ATTACH_SIMILARITY and context_text(flow.prose)]
    if not attachable:
        return Lookup()
    _, near, flow = max(attachable, key=lambda s: (s[0], s[2].created))
    flow.parts = flow_parts(ws.store, flow.id)  # its citations may join RELATED
    return Lookup(FlowUse("attached", flow.id, flow.question, round(near, 4),
                          round(coverage(flow.question, question), 3)), flow)


# ------------------------------------------------------------------------------------- parts as data


def part_to_data(part: AnswerPart) -> dict:
    """A part as stored: unlike `AnswerPart.to_dict` (the wire shape), it keeps the markdown and every field of
    the citation, so a served answer is the stored one exactly."""
    citation = part.citation.to_dict() if part.citation is not None else None
    return {"kind": part.kind, "text": part.text, "markdown": part.markdown, "citation": citation}


def part_from_data(data: dict) -> AnswerPart:
    raw = data.get("citation")
    citation = None
    if raw is not None:
        citation = Citation(**{**raw, "requested": tuple(raw["requested"]) if raw.get("requested") else None})
    return AnswerPart(data["kind"], data["text"], data["markdown"], citation)


def served_parts(flow: FlowRow) -> tuple[list[AnswerPart], list[Citation]]:
    parts = [part_from_data(p) for p in flow.parts]
    citations = [p.citation for p in parts if p.kind == "code" and p.citation is not None]
    return parts, citations


def append_sources(bundle: Bundle, flow: FlowRow, parts: Iterable[AnswerPart] | None = None) -> None:
    """Files the flow cites that retrieval did not return, at the end of RELATED (at most MAX_RELATED)."""
    known = {hit.path for hit in bundle.files}
    added = 0
    for part in parts if parts is not None else (part_from_data(p) for p in flow.parts):
        c = part.citation
        if part.kind != "code" or c is None or c.path in known or added >= MAX_RELATED:
            continue
        known.add(c.path)
        added += 1
        bundle.related.append(FileHit(
            path=c.path, language=c.language, rank=len(bundle.files) + 1, score=0.0, best_start_line=c.start_line,
            best_end_line=c.end_line, symbols=[], why=f"cited by a cached answer to {flow.question!r}", via="flow"))


# ------------------------------------------------------------------------------------------- record


def record(ws: WorkspaceContext, question: str, mode: str,
           pieces: list[AnswerPart]) -> tuple[int, list[FlowRow]] | None:
    """Store a successful walkthrough; returns its id and the flows it replaced (None when flows are off or no
    embedding is at hand).

    The new flow replaces every flow of the same mode whose question is at >= REPLACE_SIMILARITY, stale ones
    included (so a refreshed question takes its old row's place)."""
    if not enabled(ws):
        return None
    model = _model(ws)
    provider = ws.embedding_provider() if model else None
    cited = sorted({p.citation.path for p in pieces if p.kind == "code" and p.citation is not None})
    if provider is None or not cited:
        return None
    prose = "".join(p.text for p in pieces if p.kind == "prose").strip()
    files = {}
    for path in cited:
        try:
            files[path] = content_hash(ws.read_bytes(path))
        except (WorkspaceError, OSError):
            return None  # a cited file vanished while answering: nothing to pin the answer to
    vectors = provider.embed([question, f"{question}\n\n{prose}"])
    question_vec, semantic_vec = vectors[0], vectors[1]
    replaces = [f for f in flow_rows(ws.store, mode=mode, model=model, with_parts=False)
                if len(f.question_vec) == len(question_vec)
                and float(question_vec @ f.question_vec) >= REPLACE_SIMILARITY]
    flow_id = put_flow(ws.store, question=question, mode=mode, model=model, question_vec=question_vec,
                       semantic_vec=semantic_vec, prose=prose, parts=[part_to_data(p) for p in pieces],
                       files=files, replaces=[f.id for f in replaces])
    return flow_id, replaces


# ------------------------------------------------------------------------------- refresh and warm


def reask(ws: WorkspaceContext, questions: Iterable[tuple[str, str]],
          renewed: Iterable[int] = ()) -> list[FlowOutcome]:
    """Ask each (question, mode) with one narrator; a success lands in the cache like any answer, and is
    `replaced` where it took the place of earlier flows other than `renewed` (the stale ones re-asked)."""
    from codeloupe.ask.run import run_ask

    renewed = set(renewed)
    outcomes = []
    for question, mode in questions:
        result = None
        for event in run_ask(ws, question, mode=mode, agents=False):
            result = event.result or result
        assert result is not None  # every ask ends in `done`
        if result.flow is not None and result.flow.action == "served":
            outcomes.append(FlowOutcome(question, "served"))
        elif result.fallback is not None or result.abstained or result.metrics.get("flow_stored") is None:
            reason = result.fallback or ("the model abstained" if result.abstained else
                                         result.metrics.get("flow_store_error", "not stored"))
            outcomes.append(FlowOutcome(question, "failed", reason))
        elif replaced := [f["question"] for f in result.metrics.get("flows_replaced", [])
                          if f["id"] not in renewed]:
            outcomes.append(FlowOutcome(question, "replaced", replaced=replaced))
        else:
            outcomes.append(FlowOutcome(question, "answered"))
    return outcomes


def refresh(ws: WorkspaceContext) -> list[FlowOutcome]:
    """Re-ask every stale flow; one answered again (or now served by another flow) leaves the cache."""
    stale = [f for f in flow_rows(ws.store, with_parts=False) if f.stale]
    outcomes = reask(ws, [(f.question, f.mode) for f in stale], renewed=[f.id for f in stale])
    delete_flows(ws.store, [f.id for f, o in zip(stale, outcomes) if o.outcome != "failed"])
    return outcomes


def warm_questions(ws: WorkspaceContext, limit: int) -> list[str]:
    """The workspace's main workflows as questions, derived from its most mentioned definitions."""
    return [f"how does {stop.name} work" for stop in ws.tour(limit=limit).stops]
