"""Bug-fix commit message -> fixed files, each searched in the tree at the fix's parent commit (kind ``issue``).

    python bench/devsets/commit_pairs.py [--mirror /work/.mirror] [--out /work/corpora/devsets] [--per-repo 15]

Input: git snapshots (with history) of the public repositories in `REPOS` -- none of them in SWE-bench Lite nor
a public golden corpus -- at MIRROR/<owner>+<name>/repo (the session tool ``fetch github:OWNER/NAME`` puts
them there; any full clone works). From each repository's non-merge, single-parent commits it keeps those:
- whose subject reads as a bug fix (`_FIX`) and not as chores (`_CHORE`: docs, tests, CI, releases, typos, ...);
- that modify 1-3 implementation files of the repository's language (tests, examples, docs, fixtures and
  declarations do not count; a commit that adds or deletes such a file is dropped: it did not exist at the
  parent, or no longer answers there);
- whose cleaned message still has at least `MIN_WORDS` words.
The query is subject + body, cleaned: trailers (Signed-off-by, Co-authored-by, ...), issue/PR numbers and URLs
removed; then the GIVEAWAYS are removed -- every changed file's path and basename, and every name defined in
the fixed files (at the parent) when the message writes it as code (in backticks, called with parentheses,
dotted, snake_case or camelCase). A real report names the API the user called; a commit message names the
function the author changed, which would turn the task into a symbol lookup. Plain words stay.
The gold is the modified implementation files; the tree is a checkout of the parent commit at
OUT/trees/commits/<id>/repo. At most --per-repo commits per repository (a deterministic sample).
Writes commits.dev.jsonl / commits.test.jsonl (the SWE-bench-style format `codeloupe eval` reads: one
{id, query, gold_files, repo} per line, plus kind, language, source repository, commit and parent).
The split is by repository, hashed with the same name as its registry package in the other sets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from common import DEVSETS_DIR, is_implementation, split_of

from codeloupe.chunk import chunk_file, detect_language
from packages import load_packages

SET_NAME = "commits"
MIN_WORDS = 6
MAX_GOLD = 3
# (repository, the package id it publishes in packages.json -- its split -- , language)
REPOS = (
    ("python-attrs/attrs", "py-attrs", "python"), ("pypa/packaging", "py-packaging", "python"),
    ("more-itertools/more-itertools", "py-more-itertools", "python"), ("tqdm/tqdm", "py-tqdm", "python"),
    ("marshmallow-code/marshmallow", "py-marshmallow", "python"), ("andialbrecht/sqlparse", "py-sqlparse", "python"),
    ("arrow-py/arrow", "py-arrow", "python"), ("pallets/jinja", "py-jinja2", "python"),
    ("yargs/yargs", "npm-yargs", "javascript"), ("tj/commander.js", "npm-commander", "javascript"),
    ("npm/node-semver", "npm-semver", "javascript"), ("koajs/koa", "npm-koa", "javascript"),
    ("markedjs/marked", "npm-marked", "javascript"), ("handlebars-lang/handlebars.js", "npm-handlebars", "javascript"),
    ("rust-lang/regex", "rs-regex", "rust"), ("dtolnay/anyhow", "rs-anyhow", "rust"),
    ("serde-rs/json", "rs-serde-json", "rust"), ("rust-itertools/itertools", "rs-itertools", "rust"),
    ("indexmap-rs/indexmap", "rs-indexmap", "rust"),
    ("spf13/cobra", "go-spf13-cobra", "go"), ("spf13/pflag", "go-spf13-pflag", "go"),
    ("sirupsen/logrus", "go-sirupsen-logrus", "go"), ("BurntSushi/toml", "go-burntsushi-toml", "go"),
    ("go-yaml/yaml", "go-yaml-v3", "go"), ("urfave/cli", "go-urfave-cli", "go"),
    ("Seldaek/monolog", "php-monolog", "php"), ("twigphp/Twig", "php-twig", "php"),
    ("thephpleague/commonmark", "php-league-commonmark", "php"), ("briannesbitt/Carbon", "php-nesbot-carbon", "php"),
    ("composer/semver", "php-composer-semver", "php"),
    ("rack/rack", "rb-rack", "ruby"), ("rails/thor", "rb-thor", "ruby"), ("ruby-i18n/i18n", "rb-i18n", "ruby"),
    ("sporkmonger/addressable", "rb-addressable", "ruby"), ("gettalong/kramdown", "rb-kramdown", "ruby"),
    ("Shopify/liquid", "rb-liquid", "ruby"), ("lostisland/faraday", "rb-faraday", "ruby"),
)
_SUFFIXES = {"python": (".py",), "javascript": (".js", ".mjs", ".cjs", ".ts", ".tsx"), "rust": (".rs",),
             "go": (".go",), "php": (".php",), "ruby": (".rb",)}
_FIX = re.compile(r"\b(fix(es|ed|ing)?|bug(fix)?|crash(es|ed)?|regression|incorrect(ly)?|wrong|broken|"
                  r"mistaken(ly)?|erroneous(ly)?|panic(s|ked)?|exception)\b", re.IGNORECASE)
_CHORE = re.compile(r"(typo|\bdocs?\b|documentation|readme|changelog|\bci\b|lint|\bstyle\b|format|\bbump|"
                    r"release|\bversion\b|\bmerge\b|revert|\btests?\b|\bspec(s)?\b|spelling|grammar|dependenc|"
                    r"\bdeps\b|workflow|\bbuild\b|travis|appveyor|coverage|benchmark|example|clippy|warning|"
                    r"deprecat|comment)", re.IGNORECASE)
_TRAILER = re.compile(r"^\s*(?:[\w-]+-by:|(?:Closes|Fixes|Fix|Resolves|Refs?|See)\s*:?\s*(?:#\d+|https?://|"
                      r"[\w.-]+/[\w.-]+#\d+)|\(cherry picked|\[ci skip\]|Change-Id:).*$",
                      re.IGNORECASE | re.MULTILINE)
_REFS = re.compile(r"(https?://\S+|\(?#\d+\)?|\bgh-\d+\b|\b[0-9a-f]{10,40}\b)")
_CODEISH = r"(?:`[^`]*`|\b[\w.]+\(\)?|\b\w+(?:\.\w+)+\b|\b[a-z]+_\w+\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b)"


@dataclass
class Fix:
    repo: str
    package_id: str
    language: str
    commit: str
    parent: str
    message: str
    gold: list[str]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          errors="replace").stdout


def _fixes(git_dir: Path, repo: str, package_id: str, language: str) -> list[Fix]:
    log = _git(git_dir, "log", "--no-merges", "--no-renames", "--format=%x1e%H%x1f%P%x1f%B%x1f", "--name-status")
    found = []
    for record in log.split("\x1e")[1:]:
        try:
            commit, parents, message, files = record.split("\x1f")
        except ValueError:
            continue
        subject = message.strip().split("\n", 1)[0]
        if len(parents.split()) != 1 or not _FIX.search(subject) or _CHORE.search(subject):
            continue
        changes = [line.split("\t") for line in files.strip().splitlines() if "\t" in line]
        source = [(status, path) for status, path, *_ in changes
                  if path.endswith(_SUFFIXES[language]) and is_implementation(path)]
        if not source or len(source) > MAX_GOLD or any(status != "M" for status, _ in source):
            continue
        found.append(Fix(repo, package_id, language, commit, parents.strip(), message, [p for _, p in source]))
    return found


def _defined_names(git_dir: Path, parent: str, paths: list[str]) -> set[str]:
    names: set[str] = set()
    for path in paths:
        text = _git(git_dir, "show", f"{parent}:{path}")
        for symbol in chunk_file(path, text, detect_language(path, text[:256])).symbols:
            names.add(symbol.name)
    return {n for n in names if len(n) >= 3}


def clean_message(message: str, gold: list[str], defined: set[str]) -> str:
    text = _TRAILER.sub("", message)
    text = _REFS.sub("", text)
    for path in gold:
        for name in sorted({path, path.rsplit("/", 1)[-1]}, key=len, reverse=True):
            text = text.replace(name, "")

    def strip_code(match: re.Match) -> str:
        token = match.group(0)
        words = set(re.findall(r"\w+", token))
        return "" if words & defined else token

    text = re.sub(_CODEISH, strip_code, text)
    text = re.sub(r"``|\(\s*\)|\[\s*\]", "", text)
    return re.sub(r"[ \t]+", " ", re.sub(r"\n\s*\n+", "\n", text)).strip()


def _checkout(git_dir: Path, commit: str, into: Path) -> None:
    """The whole tree of `commit` at `into`, as a developer's clone has it. Not `git archive`: that leaves out
    every path `.gitattributes` marks `export-ignore` (PHP packages mark their tests so; twig its `extra/`
    bundles, where some fixes' gold files live). The checkout's index stays at `.git/index`, as in a clone:
    discovery reads it to know which files are tracked (a `.gitignore` pattern does not hide those)."""
    shutil.rmtree(into, ignore_errors=True)
    (into / ".git").mkdir(parents=True)
    env = {**os.environ, "GIT_INDEX_FILE": str(into / ".git" / "index")}
    for args in (["read-tree", commit], ["checkout-index", "--all", "--force"]):
        subprocess.run(["git", f"--git-dir={git_dir}", f"--work-tree={into}", *args], env=env,
                       capture_output=True, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--out", type=Path, default=DEVSETS_DIR)
    parser.add_argument("--per-repo", type=int, default=15)
    args = parser.parse_args(argv)
    packages = {p.id: p for p in load_packages()}
    trees = args.out / "trees" / SET_NAME
    rows: dict[str, list[dict]] = {"dev": [], "test": []}
    for repo, package_id, language in REPOS:
        git_dir = args.mirror / repo.replace("/", "+") / "repo"
        if not git_dir.is_dir():
            print(f"{repo}: no snapshot at {git_dir} (fetch github:{repo})", file=sys.stderr)
            continue
        fixes = sorted(_fixes(git_dir, repo, package_id, language),
                       key=lambda f: hashlib.sha1(f.commit.encode()).hexdigest())
        kept = 0
        for fix in fixes:
            if kept >= args.per_repo:
                break
            try:
                query = clean_message(fix.message, fix.gold, _defined_names(git_dir, fix.parent, fix.gold))
            except subprocess.CalledProcessError:
                continue
            if len(re.findall(r"[A-Za-z]{2,}", query)) < MIN_WORDS:
                continue
            instance = f"{package_id}-fix-{fix.commit[:10]}"
            try:
                _checkout(git_dir, fix.parent, trees / instance / "repo")
            except subprocess.CalledProcessError:  # a snapshot may lack its largest blobs
                shutil.rmtree(trees / instance, ignore_errors=True)
                continue
            kept += 1
            split = split_of(packages[package_id])
            rows[split].append({"id": instance, "kind": "issue", "query": query, "gold_files": fix.gold,
                                "repo": str(trees / instance / "repo"), "language": language,
                                "source": f"github:{repo}", "commit": fix.commit, "parent": fix.parent})
        print(f"{repo:34s} {split_of(packages[package_id]):4s} {language:10s} {kept:3d} of {len(fixes)} fixes",
              file=sys.stderr, flush=True)
    for split, lines in rows.items():
        path = args.out / f"{SET_NAME}.{split}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in lines), encoding="utf-8")
        print(f"{split}: {len(lines)} instances over {len({r['source'] for r in lines})} repositories -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
