"""Walk a workspace and decide, for every file, whether it is indexed, and if not, why.

Ignore rules, in the order git applies them: built-in skips (VCS dirs, dependency dirs, virtualenvs, caches; a
`build`, `out`, `target`, `env` or `coverage` dir only where git tracks nothing in it and its listing shows build
output), `.git/info/exclude` and every `.gitignore` from the top of the git repository the root is in (if any)
down (a deeper file overrides a shallower one, `!negation` re-includes; like git, they pass over the files a
repository's index tracks), then `.codeloupeignore` files and the `ignore` setting, which use the same syntax
and hold for tracked files too. Content rules run when a file is read: size cap, NUL byte in the first 8 KB
(binary), very long lines (minified bundles), generated-file markers, lockfiles, and text that is not UTF-8
and no known fallback decodes cleanly.
"""

from __future__ import annotations

import codecs
import fnmatch
import json
import logging
import os
import posixpath
import re
import stat
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from codeloupe.chunk.languages import detect_language
from codeloupe.git_config import user_excludes_file
from codeloupe.git_index import tracked_paths
from codeloupe.regular_file import read_head
from codeloupe.settings import Settings
from codeloupe.source_maps import SOURCE_MAP_SUFFIX

log = logging.getLogger("codeloupe.discover")

# Directories skipped by name at any depth, even where git tracks files in them: what is in them is not the
# project's own source, or is a copy of it. VCS internals; third-party code, vendored or installed (a tracked
# `vendor/`, Python's `_vendor/` (pip's, bleach's) or `Pods/` is someone else's code, checked in to pin it); bundles built from the sources (a tracked
# `dist/` is a release's build, committed for CDNs); virtualenvs and tool environments (a tracked `venv/` is a
# mistake, not a source); caches and tools' state; editors' settings; coverage reports in HTML.
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", "_darcs", ".jj",
    "node_modules", "bower_components", "vendor", "_vendor", "site-packages", "Pods", ".eggs", ".terraform",
    "dist", ".next", ".nuxt", ".svelte-kit", "DerivedData", ".serverless",
    ".venv", "venv", ".env", ".tox", ".nox", "virtualenv", ".virtualenv", ".vscode-test",
    "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".cache", ".parcel-cache",
    ".turbo", ".gradle", ".idea", ".coverage", "htmlcov",
})
# Directory names that are build output as often as sources: Mako, SQLAlchemy and alembic keep their documentation
# in `doc/build/`, JavaScript projects their webpack and rollup scripts in `build/`, axios its environment code in
# `lib/env/`, coverage.py its package in `coverage/`. Such a directory is skipped only when git tracks nothing in it
# and its own listing shows what made it: an entry matching one of its name's patterns (shell globs, matched case
# sensitively against the names directly in it). Wherever git tracks a file in it, it is the project's.
_PYTHON_BUILD = ("lib", "lib.*", "bdist.*", "temp.*", "scripts-*")  # setuptools' build/
# CMake, Ninja, Meson and autotools configured out of the source tree.
_NATIVE_BUILD = ("CMakeCache.txt", "CMakeFiles", "cmake_install.cmake", "build.ninja", ".ninja_log", ".ninja_deps",
                 "meson-private", "meson-info", "config.status")
_GRADLE_BUILD = ("classes", "tmp", "intermediates", "outputs", "test-results")  # Gradle's and Android's build/
_MAVEN_TARGET = ("classes", "test-classes", "maven-status", "maven-archiver", "surefire-reports", "generated-sources")
# JavaScript bundlers' and compilers' output: one folder per module format (luxon's build/amd, build/cjs-browser,
# ...), source maps, tsc's build info, create-react-app's manifest, Next.js' static export.
_JS_BUILD = ("cjs", "cjs-*", "esm", "umd", "amd", "*.js.map", "*.tsbuildinfo", "asset-manifest.json", "_next")
_SPHINX_BUILD = ("html", "dirhtml", "singlehtml", "doctrees", "latex")
# A cache directory tag (https://bford.info/cachedir/) marks any tool's output; cargo writes one in target/.
_TAGGED = ("CACHEDIR.TAG",)
BUILD_OUTPUT_MARKERS: Mapping[str, tuple[str, ...]] = {
    "build": (*_TAGGED, *_PYTHON_BUILD, *_NATIVE_BUILD, *_GRADLE_BUILD, *_JS_BUILD, *_SPHINX_BUILD),
    "out": (*_TAGGED, *_NATIVE_BUILD, *_JS_BUILD, *_SPHINX_BUILD, "production"),  # IntelliJ's out/production
    "target": (*_TAGGED, ".rustc_info.json", *_MAVEN_TARGET, "streams", "scala-*"),  # cargo, Maven, sbt
    "env": ("pyvenv.cfg", "conda-meta", "pip-selfcheck.json"),  # a virtualenv (venv, virtualenv, conda)
    "coverage": ("lcov.info", "lcov-report", "coverage-final.json", "coverage-summary.json", "clover.xml",
                 "cobertura-coverage.xml"),  # istanbul / nyc / jest reports
}
_BUILD_OUTPUT_PATTERNS = {name: re.compile("|".join(fnmatch.translate(glob) for glob in globs))
                          for name, globs in BUILD_OUTPUT_MARKERS.items()}
SKIP_DIR_SUFFIXES = (".egg-info", ".dist-info")

LOCKFILES = frozenset({
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb", "bun.lock",
    "Cargo.lock", "Gemfile.lock", "poetry.lock", "Pipfile.lock", "composer.lock", "go.sum", "uv.lock",
    "pdm.lock", "mix.lock", "flake.lock", "Podfile.lock", "packages.lock.json", "gradle.lockfile",
})
# Extensions that are never source text, skipped without opening the file.
BINARY_SUFFIXES = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tiff", ".psd", ".pdf", ".zip", ".gz", ".tgz",
    ".bz2", ".xz", ".7z", ".rar", ".tar", ".jar", ".war", ".whl", ".egg", ".so", ".dll", ".dylib", ".exe",
    ".o", ".a", ".lib", ".class", ".pyc", ".pyo", ".wasm", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".mp3",
    ".mp4", ".wav", ".ogg", ".flac", ".mov", ".avi", ".mkv", ".sqlite", ".db", ".onnx", ".bin", ".pt", ".npy",
    ".npz", ".pkl", ".parquet", ".deb", ".rpm", ".dmg", ".iso", ".map",
})
MINIFIED_SUFFIXES = (".min.js", ".min.css", ".min.mjs", ".bundle.js")
# What a generated file's preamble (the comments and the docstring before its first line of code, in its first
# `_PREAMBLE_CHARS` characters, lower-cased) says of it: "@generated", "do not edit" or "code generated by" (Go's marker may stand
# anywhere before the package clause, which is code), a sentence saying by what or from what the file was
# generated, or a line opening with "autogenerated". A phrase that only describes what the code does is not one:
# clap's hand-written `/// auto-generated help writer` (1,065 lines) and a test's docstring "Autogenerated hooks
# should not take priority" were dropped whole while any "auto-generated" was; nor is what a script says after its
# first line of code, such as a generator's template of its output's header (pygments'
# scripts/get_css_properties.py) or a constant saying "do not edit by hand" of the file it writes (our own
# scripts/http_docs.py was dropped while the markers counted anywhere in the head).
# C#'s source generators write only `// <auto-generated/>`.
GENERATED_MARKER = re.compile(r"@generated|do not (?:edit|modify)|code generated by|<auto-generated")
GENERATED_PHRASE = re.compile(
    r"(?:(?:this|the) (?:file|module|code) (?:is|was|has been) (?:auto-?|automatically |machine[- ])?generated"
    r"|auto-?generated|automatically generated|machine[- ]generated|generated automatically)"
    r" (?:by|from|with|using|for|on)\b"
    r"|^[\s#/*;%!-]*(?:auto-?generated|automatically generated|machine[- ]generated)\b", re.MULTILINE)
_COMMENT_STARTS = ("#", "//", "--", ";", "%", "*", "{#", "{{!", "<?php", "<?xml", "<!doctype", "@charset", "@file:")
_BLOCKS = (('"""', '"""'), ("'''", "'''"), ('r"""', '"""'), ("r'''", "'''"), ("/*", "*/"),
           ("<!--", "-->"), ("(*", "*)"), ("{-", "-}"), ("<#", "#>"), ("=begin", "=end"))
# How far into a file its preamble is read: a licence header can run past a thousand characters before the marker
# (a Go file's build tags and Apache licence, then `// Code generated by deepcopy-gen`); the preamble still ends
# at the first line of code.
_PREAMBLE_CHARS = 4096
# A document (Markdown, reStructuredText, AsciiDoc) is generated only when its own leading comment says so: in its
# text `#` opens a heading and `*` a bullet, not a comment, and "do not edit" is mostly said of another file
# (axios' lib/env/README.md, "Please do not edit it manually" of data.js, was never indexed). Its comments: HTML
# comments (Markdown), `..` lines with their indented body (reST), `//` lines and `////` blocks (AsciiDoc).
_DOCUMENT_LANGUAGES = frozenset({"markdown", "rst", "asciidoc"})
_DOCUMENT_BLOCKS = (("<!--", "-->"), ("////", "////"))
_RST_COMMENT = re.compile(r"\.\.(?:\s|$)(?!.*::)")
# Manifests are never skipped as generated: crates.io rewrites every published Cargo.toml under "THIS FILE IS
# AUTOMATICALLY GENERATED BY CARGO", and it still defines the package (lower-case names).
MANIFEST_NAMES = frozenset({
    "package.json", "setup.py", "setup.cfg", "composer.json", "pom.xml", "build.gradle", "build.gradle.kts",
    "gemfile", "makefile", "tsconfig.json", "deno.json", "cargo.toml", "pyproject.toml", "go.mod",
})
GITIGNORE = ".gitignore"
IGNORE_FILE_NAMES = (GITIGNORE, ".codeloupeignore")
# Why `IgnoreRules.verdict` ignores a path: git's rule, which files git tracks are exempt from, or the user's.
BY_GITIGNORE, BY_USER = "gitignore", "user"

SNIFF_BYTES = 8192
# Bump whenever `decode_source` would judge the same bytes differently: an index re-reads the files it remembers
# skipping under an older judgement (2: a document is generated only by its leading comment; 3: so is code; 4:
# the preamble read to 4,096 characters, Haskell, PowerShell and raw-docstring blocks, C#'s `<auto-generated`).
CONTENT_RULES_VERSION = 4
# Bounds on one ignore file: a real one is a few KB and a few hundred patterns. Each pattern is matched against
# every path below its directory (10,000 patterns took 1.4 ms a path: a minute at 40,000 files), so a workspace
# could otherwise stall its own walk for hours with a large enough file.
IGNORE_FILE_MAX_BYTES = 256 * 1024
IGNORE_PATTERNS_MAX = 2000
# How many directories above a workspace root are looked at for the git repository it lies in.
_REPOSITORY_SEARCH_DEPTH = 64


class DiscoverError(ValueError):
    """The workspace root cannot be walked (missing, not a directory, unreadable)."""


@dataclass(frozen=True)
class Candidate:
    """A file that passed the path rules; its content rules run when it is read."""

    rel_path: str  # POSIX, relative to the root
    abs_path: Path
    size: int
    mtime: float
    # The identity discovery saw: the read refuses a different file put in its place (a swapped-in link).
    device: int = 0
    inode: int = 0

    @classmethod
    def from_stat(cls, rel_path: str, abs_path: Path, st: os.stat_result) -> Candidate:
        return cls(rel_path, abs_path, st.st_size, st.st_mtime, st.st_dev, st.st_ino)


TOO_LARGE = "too large"  # the skip reason of a file over `max_file_bytes`
UNREADABLE_FOLDER = "unreadable folder"  # the skip reason of a folder the walk could not list
# A walk's `should_stop` is asked at every this many entries of the folders it lists: a few hundredths of a second
# of the walk apart at most (it takes seconds at 40K files), one call in hundreds of entries.
STOP_ASKED_EVERY = 256
# A file compiled from sources the workspace holds is a copy of them (tsc's, babel's, esbuild's or sass' output:
# query-core's 23 TypeScript modules ship 194 such files, four per module, and a question found the copies first
# and the module fifth). Such a file is known by the source map beside it (`X.map` for `X`, as every one of those
# tools names it) whose `sources` name a file the walk keeps; it is skipped like a generated file. A map's
# `sources` come before its `sourcesContent` and `mappings`, so its head holds them.
COMPILED = "compiled copy"
IGNORED = "ignored"  # a file an ignore file's rule leaves out
# A link (never followed: it escapes the workspace or duplicates files in it), a FIFO, a socket or a device.
NOT_REGULAR = "not a regular file"
SOURCE_MAP_HEAD_BYTES = 64 * 1024
# Bounds on the editor's judgement of one saved file (`path_skip_reason`), which judges each source it reaches by the
# path rules (a fraction of a millisecond each: a crafted chain of 70 maps listing 5,000 sources each took two
# minutes); the walk follows all, knowing every candidate already.
SOURCE_MAPS_FOLLOWED = 64
SOURCES_JUDGED = 1024
# The opening of a map's `sources`: only the first is read, up to the first `]` after it (one pass over the head, a
# crafted head of 5,000 unclosed `"sources":[` cost 0.6 s a map when each was tried to the end).
_MAP_SOURCES = re.compile(rb'"sources"\s*:\s*\[')
_MAP_SOURCE_ROOT = re.compile(rb'"sourceRoot"\s*:\s*("(?:[^"\\]|\\.)*")')


class IndexStopped(Exception):
    """An index run ended early by its `should_stop` (a served workspace closing): the files written so far are in
    the index whole, the rest are not, and the next run indexes them. Raised by the walk too, which then wrote
    nothing."""


@dataclass
class Walk:
    candidates: list[Candidate] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    # Each file left out by its name or size (a binary file type, a lockfile, over `max_file_bytes`, ...) or as a
    # compiled copy, by path, and why: counted by the index (the first by path named), so that `stats --skipped`
    # counts the files `index` counts. Not the files ignore rules leave out (the user's or git's choice, by the
    # thousand where a pattern such as `*.csv` meets a data folder), nor folders. A path, not a `Candidate`: an
    # asset folder's 20K images are each judged again by every walk, and nothing else of them is needed.
    skipped_files: list[tuple[str, str]] = field(default_factory=list)
    # Folders below the root that could not be listed (no permission, an I/O error), by path: nothing under them
    # is indexed, and the index remembers them so that `stats --skipped` names them.
    unreadable_dirs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ReadResult:
    text: str | None  # None when the file is skipped
    skip_reason: str = ""
    encoding: str = "utf-8"
    raw: bytes = b""


def check_root(root: Path) -> Path:
    """The resolved workspace root, or a `DiscoverError` saying why it cannot be walked."""
    try:
        st = os.stat(root)
    except FileNotFoundError:
        raise DiscoverError(f"{root}: no such directory") from None
    except OSError as exc:
        raise DiscoverError(f"{root}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise DiscoverError(f"{root}: is a file, not a directory (pass the workspace folder)")
    # Listing it is the real test: os.access answers yes to root, and ACLs or mounts can say no.
    try:
        with os.scandir(root) as entries:
            next(entries, None)
    except OSError as exc:
        raise DiscoverError(f"{root}: {exc.strerror or exc}") from None
    return Path(root).resolve()


def _load_specs(path: Path, follow_links: bool = False) -> list[pathspec.GitIgnoreSpec]:
    text = _ignore_file_text(path, follow_links)
    return [] if text is None else _specs(text.splitlines(), str(path))


def _ignore_file_text(path: Path, follow_links: bool = False) -> str | None:
    """An ignore file's text, its first `IGNORE_FILE_MAX_BYTES` at most; None when it is absent, unreadable or not
    a regular file. Like git, which reads no .gitignore through a link, a workspace's link is not followed: it
    could name /dev/zero or a FIFO, and the walk would read forever or wait for a writer (the user's own excludes
    file is followed, as git does: dotfile managers link it)."""
    try:
        data = read_head(path, IGNORE_FILE_MAX_BYTES, follow_links=follow_links)
    except OSError:
        return None
    if len(data) > IGNORE_FILE_MAX_BYTES:
        log.warning("%s: only its first %d KiB are read as ignore rules", path, IGNORE_FILE_MAX_BYTES // 1024)
        data = data[:data.rfind(b"\n", 0, IGNORE_FILE_MAX_BYTES) + 1]
    return data.decode("utf-8", errors="replace")


# A workspace's ignore patterns are matched by RE2, in time linear in the path, whatever the pattern: Python's
# `re` (pathspec's "simple" backend) took minutes for `*a*a*a*a*a*a*a*b` against one 200-character name.
PATTERN_BACKEND = "re2"
# pathspec compiles every pattern with Python's `re` as well, which prints a FutureWarning ("Possible nested set")
# for a line such as `[[:foo:]]`: a repository's ignore file must not put Python's warnings on the terminal.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"pathspec(\.|$)")


def _specs(lines: list[str], source: str = "an ignore file") -> list[pathspec.GitIgnoreSpec]:
    """The specs of an ignore file's lines, in order: the last pattern that matches decides across them (`_decide`)
    as within one."""
    patterns = [line for line in lines if line.strip() and not line.startswith("#")]
    if len(patterns) > IGNORE_PATTERNS_MAX:
        log.warning("%s: only its first %d of %d patterns are used", source, IGNORE_PATTERNS_MAX, len(patterns))
        patterns = patterns[:IGNORE_PATTERNS_MAX]
    return _compiled_in_parts(_valid_patterns(patterns))


def _valid_patterns(lines: list[str]) -> list[str]:
    """The lines that are valid patterns. git skips a line it cannot parse (a lone `!`, say), and so do we: one
    bad line in some test data's ignore file must not end the whole index. Each compiler refuses in its own way
    (pathspec's GitIgnorePatternError is a ValueError; `[z-a]` is Python's re.error and `[[:foo:]]` RE2's error,
    neither of them one), so any exception is a line refused."""
    try:
        pathspec.GitIgnoreSpec.from_lines(lines, backend=PATTERN_BACKEND)
        return lines
    except Exception:
        valid = []
        for line in lines:
            try:
                pathspec.GitIgnoreSpec.from_lines([line], backend=PATTERN_BACKEND)
            except Exception:
                log.debug("ignoring an invalid ignore pattern %r", line)
                continue
            valid.append(line)
        return valid


def _compiled_in_parts(patterns: list[str]) -> list[pathspec.GitIgnoreSpec]:
    """Valid patterns as one spec, or as consecutive parts when RE2 refuses them as one set: its memory budget
    (8 MiB) holds a few hundred 100-character patterns, and a .gitignore listing more paths ended the index with
    "failed to compile Set". Halving keeps every pattern, in order."""
    if not patterns:
        return []
    try:
        return [pathspec.GitIgnoreSpec.from_lines(patterns, backend=PATTERN_BACKEND)]
    except Exception:
        if len(patterns) == 1:  # each compiled alone in `_valid_patterns`; this only stops endless halving
            return []
        half = len(patterns) // 2
        return [*_compiled_in_parts(patterns[:half]), *_compiled_in_parts(patterns[half:])]


class IgnoreRules:
    """Stacked gitignore-style specs; a deeper directory's rules override a shallower one's."""

    def __init__(self, root: Path, extra: list[str]) -> None:
        self.root = root
        # Each directory's specs, each with whether it came from a .gitignore (whose verdict tracked files
        # are exempt from) rather than a .codeloupeignore.
        self._specs: dict[str, list[tuple[pathspec.GitIgnoreSpec, bool]]] = {}
        # As many patterns as a file's.
        self._extra = [(spec, False) for spec in _specs(extra, "the ignore setting")] if extra else []
        # A root inside a git repository (a package of a monorepo opened on its own): the ignore files of the
        # directories above it, up to the repository's top, each keyed by its path in the repository, and the
        # root's own path there.
        self._outer: list[tuple[str, list[tuple[pathspec.GitIgnoreSpec, bool]]]] = []
        self._inside = ""
        self._user: list[tuple[pathspec.GitIgnoreSpec, bool]] | None = None  # read at the first repository

    def enter_outer(self, repository: Path, inside: str) -> None:
        """Apply the ignore files of the directories from `repository` (a git work tree) down to the root, which
        is at `inside` in it, as git does. Not when they ignore the root itself or a directory on the way: git
        would show nothing there, and whoever opened it (a dependency unpacked in an ignored folder) meant to."""
        parts = inside.split("/")
        outer = []
        for depth in range(len(parts)):
            rel_dir = "/".join(parts[:depth])
            specs = _directory_specs(repository.joinpath(*parts[:depth]))
            if depth == 0:
                specs[:0] = self._repository_specs(repository / ".git")
            if specs:
                outer.append((rel_dir, specs))
        self._outer, self._inside = outer, inside
        if any(self._outer_verdict("/".join(parts[:depth]), is_dir=True) for depth in range(1, len(parts) + 1)):
            self._outer, self._inside = [], ""

    def _outer_verdict(self, repo_path: str, is_dir: bool) -> str:
        verdict = ""
        for rel_dir, specs in self._outer:
            if rel_dir and not repo_path.startswith(rel_dir + "/"):
                continue
            sub = (repo_path[len(rel_dir) + 1:] if rel_dir else repo_path) + ("/" if is_dir else "")
            verdict = _decide(verdict, specs, sub)
        return verdict

    def enter(self, rel_dir: str, abs_dir: Path) -> None:
        specs = _directory_specs(abs_dir)
        if specs:
            self._specs[rel_dir] = specs

    def enter_exclude(self, rel_dir: str, git_dir: Path) -> None:
        """The repository at `rel_dir` has its git directory at `git_dir`: the user's excludes file and its
        `info/exclude` (the patterns one clone ignores, never committed) hold there, in that order, below that
        directory's own ignore files."""
        specs = self._repository_specs(git_dir)
        if specs:
            self._specs[rel_dir] = [*specs, *self._specs.get(rel_dir, [])]

    def _repository_specs(self, git_dir: Path) -> list[tuple[pathspec.GitIgnoreSpec, bool]]:
        """The rules every path of a repository meets before its ignore files': the user's excludes file
        (`core.excludesFile`, read once), then the clone's `info/exclude`. Both count as git's."""
        if self._user is None:
            path = user_excludes_file()
            self._user = [(spec, True) for spec in _load_specs(path, follow_links=True)] if path is not None else []
        return [*self._user, *((spec, True) for spec in _load_specs(git_dir / "info" / "exclude"))]

    def enter_texts(self, rel_dir: str, texts: Mapping[str, str]) -> None:
        """`enter` for a tree that is not on disk: the texts of the directory's ignore files, by file name."""
        specs = [(spec, name == GITIGNORE) for name, text in texts.items() for spec in _specs(text.splitlines())]
        if specs:
            self._specs[rel_dir] = specs

    def verdict(self, rel_path: str, is_dir: bool) -> str:
        """Why the path is ignored: "" (it is not), `BY_GITIGNORE` (the deciding rule is a .gitignore's) or
        `BY_USER` (a .codeloupeignore's or the `ignore` setting's)."""
        verdict = self._outer_verdict(f"{self._inside}/{rel_path}", is_dir) if self._outer else ""
        parts = rel_path.split("/")
        for depth in range(len(parts)):
            base = "/".join(parts[:depth])
            specs = self._specs.get(base)
            if not specs:
                continue
            verdict = _decide(verdict, specs, "/".join(parts[depth:]) + ("/" if is_dir else ""))
        if self._extra:
            verdict = _decide(verdict, self._extra, rel_path + ("/" if is_dir else ""))
        return verdict


def _directory_specs(abs_dir: Path) -> list[tuple[pathspec.GitIgnoreSpec, bool]]:
    """A directory's ignore files as specs, each with whether it is its .gitignore."""
    return [(spec, name == GITIGNORE) for name in IGNORE_FILE_NAMES for spec in _load_specs(abs_dir / name)]


def _decide(verdict: str, specs: list[tuple[pathspec.GitIgnoreSpec, bool]], sub: str) -> str:
    """`verdict` after `specs` (each with whether it came from a .gitignore) speak of the path `sub`: the last
    pattern that matches decides, as in git."""
    for spec, from_git in specs:
        result = spec.check_file(sub)
        if result.include is not None:
            verdict = (BY_GITIGNORE if from_git else BY_USER) if result.include else ""
    return verdict


class TrackedFiles:
    """The files that the git repositories in a work tree track, read from their index files the first time a
    .gitignore rule ignores something (most walks never need them)."""

    def __init__(self) -> None:
        self._pending: list[tuple[str, Path, str]] = []
        self._files: set[str] = set()
        self._dirs: set[str] = set()

    def add_repository(self, rel_dir: str, abs_dir: Path, within: str = "") -> None:
        """`abs_dir` (at `rel_dir` in the work tree) holds a `.git`; or, with `within`, `abs_dir` is a repository
        above the work tree, whose root is at `within` in it."""
        self._pending.append((rel_dir, abs_dir, within))

    def holds_file(self, rel_path: str) -> bool:
        self._load()
        return rel_path in self._files

    def holds_dir(self, rel_dir: str) -> bool:
        self._load()
        return rel_dir in self._dirs

    def _load(self) -> None:
        while self._pending:
            rel_dir, abs_dir, within = self._pending.pop()
            for path in tracked_paths(abs_dir):
                if within:
                    if not path.startswith(within + "/"):
                        continue
                    path = path[len(within) + 1:]
                full = f"{rel_dir}/{path}" if rel_dir else path
                self._files.add(full)
                cut = full.rfind("/")
                while cut > 0 and full[:cut] not in self._dirs:
                    self._dirs.add(full[:cut])
                    cut = full.rfind("/", 0, cut)


def walk(root: Path, settings: Settings, should_stop: Callable[[], bool] | None = None) -> Walk:
    """Every file under `root` that passes the path rules, sorted by path; skips counted by reason. `should_stop`
    (a served workspace closing) is asked as the folders are listed, every `STOP_ASKED_EVERY` entries: once it is
    true, `IndexStopped` is raised (a walk cut short must not be taken for the tree)."""
    root = check_root(Path(root))
    rules, tracked = _root_rules(root, settings)
    out = Walk()
    maps: set[str] = set()  # every source map seen (each is skipped by its suffix), for `_drop_compiled_copies`
    stack: list[tuple[str, Path]] = [("", root)]
    looked_at = 0
    while stack:
        rel_dir, abs_dir = stack.pop()
        rules.enter(rel_dir, abs_dir)
        try:
            entries = list(os.scandir(abs_dir))
        except OSError:
            out.skipped[UNREADABLE_FOLDER] += 1
            out.unreadable_dirs.append(rel_dir or ".")
            continue
        if any(entry.name == ".git" for entry in entries):
            tracked.add_repository(rel_dir, abs_dir)
            rules.enter_exclude(rel_dir, abs_dir / ".git")
        for entry in entries:
            looked_at += 1
            if should_stop is not None and looked_at % STOP_ASKED_EVERY == 0 and should_stop():
                raise IndexStopped(f"indexing stopped while listing the files ({looked_at:,} entries looked at)")
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if not _is_utf8_name(entry.name):
                # The index, the editor and every answer speak UTF-8 paths; such a name cannot be one.
                out.skipped["name not utf-8"] += 1
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                out.skipped["unreadable"] += 1
                continue
            if stat.S_ISLNK(st.st_mode) or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                # Not read, but counted and named (unless ignored), as a save that meets one says: a folder linked
                # into the workspace was indexed as nothing, and `stats --skipped` said no file was skipped.
                verdict = rules.verdict(rel, is_dir=False)
                if verdict and not (verdict == BY_GITIGNORE and tracked.holds_file(rel)):
                    out.skipped[IGNORED] += 1
                else:
                    out.skipped[NOT_REGULAR] += 1
                    out.skipped_files.append((rel, NOT_REGULAR))
                continue
            if stat.S_ISDIR(st.st_mode):
                reason = _dir_skip_reason(entry.name, rel, rules, tracked, _listing(entry.path))
                if reason:
                    out.skipped[reason] += 1
                else:
                    stack.append((rel, Path(entry.path)))
                continue
            if entry.name.endswith(SOURCE_MAP_SUFFIX):
                maps.add(rel)
            reason = _file_skip_reason(entry.name, rel, st.st_size, rules, tracked, settings)
            if reason:
                out.skipped[reason] += 1
                if reason != IGNORED:
                    out.skipped_files.append((rel, reason))
                continue
            out.candidates.append(Candidate.from_stat(rel, Path(entry.path), st))
    _drop_compiled_copies(out, maps, _map_head_on_disk(root))
    out.candidates.sort(key=lambda c: c.rel_path)
    out.unreadable_dirs.sort()
    return out


def path_skip_reason(root: Path, rel_path: str, settings: Settings, *, compiled_copy: bool = True) -> str:
    """Why the walk would skip the file `rel_path` ("" when it is a candidate), without walking the tree.

    Only the ignore files on the way from the root to the file are read, and its source map if it has one: the
    editor's save path asks this for a file new to the index. `compiled_copy`: whether to judge it as a compiled
    copy (`COMPILED`) too.
    """
    root = Path(root)
    if not _is_utf8_name(rel_path):
        return "name not utf-8"
    parts = rel_path.split("/")
    rules, tracked = _root_rules(root.resolve(), settings)
    _enter(root, "", rules, tracked)
    for depth, name in enumerate(parts[:-1], 1):
        rel_dir = "/".join(parts[:depth])
        if os.path.islink(root / rel_dir):  # the walk follows no link, to a folder no more than to a file
            return NOT_REGULAR
        reason = _dir_skip_reason(name, rel_dir, rules, tracked, _listing(root / rel_dir))
        if reason:
            return reason
        _enter(root / rel_dir, rel_dir, rules, tracked)
    path = root / rel_path
    if path.is_symlink() or not path.is_file():
        return NOT_REGULAR
    reason = _file_skip_reason(parts[-1], rel_path, path.stat().st_size, rules, tracked, settings)
    if reason or not compiled_copy:
        return reason
    return COMPILED if _leads_to_an_original(root, rel_path, settings) else ""


def walk_names(rel_path: str, size: int, reason: str, settings: Settings) -> bool:
    """Whether the walk names the file `rel_path` of `size` bytes among those it skips (`Walk.skipped_files`) where
    `path_skip_reason` gives it `reason`: skipped by its name or size, or as a compiled copy. Not a file ignored, one
    in a folder the walk skips (the folder is counted), or one through a link (the link is named)."""
    return reason == COMPILED or (bool(reason) and _path_skip_reason(posixpath.basename(rel_path), size,
                                                                      settings) == reason)


def file_skip_reason(root: Path, rel_path: str, settings: Settings) -> str:
    """Why the index skips the file `rel_path` ("" when it indexes it): by its path (`path_skip_reason`) or, read
    without following a link, by its content (`decode_source`). Raises OSError when the file cannot be read."""
    reason = path_skip_reason(root, rel_path, settings)
    if reason:
        return reason
    raw = read_head(Path(root) / rel_path, settings.max_file_bytes, follow_links=False)
    return decode_source(raw, settings, rel_path).skip_reason


class _SourcesTooMany(Exception):
    """`_leads_to_an_original` reached `SOURCES_JUDGED`."""


def _leads_to_an_original(root: Path, rel_path: str, settings: Settings) -> bool:
    """Whether the sources of `rel_path`'s source map lead to a file the walk keeps that was compiled from nothing
    (`_drop_compiled_copies` for one file): at most `SOURCE_MAPS_FOLLOWED` maps are read and `SOURCES_JUDGED`
    distinct sources judged by the path rules, and past either the file is kept (the next walk judges it). A source
    is judged when it is reached, so a bundle's map listing thousands stops at the first original met."""
    head_of = _map_head_on_disk(root)
    judged: dict[str, bool] = {}  # a source -> whether the walk keeps it by the path rules

    def kept(rel: str) -> bool:
        if rel not in judged:
            if len(judged) == SOURCES_JUDGED:
                raise _SourcesTooMany
            judged[rel] = not path_skip_reason(root, rel, settings, compiled_copy=False)
        return judged[rel]

    def sources_of(rel: str) -> list[str]:
        head = head_of(rel + SOURCE_MAP_SUFFIX)
        return [s for s in map_sources(rel + SOURCE_MAP_SUFFIX, head) if s != rel] if head is not None else []

    seen, pending, maps_read = {rel_path}, sources_of(rel_path), 1
    try:
        while pending:
            source = pending.pop()
            if source in seen or not kept(source):
                continue
            seen.add(source)
            if maps_read == SOURCE_MAPS_FOLLOWED:
                return False
            further, maps_read = sources_of(source), maps_read + 1
            if not any(kept(s) for s in further):
                return True
            pending.extend(further)
    except _SourcesTooMany:
        pass
    return False


def _root_rules(root: Path, settings: Settings) -> tuple[IgnoreRules, TrackedFiles]:
    """The ignore rules and tracked files that hold at `root` (resolved) before any of its own ignore files: the
    `ignore` setting, and for a root inside a git repository its directories' ignore files and its index."""
    rules, tracked = IgnoreRules(root, settings.ignore), TrackedFiles()
    if os.path.lexists(root / ".git"):
        return rules, tracked
    for depth, parent in enumerate(root.parents):
        if depth >= _REPOSITORY_SEARCH_DEPTH:
            break
        if os.path.lexists(parent / ".git"):
            inside = root.relative_to(parent).as_posix()
            rules.enter_outer(parent, inside)
            tracked.add_repository("", parent, within=inside)
            break
    return rules, tracked


def _enter(abs_dir: Path, rel_dir: str, rules: IgnoreRules, tracked: TrackedFiles) -> None:
    rules.enter(rel_dir, abs_dir)
    if os.path.lexists(abs_dir / ".git"):
        tracked.add_repository(rel_dir, abs_dir)
        rules.enter_exclude(rel_dir, abs_dir / ".git")


def tree_walk(files: Mapping[str, int], read: Callable[[str], bytes | None], settings: Settings) -> Walk:
    """`walk` for a tree that is not on disk (a tarball's members): `files` maps each regular file's POSIX path
    to its size, `read(rel_path)` gives a file's bytes (None: no such file), asked for ignore files and source
    maps. The same directory, ignore-file, name and compiled-copy rules as `walk`; the candidates' `abs_path` is
    their relative path."""
    rules = IgnoreRules(Path("."), settings.ignore)
    untracked = TrackedFiles()  # a tarball holds no git index
    verdicts: dict[str, str] = {}  # directory -> why it is skipped ("" when it is walked)
    contents: dict[str, set[str]] = {}  # directory -> the names in it, filled the first time one is asked for
    out = Walk()

    def listing(rel_dir: str) -> Callable[[], set[str]]:
        def names() -> set[str]:
            if not contents:
                for rel in files:
                    folder, _, name = rel.rpartition("/")
                    while name not in contents.setdefault(folder, set()):
                        contents[folder].add(name)
                        if not folder:
                            break
                        folder, _, name = folder.rpartition("/")
            return contents.get(rel_dir, set())
        return names

    def directory(rel_dir: str) -> str:
        # Top down from the nearest folder already judged: a loop, since an archive's names may nest deeper
        # than Python's recursion limit.
        pending, folder = [], rel_dir
        while folder not in verdicts:
            pending.append(folder)
            if not folder:
                break
            folder = posixpath.dirname(folder)
        for folder in reversed(pending):
            inherited = verdicts[posixpath.dirname(folder)] if folder else ""
            reason = inherited or (_dir_skip_reason(posixpath.basename(folder), folder, rules, untracked,
                                                    listing(folder)) if folder else "")
            if not reason:
                blobs = {name: read(posixpath.join(folder, name)) for name in IGNORE_FILE_NAMES}
                rules.enter_texts(folder, {name: blob.decode("utf-8", "replace") for name, blob in blobs.items()
                                           if blob is not None})
            elif not inherited:  # counted once, where the skip starts, like `walk`
                out.skipped[reason] += 1
            verdicts[folder] = reason
        return verdicts[rel_dir]

    for rel in sorted(files):
        if directory(posixpath.dirname(rel)):
            continue
        reason = _file_skip_reason(posixpath.basename(rel), rel, files[rel], rules, untracked, settings)
        if reason:
            out.skipped[reason] += 1
        else:
            out.candidates.append(Candidate(rel, Path(rel), files[rel], 0.0))
    _drop_compiled_copies(out, {rel for rel in files if rel.endswith(SOURCE_MAP_SUFFIX)},
                          lambda rel: (read(rel) or b"")[:SOURCE_MAP_HEAD_BYTES] if rel in files else None)
    return out


def _drop_compiled_copies(out: Walk, maps: set[str], map_head: Callable[[str], bytes | None]) -> None:
    """Skip each candidate compiled from the walk's own files (`COMPILED`): beside it a source map (`maps` holds
    every map the walk saw; `map_head` reads one's head) whose sources lead, through compiled copies or
    directly, to a candidate that is no copy. Maps that name one another without reaching one skip nothing."""
    if not maps:  # most workspaces: nothing to judge, not even a set of the candidates
        return
    candidates = {c.rel_path for c in out.candidates}
    sources: dict[str, list[str]] = {}  # a candidate with a map -> its sources among the candidates
    for rel in candidates:
        map_rel = rel + SOURCE_MAP_SUFFIX
        head = map_head(map_rel) if map_rel in maps else None
        found = [s for s in map_sources(map_rel, head) if s in candidates and s != rel] if head is not None else []
        if found:
            sources[rel] = found
    if not sources:
        return
    # A copy is a file some chain of sources leads from to an original (a candidate compiled from nothing): found
    # backwards from the originals, each file once, however long the chains (a loop of maps reaches none).
    compiled_into: dict[str, list[str]] = {}
    for rel, found in sources.items():
        for source in found:
            compiled_into.setdefault(source, []).append(rel)
    pending = [source for source in compiled_into if source not in sources]
    copies: set[str] = set()
    while pending:
        for rel in compiled_into.get(pending.pop(), ()):
            if rel not in copies:
                copies.add(rel)
                pending.append(rel)
    out.skipped_files += [(c.rel_path, COMPILED) for c in out.candidates if c.rel_path in copies]
    out.candidates = [c for c in out.candidates if c.rel_path not in copies]
    out.skipped[COMPILED] += len(copies)


def map_sources(map_rel: str, head: bytes) -> list[str]:
    """The workspace paths (POSIX, from its root) that the source map `map_rel` names as its sources, read from its
    `head`: relative ones only, taken from the map's folder (and its `sourceRoot`); none that is a URL
    (`webpack://...`), absolute, or outside the workspace."""
    opening = _MAP_SOURCES.search(head)
    start = opening.end() - 1 if opening else -1
    end = head.find(b"]", start) if opening else -1
    if end < 0:
        return []
    root_field = _MAP_SOURCE_ROOT.search(head)
    try:
        names = json.loads(head[start:end + 1])
        root = json.loads(root_field.group(1)) if root_field else ""
    except (ValueError, RecursionError):  # not JSON, or a list nested thousands deep (`[[[[...]`)
        return []
    if not isinstance(names, list) or not isinstance(root, str):
        return []
    folder = posixpath.dirname(map_rel)
    found = []
    for name in names:
        if not isinstance(name, str) or not name:
            continue
        joined = posixpath.join(root, name) if root else name
        if joined.startswith("/") or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", joined):  # absolute, or a URL/drive
            continue
        path = posixpath.normpath(posixpath.join(folder, joined))
        if path != ".." and not path.startswith("../"):
            found.append(path)
    return found


def _map_head_on_disk(root: Path) -> Callable[[str], bytes | None]:
    """A reader of a source map's head under `root` (None: absent, unreadable or a link, which is never followed)."""
    def head(rel: str) -> bytes | None:
        try:
            return read_head(root / rel, SOURCE_MAP_HEAD_BYTES, follow_links=False)
        except OSError:
            return None
    return head


def _dir_skip_reason(name: str, rel_dir: str, rules: IgnoreRules, tracked: TrackedFiles,
                     listing: Callable[[], Iterable[str]]) -> str:
    """Why the directory `rel_dir` is skipped ("" when it is walked); `listing` gives the names in it, asked only
    for a name in `BUILD_OUTPUT_MARKERS` (one listing, before git's index is read)."""
    if name in SKIP_DIRS or name.endswith(SKIP_DIR_SUFFIXES) or (
            name in _BUILD_OUTPUT_PATTERNS and is_build_output(name, listing()) and not tracked.holds_dir(rel_dir)):
        return "skipped directory"
    verdict = rules.verdict(rel_dir, is_dir=True)
    if verdict and not (verdict == BY_GITIGNORE and tracked.holds_dir(rel_dir)):
        return "ignored directory"
    return ""


def is_build_output(name: str, entries: Iterable[str]) -> bool:
    """Whether a directory called `name` holding `entries` (the names directly in it) shows the marks of build
    output (`BUILD_OUTPUT_MARKERS`)."""
    pattern = _BUILD_OUTPUT_PATTERNS.get(name)
    return pattern is not None and any(pattern.match(entry) for entry in entries)


def _listing(abs_dir: str | Path) -> Callable[[], list[str]]:
    """The names in `abs_dir` when asked; none when it cannot be listed (the walk then counts it unreadable)."""
    def names() -> list[str]:
        try:
            return os.listdir(abs_dir)
        except OSError:
            return []
    return names


def _file_skip_reason(name: str, rel_path: str, size: int, rules: IgnoreRules, tracked: TrackedFiles,
                      settings: Settings) -> str:
    reason = _path_skip_reason(name, size, settings)
    if not reason:
        # git ignores only untracked files: a committed file that a .gitignore pattern matches is still indexed.
        verdict = rules.verdict(rel_path, is_dir=False)
        if verdict and not (verdict == BY_GITIGNORE and tracked.holds_file(rel_path)):
            reason = IGNORED
    return reason


def _path_skip_reason(name: str, size: int, settings: Settings) -> str:
    lower = name.lower()
    if name in IGNORE_FILE_NAMES:
        return "ignore file"
    if name == ".git":  # a linked work tree's or a submodule's pointer to its git directory
        return "git link"
    if name in LOCKFILES:
        return "lockfile"
    if os.path.splitext(lower)[1] in BINARY_SUFFIXES:
        return "binary"
    if lower.endswith(MINIFIED_SUFFIXES):
        return "minified"
    if size > settings.max_file_bytes:
        return TOO_LARGE
    return ""


def _is_utf8_name(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.scandir hands undecodable bytes over as lone surrogates
        return False
    return True


class CandidateChanged(OSError):
    """The path no longer names the file discovery saw (replaced, or swapped for a link)."""


def read_candidate_bytes(candidate: Candidate) -> bytes:
    """The file's bytes, refusing to follow a link and refusing a file that is not the one discovery saw.

    Between the walk and this read the file may have been swapped for a symlink (to /etc/passwd, say):
    O_NOFOLLOW refuses a link in the last component, and the identity check refuses anything else put in
    its place, including through a directory swapped for a link.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(candidate.abs_path, flags)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CandidateChanged(f"{candidate.rel_path}: not a regular file")
        if candidate.inode and (st.st_dev, st.st_ino) != (candidate.device, candidate.inode):
            raise CandidateChanged(f"{candidate.rel_path}: replaced since it was discovered")
        return fh.read()


def decode_source(raw: bytes, settings: Settings, name: str = "") -> ReadResult:
    """Apply the content rules. Never raises for bad bytes: an undecodable file is a counted skip. `name`: the
    file's name (a manifest is not skipped as generated; a document only by its leading comment)."""
    checks_generated = not _is_manifest(name)
    document = bool(name) and detect_language(name) in _DOCUMENT_LANGUAGES
    if len(raw) > settings.max_file_bytes:
        return ReadResult(None, TOO_LARGE, raw=raw)
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return _finish(raw, "utf-16", settings, checks_generated, document)
        except UnicodeDecodeError:  # a BOM followed by an odd byte count or a lone surrogate
            return ReadResult(None, "not utf-16 (undecodable)", raw=raw)
    if b"\x00" in raw[:SNIFF_BYTES]:
        return ReadResult(None, "binary", raw=raw)
    try:
        return _finish(raw, "utf-8-sig" if raw.startswith(codecs.BOM_UTF8) else "utf-8", settings, checks_generated,
                       document)
    except UnicodeDecodeError:
        pass
    # Windows-1252 is the only common single-byte fallback that is strict (it rejects 0x81, 0x8d, ...),
    # and we accept it only when the result reads as text: mojibake is worse than a skipped file.
    try:
        result = _finish(raw, "cp1252", settings, checks_generated, document)
    except UnicodeDecodeError:
        return ReadResult(None, "not utf-8 (undecodable)", raw=raw)
    if result.text is not None and not _reads_as_text(result.text):
        return ReadResult(None, "not utf-8 (undecodable)", raw=raw)
    return result


def _is_manifest(name: str) -> bool:
    lowered = name.rsplit("/", 1)[-1].lower()
    return lowered in MANIFEST_NAMES or lowered.endswith(".gemspec")


def looks_generated(text: str, document: bool = False) -> bool:
    """Whether a file's preamble (its comments and docstring before the code) says the file is generated
    (`GENERATED_MARKER`, `GENERATED_PHRASE`); for a `document`, whether its leading comment does."""
    head = text[:_PREAMBLE_CHARS].lower()
    if document:
        preamble = _leading_comments(head, _DOCUMENT_BLOCKS, ("//",), _RST_COMMENT)
    else:
        preamble = _leading_comments(head, _BLOCKS, _COMMENT_STARTS)
    return bool(GENERATED_MARKER.search(preamble) or GENERATED_PHRASE.search(preamble))


def _leading_comments(head: str, blocks: tuple[tuple[str, str], ...], line_starts: tuple[str, ...],
                      indented: re.Pattern[str] | None = None) -> str:
    """The lines of `head` before its first line of code or text: blank lines, lines opening with one of
    `line_starts`, block comments (or docstrings) of `blocks` that start on a line of their own, and lines
    matching `indented` with the indented lines after them (reST's `..` comments)."""
    lines = []
    closing = ""  # the end of the block the line is in
    in_indented = False
    for line in head.splitlines():
        stripped = line.strip()
        if closing:
            lines.append(line)
            if closing in stripped:
                closing = ""
            continue
        if in_indented and (not stripped or line[:1].isspace()):
            lines.append(line)
            continue
        in_indented = False
        opened = next(((start, end) for start, end in blocks if stripped.startswith(start)), None)
        if opened is not None:
            if opened[1] not in stripped[len(opened[0]):]:
                closing = opened[1]
        elif indented is not None and indented.match(stripped):
            in_indented = True
        elif stripped and not stripped.startswith(line_starts):
            break
        lines.append(line)
    return "\n".join(lines)


def _finish(raw: bytes, encoding: str, settings: Settings, checks_generated: bool = True,
            document: bool = False) -> ReadResult:
    text = raw.decode(encoding)
    longest = max(map(len, text.splitlines()), default=0)
    if longest > settings.max_line_chars and _looks_minified(text, settings.max_line_chars):
        return ReadResult(None, "minified", encoding, raw)
    if checks_generated and looks_generated(text, document):
        return ReadResult(None, "generated", encoding, raw)
    return ReadResult(text, "", encoding, raw)


def _looks_minified(text: str, max_line: int) -> bool:
    # One long line (a data URL, a long string) does not make a file minified; long lines carrying most of
    # the file's bytes do.
    long_chars = sum(len(line) for line in text.splitlines() if len(line) > max_line)
    return long_chars > 0.5 * len(text)


def _reads_as_text(text: str) -> bool:
    controls = sum(1 for ch in text if ord(ch) < 32 and ch not in "\t\n\r\f")
    return controls <= len(text) // 200
