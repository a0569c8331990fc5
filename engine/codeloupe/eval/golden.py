"""Golden sets: the labelled queries the engine is scored on.

Two formats are read:

* a golden set (``public.json``): ``{"corpora": [{id, root, queries: [{id, kind, query, gold_files,
  gold_symbols, note}]}]}``, one code base per corpus, fetched by ``fetch_corpora.sh`` to
  ``DIR/<id>/repo``;
* a SWE-bench-style JSONL file: one ``{id, query, gold_files, repo}`` object per line, each with its own
  tree (``repo`` is a directory; a relative one is resolved against the JSONL file's folder).

A malformed file raises `GoldenSetError` naming the file and the offending entry; nothing is half-loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeloupe.constants import QUERY_KINDS as KINDS


class GoldenSetError(ValueError):
    """The golden-set file cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class GoldenQuery:
    id: str
    kind: str
    query: str
    gold_files: tuple[str, ...]
    gold_symbols: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class GoldenCorpus:
    id: str
    queries: tuple[GoldenQuery, ...]
    name: str = ""
    version: str = ""


@dataclass(frozen=True)
class SweInstance:
    """One SWE-bench-style instance: a query answered inside its own tree."""

    id: str
    query: str
    gold_files: tuple[str, ...]
    repo: Path
    kind: str = "issue"


@dataclass
class GoldenSet:
    path: Path
    corpora: list[GoldenCorpus] = field(default_factory=list)

    def corpus(self, corpus_id: str) -> GoldenCorpus:
        for corpus in self.corpora:
            if corpus.id == corpus_id:
                return corpus
        known = ", ".join(c.id for c in self.corpora)
        raise GoldenSetError(f"{self.path}: no corpus {corpus_id!r} (known: {known})")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GoldenSetError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GoldenSetError(f"{path}: cannot read as JSON ({exc})") from exc


def _str_list(value: Any, where: str, name: str, *, required: bool) -> tuple[str, ...]:
    if value is None and not required:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise GoldenSetError(f"{where}: {name!r} must be a list of non-empty strings")
    if required and not value:
        raise GoldenSetError(f"{where}: {name!r} is empty")
    return tuple(value)


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise GoldenSetError(f"{where}: missing or empty {key!r}")
    return value


def _query(entry: Any, where: str) -> GoldenQuery:
    if not isinstance(entry, dict):
        raise GoldenSetError(f"{where}: a query must be an object")
    kind = _text(entry, "kind", where)
    if kind not in KINDS:
        raise GoldenSetError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    return GoldenQuery(
        id=_text(entry, "id", where), kind=kind, query=_text(entry, "query", where),
        gold_files=_str_list(entry.get("gold_files"), where, "gold_files", required=True),
        gold_symbols=_str_list(entry.get("gold_symbols"), where, "gold_symbols", required=False),
        note=str(entry.get("note", "")),
    )


def load_golden(path: Path | str) -> GoldenSet:
    """Read and validate a golden set (the format of ``public.json``)."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("corpora"), list):
        raise GoldenSetError(f"{path}: expected an object with a 'corpora' list")
    golden = GoldenSet(path=path)
    seen_ids: set[str] = set()
    for index, raw in enumerate(data["corpora"]):
        where = f"{path}: corpora[{index}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("queries"), list):
            raise GoldenSetError(f"{where}: expected an object with a 'queries' list")
        corpus_id = _text(raw, "id", where)
        queries = tuple(_query(q, f"{where} ({corpus_id}) query {i}") for i, q in enumerate(raw["queries"]))
        for q in queries:
            if q.id in seen_ids:
                raise GoldenSetError(f"{where}: duplicate query id {q.id!r}")
            seen_ids.add(q.id)
        golden.corpora.append(GoldenCorpus(id=corpus_id, queries=queries, name=str(raw.get("name", "")),
                                           version=str(raw.get("version", ""))))
    return golden


def load_swebench(path: Path | str) -> list[SweInstance]:
    """Read a SWE-bench-style JSONL file (blank lines and ``#`` comments are skipped)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise GoldenSetError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenSetError(f"{path}: cannot read ({exc})") from exc
    instances: list[SweInstance] = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise GoldenSetError(f"{where}: not a JSON object ({exc})") from exc
        if not isinstance(entry, dict):
            raise GoldenSetError(f"{where}: not a JSON object")
        repo = Path(_text(entry, "repo", where)).expanduser()
        if not repo.is_absolute():
            repo = path.parent / repo
        instances.append(SweInstance(
            id=str(entry.get("id") or entry.get("instance_id") or f"line-{number}"),
            query=_text(entry, "query", where),
            gold_files=_str_list(entry.get("gold_files"), where, "gold_files", required=True),
            repo=repo, kind=str(entry.get("kind") or "issue"),
        ))
    if not instances:
        raise GoldenSetError(f"{path}: no instances")
    return instances
