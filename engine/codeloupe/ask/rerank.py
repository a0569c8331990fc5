"""Optional listwise rerank (`best=True`): a permutation of the retriever's candidates, never more or fewer.

Three votes run in parallel and merge by mean rank. The retriever stays in charge of the floor: a file may
rise freely but lands at most one place below its retriever rank. Any failure keeps the retriever's order.
"""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from codeloupe.ask.chat import ChatError, ChatModel
from codeloupe.ask.prompts import rerank_messages
from codeloupe.types import Bundle, FileHit, one_line

VOTES = 3
VOTE_TEMPERATURE = 0.7  # three identical greedy votes would be one vote
CANDIDATE_CHARS = 1_200  # of each candidate's best chunk


def parse_order(content: str, n: int) -> list[int] | None:
    """A vote as a full permutation of 0..n-1: named candidates first, the unnamed in retriever order."""
    start, end = content.find("{"), content.rfind("}")
    try:
        data = json.loads(content[start:end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError:
        return None
    order = data.get("order") if isinstance(data, dict) else None
    if not isinstance(order, list):
        return None
    seen: list[int] = []
    for item in order:
        if isinstance(item, int) and 1 <= item <= n and item - 1 not in seen:
            seen.append(item - 1)
    if not seen:
        return None
    return seen + [i for i in range(n) if i not in seen]


def merge_votes(votes: list[list[int]], n: int) -> list[int]:
    """Mean rank over the votes, then the floor: the file at retriever position i ends at position <= i+1."""
    mean = {i: sum(vote.index(i) for vote in votes) / len(votes) for i in range(n)}
    preferred = sorted(range(n), key=lambda i: (mean[i], i))
    placed: list[int] = []
    for position in range(n):
        due = position - 1  # the file whose floor is this position must go now
        if 0 <= due < n and due not in placed:
            placed.append(due)
        else:
            placed.append(next(i for i in preferred if i not in placed))
    return placed


def _candidates_text(files: list[FileHit]) -> str:
    parts = []
    for number, hit in enumerate(files, 1):
        chunk = hit.chunks[0] if hit.chunks else None
        shown = (chunk.text or (chunk.snippet.text if chunk.snippet else "")) if chunk else ""
        best = shown[:CANDIDATE_CHARS]
        parts.append(f"Candidate {number}: {one_line(hit.path)} lines {hit.best_start_line}-{hit.best_end_line}\n{best}")
    return "\n\n".join(parts)


def rerank(chat: ChatModel, question: str, bundle: Bundle) -> tuple[Bundle, dict[str, Any]]:
    """(reordered bundle, details for the event and the metrics). CORE and RELATED keep their members."""
    files = bundle.files
    if len(files) < 2:
        return bundle, {"applied": False, "reason": "fewer than two candidates"}
    messages = rerank_messages(question, _candidates_text(files))

    def vote(_: int) -> list[int] | str:
        try:
            reply = chat.complete(messages, temperature=VOTE_TEMPERATURE)
        except ChatError as exc:
            return str(exc)
        return parse_order(reply.content, len(files)) or "unusable vote"

    with ThreadPoolExecutor(max_workers=VOTES, thread_name_prefix="ask-rerank") as pool:
        results = list(pool.map(vote, range(VOTES)))
    votes = [r for r in results if isinstance(r, list)]
    failures = [r for r in results if isinstance(r, str)]
    if not votes:
        return bundle, {"applied": False, "reason": failures[0], "votes": 0}
    order = merge_votes(votes, len(files))
    position = {files[i].path: new for new, i in enumerate(order)}
    core = sorted(bundle.core, key=lambda h: position[h.path])
    related = sorted(bundle.related, key=lambda h: position[h.path])
    renumbered = [dataclasses.replace(h, rank=r) for r, h in enumerate([*core, *related], 1)]
    reordered = dataclasses.replace(bundle, core=renumbered[:len(core)], related=renumbered[len(core):])
    return reordered, {"applied": True, "votes": len(votes), "failed_votes": len(failures),
                       "order": [files[i].path for i in order]}
