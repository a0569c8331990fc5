"""Every instruction a model sees, in one place, so the citation grammar is stated once."""

from __future__ import annotations

from typing import Any

from codeloupe.ask.excerpts import Excerpt
from codeloupe.ask.prose import ABSTAIN

CITATION_RULES = f"""\
Rules:
- Write prose only. Never write code, never quote code, never use code fences or indented code: the tool \
that shows your answer inserts the real code, read from disk, wherever you cite it.
- Cite with [[k]] for a whole excerpt k, or [[k:a-b]] for lines a-b of the file, inside excerpt k (use the \
line numbers printed in the excerpt). Put each citation right after the sentence it supports.
- Cite only excerpts you were given; never invent numbers or line ranges.
- If the excerpts do not answer the question, reply with exactly {ABSTAIN} followed by one sentence saying \
what is missing."""

NARRATOR = f"""\
You explain a code base to a developer, using only the numbered excerpts of their workspace below. \
Answer the question as a short walkthrough: what happens, in which order, and where.
{CITATION_RULES}"""

DOCS_NARRATOR = f"""\
You walk a developer through their project's documentation, using only the numbered sections below. \
Answer in reading order, citing whole sections with [[k]].
{CITATION_RULES}"""

PLANNER = """\
You split a broad question about a code base into at most 4 focused sub-questions, and give each one a \
disjoint set of the numbered excerpts listed below (each excerpt number at most once). Reply with JSON only:
{"agents": [{"question": "...", "excerpts": [1, 2]}, ...]}
Use a single agent when the question is not really broad."""

AGENT = f"""\
You answer one part of a larger question about a code base. Start from the numbered excerpts below. You \
may call tools to search for more code, read a file's lines or look up a symbol (at most 3 rounds); code \
they return is numbered too and can be cited the same way.
{CITATION_RULES}"""

SYNTHESISER = f"""\
Several researchers answered parts of a developer's question; merge their answers into one walkthrough. \
Keep every citation marker exactly as written ([[k]] or [[k:a-b]]): the numbers refer to one shared list of \
excerpts. Do not add citations that none of them made; drop repetition; order the walkthrough so it reads \
from entry point to detail.
{CITATION_RULES}"""

BACKGROUND = """\
Background, not an excerpt: an earlier answer to a similar question. It may be out of date and it cannot be \
cited; use it only to know where to look, and cite only the numbered excerpts below."""

RERANK = """\
Order the candidate files by how directly each one answers the developer's question (most direct first). \
Reply with JSON only: {"order": [candidate numbers]}"""


def excerpt_index(excerpts: list[Excerpt]) -> str:
    """One line per excerpt (no code): what the planner and the synthesiser see."""
    return "\n".join(e.header() for e in excerpts)


def narrator_messages(question: str, excerpts_text: str, *, docs: bool, context: str = "") -> list[dict[str, Any]]:
    """`context`: an earlier answer's prose (the flow cache's attach lane), stripped of everything citable."""
    background = f"{BACKGROUND}\n{context}\n\n" if context else ""
    return [
        {"role": "system", "content": DOCS_NARRATOR if docs else NARRATOR},
        {"role": "user", "content": f"{background}Excerpts:\n\n{excerpts_text}\n\nQuestion: {question}"},
    ]


def planner_messages(question: str, index: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": PLANNER},
        {"role": "user", "content": f"Excerpts:\n{index}\n\nQuestion: {question}"},
    ]


def agent_messages(question: str, sub_question: str, excerpts_text: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": AGENT},
        {"role": "user", "content": f"The developer asked: {question}\n\nYour part: {sub_question}\n\n"
                                    f"Excerpts:\n\n{excerpts_text}"},
    ]


def synthesis_messages(question: str, parts: list[tuple[str, str]], index: str) -> list[dict[str, Any]]:
    answers = "\n\n".join(f"Part {i}: {sub}\n{text}" for i, (sub, text) in enumerate(parts, 1))
    return [
        {"role": "system", "content": SYNTHESISER},
        {"role": "user", "content": f"Question: {question}\n\nExcerpts cited below:\n{index}\n\n{answers}"},
    ]


def rerank_messages(question: str, candidates: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": RERANK},
        {"role": "user", "content": f"Question: {question}\n\nCandidates:\n\n{candidates}"},
    ]
