"""Is a question broad (fan out to agents) or narrow (one narrator)? Read from the retrieval's shape alone.

No model call and no text analysis beyond length: the bundle already says how spread out the answer is.
"""

from __future__ import annotations

from dataclasses import dataclass

from codeloupe.types import Bundle, FileHit

BROAD_CORE_FILES = 3  # "several CORE files within the gap"
BROAD_TOP_DIRS = 3  # the files that matter span this many top-level directories
BROAD_PARITY_FILES = 4  # RELATED files that nearly made CORE
PARITY = 0.8  # a RELATED score at least this share of the weakest CORE score is "near parity"
ISSUE_CHARS = 400  # a pasted bug report, not a question
ISSUE_LINES = 6


@dataclass(frozen=True)
class Shape:
    broad: bool
    reasons: tuple[str, ...]


def top_dir(path: str) -> str:
    return path.split("/", 1)[0] if "/" in path else "."


def near_parity(bundle: Bundle) -> list[FileHit]:
    if not bundle.related:
        return []
    bar = min(h.score for h in bundle.core) if bundle.core else max(h.score for h in bundle.related)
    return [h for h in bundle.related if h.score >= PARITY * bar]


def classify(bundle: Bundle, question: str) -> Shape:
    if bundle.scope:
        return Shape(False, (f"scoped to {bundle.scope}",))
    if len(bundle.files) < 2:
        return Shape(False, ("one candidate",))
    reasons = []
    if len(bundle.core) >= BROAD_CORE_FILES:
        reasons.append(f"{len(bundle.core)} CORE files")
    parity = near_parity(bundle)
    if len(parity) >= BROAD_PARITY_FILES:
        reasons.append(f"{len(parity)} RELATED files near score parity")
    dirs = {top_dir(h.path) for h in [*bundle.core, *parity]}
    if len(dirs) >= BROAD_TOP_DIRS:
        reasons.append(f"candidates across {len(dirs)} top-level directories")
    if bundle.issue_mode or len(question) >= ISSUE_CHARS or question.count("\n") >= ISSUE_LINES:
        reasons.append("issue-length query")
    return Shape(bool(reasons), tuple(reasons) or ("focused retrieval",))
