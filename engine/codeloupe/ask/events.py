"""What `run_ask` streams: events, and the final result carried by the `done` event."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from codeloupe.types import Bundle, FileHit, FlowUse


@dataclass(frozen=True)
class Citation:
    """One span of a workspace file, read from disk at splice time and shown verbatim."""

    k: int  # the excerpt number the model cited
    path: str
    start_line: int  # 1-based, inclusive, in the file as it is on disk now
    end_line: int
    text: str
    language: str
    requested: tuple[int, int] | None = None  # the lines the model asked for, before snapping; None: whole
    snapped: bool = False  # widened to enclosing symbol edges
    changed: bool = False  # the file changed since it was indexed and the span was re-located
    revision: str = ""  # a remote index: the commit the span was read at

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["requested"] = list(self.requested) if self.requested else None
        return out


@dataclass(frozen=True)
class AnswerPart:
    """One part of an answer, in reading order. Only `code` parts are code, and their text is read from disk.

    kind: prose (the model's words, sanitised to plain text: identifiers in backticks at most) | heading |
    note (the engine's own words) | ref (a cited span named where its marker stood) | code (a spliced span).
    Surfaces render `text` as plain text (escaped) and code parts as code; `markdown` is the same part as
    markdown in which prose cannot form code, HTML, links or images.
    """

    kind: str
    text: str
    markdown: str
    citation: Citation | None = None  # ref and code: the span (k is 0 for a bundle chunk nobody cited)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "text": self.text}
        if self.citation is not None:
            c = self.citation
            # `revision`: where a shared index's span was read (its document), for a view to read it again later
            out.update(k=c.k, path=c.path, start_line=c.start_line, end_line=c.end_line, language=c.language,
                       revision=c.revision)
            if self.kind == "code":  # a view says so under the code, as the markdown's caption does
                out["changed"] = c.changed
        return out


@dataclass
class AskResult:
    answer: str  # markdown: the parts' markdown joined (prose, with every cited span as a fenced block)
    citations: list[Citation]
    uncited: list[FileHit]  # every candidate the answer did not cite, in rank order
    abstained: bool
    fallback: str | None  # why the plain bundle was returned instead of a narrated answer
    bundle: Bundle
    metrics: dict[str, Any] = field(default_factory=dict)
    parts: list[AnswerPart] = field(default_factory=list)  # the answer as plain-text and code parts
    flow: FlowUse | None = None  # a cached walkthrough served verbatim, or attached as context

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "parts": [p.to_dict() for p in self.parts],
            "citations": [c.to_dict() for c in self.citations],
            "uncited": [dataclasses.asdict(f) for f in self.uncited],
            "abstained": self.abstained,
            "fallback": self.fallback,
            "bundle": dataclasses.asdict(self.bundle),
            "metrics": self.metrics,
            "flow": dataclasses.asdict(self.flow) if self.flow is not None else None,
        }


@dataclass
class AskEvent:
    """One event of the ask stream: `type` plus its fields; `done` carries the result.

    Types: retrieval, flow, rerank, plan, agent, delta, citation, fallback, done. `delta` events concatenate
    to the streamed answer: each is a part (`plain` its text, `text` its markdown); when a model call fails
    part-way a `fallback` event follows and `done.answer` replaces whatever was streamed. `flow` says a cached
    walkthrough is served (its parts follow as deltas) or attached to the model's prompt as context (`done.flow`
    says the same).
    """

    type: str
    data: dict[str, Any] = field(default_factory=dict)
    result: AskResult | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, **self.data}
        if self.result is not None:
            out.update(self.result.to_dict())
        return out
