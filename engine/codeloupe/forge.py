"""Forge: chunk strategies the user's chat model writes for file types no built-in chunker covers.

`scan` is the deterministic census: every file discovery would index, grouped by extension, counting those
that only line windows or plain-text sections would chunk. `forge` asks the user's chat model, once per
uncovered extension with at least `MIN_FILES` files, for a strategy module written against the real contract
(`codeloupe.chunk.strategies.ChunkStrategy`, its docstring is the prompt) plus sample files. The module is
accepted only when it chunks every matching file of the workspace as a line partition (`validate_partition`);
otherwise the failures go back to the model, at most `MAX_ATTEMPTS` times in all. An accepted module is written
to `.codeloupe/strategies/` and its sha256 recorded in the user's trust store, the user having asked for it.
The model writes code only here: indexing and retrieval run the accepted code and never call a model.
"""

from __future__ import annotations

import inspect
import os
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from codeloupe.chunk.languages import detect_language, get_parser, is_doc_language
from codeloupe.chunk.strategies import (
    STRATEGY_DIR,
    ChunkStrategy,
    Strategy,
    StrategyError,
    apply_strategy,
    in_config_dir,
    loaded_extensions,
    strategy_for,
)
from codeloupe.chunk.strategy_sandbox import ALLOWED_IMPORTS, static_problems
from codeloupe.discover import decode_source, walk
from codeloupe.settings import Settings
from codeloupe.trust import TrustStore, file_digest
from codeloupe.types import split_lines

MIN_FILES = 2
MAX_ATTEMPTS = 3
SAMPLE_FILES = 3
SAMPLE_LINES = 150
SAMPLE_CHARS = 8000
PROBLEMS_SHOWN = 5
# Plain-text extensions that are prose on purpose (the sections chunker is their chunker).
PROSE_TEXT = frozenset({".txt", ".text"})
@dataclass(frozen=True)
class ExtensionCount:
    extension: str  # ".ext"; "" for files without one
    files: int
    paths: list[str]  # every such file, sorted
    strategy: str = ""  # the strategy that already chunks them, if any


@dataclass
class Census:
    root: str
    files: int  # files discovery would index
    covered: int  # chunked by a grammar, a prose chunker or a strategy
    # most files first; codeloupe's own files (`.codeloupe/`) no chunker covers are in no list: no strategy cuts them
    uncovered: list[ExtensionCount] = field(default_factory=list)
    forged: list[ExtensionCount] = field(default_factory=list)  # uncovered by the built-ins, chunked by a strategy


@dataclass(frozen=True)
class ForgeAttempt:
    number: int
    problems: list[str]  # empty: accepted


@dataclass
class ForgeOutcome:
    extension: str
    files: int
    accepted: bool
    path: str = ""  # the strategy file written ("" when none was)
    sha256: str = ""
    attempts: list[ForgeAttempt] = field(default_factory=list)
    reason: str = ""  # why nothing was written


class ForgeError(ValueError):
    """Forge cannot start (no chat model, an unknown extension, a strategy folder that is a link, ...)."""


def is_covered(rel_path: str, language: str) -> bool:
    """Does a built-in chunker understand this file (a grammar, or prose it was written for)?"""
    if language == "text":
        return PurePosixPath(rel_path.lower()).suffix in PROSE_TEXT
    return is_doc_language(language) or get_parser(language) is not None


def _texts(root: Path, settings: Settings) -> dict[str, str]:
    """Every file discovery would index, decoded as the indexer decodes it."""
    out: dict[str, str] = {}
    for candidate in walk(root, settings).candidates:
        try:
            raw = candidate.abs_path.read_bytes()
        except OSError:
            continue
        decoded = decode_source(raw, settings, candidate.rel_path)
        if decoded.text is not None:
            out[candidate.rel_path] = decoded.text
    return out


def scan(root: Path, settings: Settings, strategies: tuple[Strategy, ...] = ()) -> Census:
    """The census of extensions no built-in chunker covers (same input, same answer)."""
    return _census(Path(root), _texts(Path(root), settings), strategies)


def _census(root: Path, texts: dict[str, str], strategies: tuple[Strategy, ...]) -> Census:
    groups: dict[str, list[str]] = defaultdict(list)
    covered = 0
    for rel, text in texts.items():
        if is_covered(rel, detect_language(rel, text[:200])):
            covered += 1
        elif not in_config_dir(rel):  # codeloupe's own files: no strategy chunks them, a forged one neither
            groups[PurePosixPath(rel.lower()).suffix].append(rel)
    census = Census(str(root.resolve()), len(texts), covered)
    for ext, paths in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        strategy = strategy_for(paths[0], strategies)  # by extension: the group's every file alike
        count = ExtensionCount(ext, len(paths), sorted(paths), strategy.name if strategy else "")
        if strategy is None:
            census.uncovered.append(count)
        else:
            census.forged.append(count)
            census.covered += len(paths)
    return census


def forge(root: Path, settings: Settings, *, extensions: list[str] | None = None,
          strategies: tuple[Strategy, ...] = (), trust: TrustStore | None = None,
          on_attempt: Callable[[str, ForgeAttempt], None] | None = None) -> list[ForgeOutcome]:
    """Forge a strategy for each uncovered extension with at least `MIN_FILES` files (or just `extensions`)."""
    from codeloupe.ask.chat import ChatError, ChatModel, ChatUnavailable

    root = Path(root).resolve()
    try:
        model = ChatModel.from_settings(settings)
    except ChatUnavailable as exc:
        raise ForgeError(f"forge needs a chat model: {exc}") from exc
    folder = _strategy_folder(root)
    texts = _texts(root, settings)
    census = _census(root, texts, strategies)
    wanted = {e if e.startswith(".") else "." + e for e in (e.lower() for e in extensions or [])}
    targets = [c for c in census.uncovered if c.extension and c.files >= MIN_FILES
               and (not wanted or c.extension in wanted)]
    missing = wanted - {c.extension for c in targets}
    if missing:
        raise ForgeError(f"nothing to forge for {', '.join(sorted(missing))}: each needs at least {MIN_FILES} "
                         "indexed files that no chunker covers (see `codeloupe scan`)")
    trust = trust or TrustStore.default()
    outcomes = []
    for target in targets:
        files = {path: texts[path] for path in target.paths}
        outcome = ForgeOutcome(target.extension, target.files, False)
        messages = _first_messages(target.extension, files)
        for number in range(1, MAX_ATTEMPTS + 1):
            try:
                reply = model.complete(messages).content
            except ChatError as exc:
                outcome.reason = str(exc)
                break
            source = extract_module(reply)
            problems = check_strategy(source, target.extension, files, f"forged{target.extension}-{number}")
            attempt = ForgeAttempt(number, problems)
            outcome.attempts.append(attempt)
            if on_attempt:
                on_attempt(target.extension, attempt)
            if not problems:
                path = _write(folder, target.extension, source, model.model, len(files))
                sha256 = file_digest(path.read_bytes())
                try:
                    trust.trust_strategy(path, sha256)
                except OSError as exc:  # the trust store's folder is a file, read-only, full...
                    # An untrusted strategy left behind would only be refused, with a warning, by every index.
                    path.unlink(missing_ok=True)
                    outcome.reason = (f"the strategy passed the check but could not be trusted ({trust.path}: "
                                      f"{exc.strerror or exc})")
                    break
                outcome.accepted, outcome.path, outcome.sha256 = True, str(path), sha256
                break
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": _repair_prompt(problems)}]
        else:
            outcome.reason = f"no strategy passed the partition check in {MAX_ATTEMPTS} attempts"
        outcomes.append(outcome)
    return outcomes


_SYSTEM = ("You write chunking strategies for codeloupe, a code search engine: a small pure Python module that "
           "cuts files of one format into line ranges. Reply with the module only, in one ```python block.")


def _first_messages(extension: str, files: dict[str, str]) -> list[dict[str, str]]:
    samples = []
    for path in list(files)[:SAMPLE_FILES]:
        lines = split_lines(files[path])
        shown = "".join(lines[:SAMPLE_LINES])[:SAMPLE_CHARS]
        more = f"\n(... {len(lines)} lines in all)" if shown != files[path] else ""
        samples.append(f"--- {path} ---\n{shown}{more}")
    contract = inspect.getdoc(ChunkStrategy) or ""
    prompt = (f"Write the strategy for `{extension}` files ({len(files)} in this workspace). Set "
              f"EXTENSIONS = (\"{extension}\",).\n\nThe contract:\n\n{contract}\n\nAllowed imports: "
              f"{', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))}.\n\nSample files:\n\n" + "\n\n".join(samples))
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}]


def _repair_prompt(problems: list[str]) -> str:
    shown = "\n".join(f"- {p}" for p in problems[:PROBLEMS_SHOWN])
    more = f"\n(and {len(problems) - PROBLEMS_SHOWN} more)" if len(problems) > PROBLEMS_SHOWN else ""
    return (f"The strategy failed the check:\n{shown}{more}\n\nFix it and reply with the whole corrected module "
            "in one ```python block.")


_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def extract_module(reply: str) -> str:
    """The code of a reply: its first fenced block, else the whole reply."""
    found = _FENCE.search(reply)
    return (found.group(1) if found else reply).strip() + "\n"


def check_strategy(source: str, extension: str, files: dict[str, str], name: str = "forged") -> list[str]:
    """Every reason to refuse this module for these files ([] accepts it): its imports and names first, before
    any of it runs; then the module loads and claims the extension; then each file's chunks are a partition.
    Its code runs only in the strategy worker process (`strategy_process`), as a trusted strategy's does."""
    problems = static_problems(source)
    if problems:
        return problems
    origin, sha256 = f"{name}.py", file_digest(source.encode("utf-8"))
    try:
        claimed = loaded_extensions(source, sha256, origin)
    except StrategyError as exc:
        return [f"the module does not load: {exc}"]
    if extension not in claimed:
        return [f"EXTENSIONS is {claimed!r}; it must include {extension!r}"]
    strategy = Strategy(name, claimed, source, sha256, origin=origin)
    for path, text in files.items():
        try:
            apply_strategy(strategy, text, split_lines(text))
        except StrategyError as exc:
            problems.append(f"{path}: {exc}")
    return problems


def _strategy_folder(root: Path) -> Path:
    """`.codeloupe/strategies` inside the workspace, refusing links (a clone could point them anywhere)."""
    folder = root
    for part in PurePosixPath(STRATEGY_DIR).parts:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise ForgeError(f"{folder} is a link or not a folder: refusing to write a strategy through it")
    return folder


def _write(folder: Path, extension: str, source: str, model: str, files: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^a-z0-9_]", "_", extension.lstrip(".").lower()) or "ext"
    path = folder / f"{name}.py"
    header = (f"# A codeloupe chunk strategy for {extension} files, forged by {model!r}: it chunked all {files} "
              "files as a line partition.\n# Loaded only while its sha256 matches what you trusted "
              "(`codeloupe trust --strategy FILE` after an edit).\n")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags, 0o644), "w", encoding="utf-8") as fh:
        fh.write(header + source)
    return path
