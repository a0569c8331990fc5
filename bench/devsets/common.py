"""What every development-set builder shares: the packages, the dev/test split, source-file selection and output.

A set is written in the golden-set format (``public.json``) so ``codeloupe eval SET.json --corpora TREES`` runs
it; each corpus carries the package's registry pin plus ``tree``, a sentence saying how the indexed tree
differs from the published package (the builders index modified copies).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
from codeloupe.discover import decode_source, walk  # noqa: E402
from codeloupe.settings import load_settings  # noqa: E402
from packages import DEFAULT_DIR, Package, load_packages, repo_path  # noqa: E402

DEVSETS_DIR = Path("/work/corpora/devsets")
DEV_SHARE = 7  # of 10: a repository whose name hashes below this is dev, the rest test

# A gold file is implementation: tests, examples, benchmarks, fixtures, declarations and vendored code are not.
_NOT_IMPLEMENTATION_DIRS = {"test", "tests", "testing", "spec", "specs", "__tests__", "testdata", "fixtures",
                            "example", "examples", "benches", "bench", "benchmark", "benchmarks", "doc", "docs",
                            "vendor", "third_party", "node_modules"}
_NOT_IMPLEMENTATION_NAME = re.compile(
    r"(^test_.*\.py$|_test\.(py|go)$|\.(test|spec)\.[jt]sx?$|_spec\.rb$|^conftest\.py$|\.d\.[cm]?ts$|"
    r"^setup\.py$)")


def split_of(package: Package) -> str:
    """'dev' or 'test', fixed by the repository's name alone (every set splits a repository the same way)."""
    digest = int(hashlib.sha256(package.name.lower().encode()).hexdigest(), 16)
    return "dev" if digest % 10 < DEV_SHARE else "test"


def is_implementation(rel_path: str) -> bool:
    parts = rel_path.lower().split("/")
    # `_examples/` as `examples/`: Go's tools skip a folder whose name starts with `_`, the example programs' place
    folders = set(parts[:-1]) | {part.lstrip("_") for part in parts[:-1]}
    return not (folders & _NOT_IMPLEMENTATION_DIRS) and not _NOT_IMPLEMENTATION_NAME.search(parts[-1])


def query_packages(pkgs_dir: Path = DEFAULT_DIR) -> list[Package]:
    """The fetched packages the query sets may use (not the robustness-only ones)."""
    return [p for p in load_packages() if p.queries and repo_path(p, pkgs_dir).is_dir()]


def source_files(repo: Path, undecodable: list[str] | None = None) -> Iterator[tuple[str, str]]:
    """(relative path, text) of every file the index would read, in path order.

    A file whose decoding raises (today's discovery does for odd-length UTF-16 files) is left out and its path
    appended to `undecodable`: the builders drop it from the indexed copy so the set runs on engines with and
    without the fix.
    """
    settings = load_settings(repo)
    for candidate in walk(repo, settings).candidates:
        try:
            result = decode_source(candidate.abs_path.read_bytes(), settings)
        except UnicodeError:
            if undecodable is not None:
                undecodable.append(candidate.rel_path)
            continue
        if result.text is not None:
            yield candidate.rel_path, result.text


_WORD = re.compile(r"[a-z0-9]+")


def normalise(text: str) -> str:
    """Lower-case words separated by single spaces: the form giveaway checks compare."""
    return " ".join(_WORD.findall(text.lower()))


SHINGLE_WORDS = 8


def still_findable(files: dict[str, str], stripped: dict[str, str]) -> Callable[[str], bool]:
    """A test for the stripped tree (`files` with `stripped` rewritten): does a query's text, or its first
    SHINGLE_WORDS words, still occur in it? Then the answer is a string match (or ambiguous): no query."""
    haystack = "\n".join(normalise(stripped.get(path, text)) for path, text in files.items())

    def findable(query: str) -> bool:
        words = normalise(query)
        return words in haystack or " ".join(words.split()[:SHINGLE_WORDS]) in haystack

    return findable


def copy_tree(repo: Path, into: Path, replaced: dict[str, str], removed: list[str] = ()) -> None:
    """A copy of `repo` at `into` with the files in `replaced` (relative path -> text) rewritten and the files
    in `removed` left out."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(repo.resolve(), into, symlinks=True)
    for rel_path, text in replaced.items():
        (into / rel_path).write_text(text, encoding="utf-8")
    for rel_path in removed:
        (into / rel_path).unlink()


def tree_note(note: str, removed: list[str]) -> str:
    return f"{note}; {len(removed)} undecodable file(s) removed" if removed else note


@dataclass
class CorpusOut:
    package: Package
    tree: str  # how the indexed tree differs from the published package
    queries: list[dict] = field(default_factory=list)

    def as_json(self) -> dict:
        p = self.package
        return {"id": p.id, "registry": p.registry, "name": p.name, "version": p.version, "root": p.root,
                "sha256": p.sha256, "language": p.language, "tree": self.tree, "queries": self.queries}


def write_sets(name: str, corpora: list[CorpusOut], out_dir: Path = DEVSETS_DIR) -> dict[str, Path]:
    """Write NAME.dev.json and NAME.test.json (corpora without queries are left out); return their paths."""
    paths = {}
    for split in ("dev", "test"):
        chosen = [c.as_json() for c in corpora if c.queries and split_of(c.package) == split]
        path = out_dir / f"{name}.{split}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"corpora": chosen}, indent=1) + "\n", encoding="utf-8")
        paths[split] = path
    return paths


BuildFn = Callable[[Package, Path, Path, int], CorpusOut]  # (package, pkgs dir, trees dir, per package)


def run_builder(name: str, build: BuildFn, description: str, per_package: int,
                argv: list[str] | None = None) -> int:
    """The command line every per-package builder shares: build each package's corpus, write NAME.dev/test."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--pkgs", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--out", type=Path, default=DEVSETS_DIR)
    parser.add_argument("--per-package", type=int, default=per_package, help="at most this many of each kind")
    parser.add_argument("ids", nargs="*", help="only these package ids")
    args = parser.parse_args(argv)
    trees = args.out / "trees" / name
    corpora = []
    for package in query_packages(args.pkgs):
        if args.ids and package.id not in args.ids:
            continue
        try:
            corpus = build(package, args.pkgs, trees, args.per_package)
        except Exception as exc:  # today's discovery aborts on some trees (e.g. an invalid .gitignore line)
            print(f"{package.id:32s} left out: discovery failed ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        corpora.append(corpus)
        kinds = Counter(q["kind"] for q in corpus.queries)
        print(f"{package.id:32s} {split_of(package):4s} {package.language:10s} {dict(kinds)}", file=sys.stderr,
              flush=True)
    for split, path in write_sets(name, corpora, args.out).items():
        kept = [c for c in corpora if c.queries and split_of(c.package) == split]
        kinds = Counter(q["kind"] for c in kept for q in c.queries)
        print(f"{split}: {dict(kinds)} over {len(kept)} packages "
              f"({', '.join(sorted({c.package.language for c in kept}))}) -> {path}")
    return 0
