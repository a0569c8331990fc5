"""Which grammar a file is written in, and which grammars this build can parse."""

from __future__ import annotations

import logging
import re
import threading
import typing
from functools import lru_cache
from pathlib import PurePosixPath

log = logging.getLogger("codeloupe.chunk")

DOC_LANGUAGES = frozenset({"markdown", "rst", "asciidoc", "text"})

_EXTENSIONS: dict[str, str] = {
    # docs
    ".md": "markdown", ".markdown": "markdown", ".mdown": "markdown", ".mkd": "markdown",
    ".rst": "rst", ".rest": "rst", ".adoc": "asciidoc", ".asciidoc": "asciidoc", ".asc": "asciidoc",
    ".txt": "text", ".text": "text",
    # code
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby", ".ru": "ruby", ".erb": "embeddedtemplate",
    ".go": "go", ".rs": "rust", ".php": "php", ".phtml": "php", ".inc": "php",
    ".java": "java", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp",
    ".hh": "cpp", ".hpp": "cpp", ".hxx": "cpp", ".h++": "cpp", ".ipp": "cpp", ".cs": "csharp",
    ".kt": "kotlin", ".kts": "kotlin", ".swift": "swift", ".lua": "lua",
    ".sh": "bash", ".bash": "bash", ".zsh": "bash", ".ksh": "bash", ".fish": "fish",
    ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".json": "json", ".jsonc": "json",
    ".json5": "json", ".html": "html", ".htm": "html", ".xhtml": "html", ".css": "css",
    ".scss": "scss", ".sql": "sql", ".xml": "xml", ".svg": "xml", ".xsd": "xml", ".plist": "xml",
    ".vue": "vue", ".svelte": "svelte", ".astro": "astro", ".scala": "scala", ".sc": "scala",
    ".dart": "dart", ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hrl": "erlang",
    ".hs": "haskell", ".ml": "ocaml", ".mli": "ocaml_interface", ".fs": "fsharp", ".fsx": "fsharp",
    ".fsi": "fsharp_signature", ".clj": "clojure", ".cljs": "clojure", ".cljc": "clojure",
    ".el": "elisp", ".lisp": "commonlisp", ".scm": "scheme", ".rkt": "racket", ".jl": "julia",
    ".r": "r", ".pl": "perl", ".pm": "perl", ".t": "perl", ".ps1": "powershell", ".psm1": "powershell",
    ".zig": "zig", ".nim": "nim", ".v": "v", ".sv": "verilog", ".vhd": "vhdl", ".vhdl": "vhdl",
    ".groovy": "groovy", ".gradle": "groovy", ".m": "objc", ".mm": "objc", ".cu": "cuda",
    ".cuh": "cuda", ".glsl": "glsl", ".hlsl": "hlsl", ".wgsl": "wgsl", ".proto": "proto",
    ".thrift": "thrift", ".graphql": "graphql", ".gql": "graphql", ".tf": "terraform",
    ".tfvars": "terraform", ".hcl": "hcl", ".nix": "nix", ".cmake": "cmake", ".mk": "make",
    ".dockerfile": "dockerfile", ".ini": "ini", ".cfg": "ini", ".properties": "properties",
    ".tex": "latex", ".bib": "bibtex", ".vim": "vim", ".sol": "solidity", ".gleam": "gleam",
    ".elm": "elm", ".purs": "purescript", ".d": "d", ".odin": "odin", ".hx": "haxe",
    ".bzl": "starlark", ".star": "starlark", ".tcl": "tcl", ".luau": "luau", ".pas": "pascal",
    ".f90": "fortran", ".f95": "fortran", ".f03": "fortran", ".f": "fortran", ".cob": "cobol",
    ".ada": "ada", ".adb": "ada", ".ads": "ada", ".asm": "asm", ".s": "asm", ".ll": "llvm",
    ".mermaid": "mermaid", ".mmd": "mermaid", ".prisma": "prisma", ".rego": "rego",
    ".twig": "twig", ".typ": "typst", ".kdl": "kdl", ".ron": "ron", ".csv": "csv", ".tsv": "tsv",
    ".po": "po", ".pem": "pem", ".org": "org", ".wat": "wat", ".wast": "wast", ".smali": "smali",
    ".jsonnet": "jsonnet", ".libsonnet": "jsonnet", ".janet": "janet", ".fnl": "fennel",
    ".gd": "gdscript", ".cairo": "cairo", ".move": "text", ".bicep": "bicep", ".cls": "apex",
    ".ino": "arduino", ".matlab": "matlab", ".pony": "pony", ".sparql": "sparql",
    ".dtd": "dtd", ".ninja": "ninja", ".meson": "meson", ".lock": "text",
}

_FILENAMES: dict[str, str] = {
    "makefile": "make", "gnumakefile": "make", "dockerfile": "dockerfile", "containerfile": "dockerfile",
    "gemfile": "ruby", "rakefile": "ruby", "guardfile": "ruby", "vagrantfile": "ruby", "podfile": "ruby",
    "brewfile": "ruby", "capfile": "ruby", "berksfile": "ruby", "config.ru": "ruby",
    "cmakelists.txt": "cmake", "go.mod": "gomod", "go.sum": "gosum", "go.work": "gomod",
    "requirements.txt": "requirements", "pipfile": "toml", "cargo.lock": "toml", "poetry.lock": "toml",
    "build": "starlark", "build.bazel": "starlark", "workspace": "starlark", "buck": "starlark",
    "jenkinsfile": "groovy", "meson.build": "meson", ".gitignore": "gitignore",
    ".dockerignore": "gitignore", ".gitattributes": "gitattributes", ".bashrc": "bash",
    ".bash_profile": "bash", ".profile": "bash", ".zshrc": "bash", "pkgbuild": "bash",
    "kconfig": "kconfig", ".editorconfig": "ini", ".npmrc": "ini", ".eslintrc": "json",
    ".babelrc": "json", ".prettierrc": "json",
}

# Interpreter named on a shebang line (after `env` and its flags) -> grammar.
_INTERPRETERS: dict[str, str] = {
    "python": "python", "node": "javascript", "nodejs": "javascript", "deno": "typescript",
    "bun": "typescript", "ts-node": "typescript", "tsx": "typescript", "ruby": "ruby", "sh": "bash",
    "bash": "bash", "zsh": "bash", "dash": "bash", "ksh": "bash", "ash": "bash", "fish": "fish",
    "perl": "perl", "php": "php", "lua": "lua", "luajit": "lua", "rscript": "r", "julia": "julia",
    "elixir": "elixir", "escript": "erlang", "tclsh": "tcl", "pwsh": "powershell", "make": "make",
    "groovy": "groovy", "scala": "scala", "swift": "swift", "kotlin": "kotlin",
}


def _interpreter_language(head: str) -> str | None:
    if not head.startswith("#!"):
        return None
    words = head[2:].splitlines()[0].split() if head[2:].strip() else []
    if words and words[0].rsplit("/", 1)[-1] == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1].lower()
    # python3.12, ruby2.7, lua5.4 -> python, ruby, lua
    stem = program.rstrip("0123456789.")
    return _INTERPRETERS.get(program) or _INTERPRETERS.get(stem)


def detect_language(rel_path: str, head: str = "") -> str:
    """The grammar name for a file: by well-known file name, extension, then the shebang in `head`."""
    name = PurePosixPath(rel_path.replace("\\", "/")).name
    lowered = name.lower()
    if lowered in _FILENAMES:
        return _FILENAMES[lowered]
    if lowered.startswith("dockerfile.") or lowered.endswith(".dockerfile"):
        return "dockerfile"
    if lowered.startswith("makefile."):
        return "make"
    suffix = PurePosixPath(lowered).suffix
    by_suffix = _EXTENSIONS.get(suffix)
    if by_suffix and by_suffix != "text":
        return by_suffix
    return _interpreter_language(head) or by_suffix or "text"


def is_doc_language(language: str) -> bool:
    """Prose formats (markdown, reStructuredText, AsciiDoc, plain text); TOML/YAML/JSON count as code."""
    return language in DOC_LANGUAGES


@lru_cache(maxsize=1)
def available_languages() -> list[str]:
    """Grammars the installed tree-sitter-language-pack can actually load, asked of the pack."""
    import tree_sitter_language_pack as pack

    names = typing.get_args(pack.SupportedLanguage)
    return sorted(name for name in names if get_parser(name) is not None)


# Parsers hold mutable state: one per thread and language (the indexer may chunk on several threads).
_thread = threading.local()


# Grammars the pack ships that loop for ever on ordinary text (the parse runs in C: nothing but killing the
# process stops it, and the language server parses a save in its own): their files are chunked as with no grammar.
# Found by parsing short random texts in every grammar the chunker uses (the loop is in the lexer, where no
# progress callback is reached).
_LOOPING_GRAMMARS = frozenset({
    "cobol",  # tree-sitter-cobol: "x\n", "#\n", ".:x=\n"
})


@lru_cache(maxsize=1)
def grammar_versions() -> str:
    """The installed versions of the grammar pack and of tree-sitter itself, as one string: what decides whether a
    grammar that crashed or never finished on a file may now parse it."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("tree-sitter-language-pack", "tree-sitter"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} none")
    return ", ".join(found)


def get_parser(language: str) -> typing.Any | None:
    """A cached tree-sitter parser for `language`, or None when the pack has no loadable grammar, or one that
    loops on ordinary text (`_LOOPING_GRAMMARS`)."""
    parsers: dict[str, typing.Any | None] = getattr(_thread, "parsers", None) or {}
    _thread.parsers = parsers
    if language in _LOOPING_GRAMMARS:
        return None
    if language not in parsers:
        try:
            import tree_sitter_language_pack as pack

            parsers[language] = pack.get_parser(language)  # type: ignore[arg-type]
        except Exception as exc:  # a missing or broken grammar is a fallback, never an error
            log.debug("no parser for %s: %s", language, exc)
            parsers[language] = None
    return parsers[language]


# A code point past U+FFFF, as UTF-8 (4 bytes). Grammars' external scanners look a character up in tables sized for
# fewer: tree-sitter-bash's read out of bounds on `{` followed by one (tree-sitter/tree-sitter-bash#337) and
# crashed the process (SIGSEGV) in about half the processes, by where memory lay; a repository's file is enough.
_PAST_BMP = re.compile(rb"[\xf0-\xf4][\x80-\xbf]{3}")
# Four letters in its place: the same bytes long, so every node's offsets (and the lines, names and text read
# from the file's own bytes by those offsets) are the file's; a letter, as such characters in code mostly are
# (in strings and comments, where any letter parses alike; in names, a name still).
_PAST_BMP_STAND_IN = b"xxxx"


def parse(parser: typing.Any, source: bytes) -> typing.Any:
    """`parser`'s tree of `source` (UTF-8), its characters past U+FFFF read as letters of the same byte length
    (what a grammar's scanner can crash on never reaches it: `_PAST_BMP`), and ending with a line break: tree-sitter-
    perl looped for ever on a file whose last line, with no break after it, ends in a comment after a word (`x# y`).
    The break added after the last byte moves no node's start, nor any offset inside the file."""
    text = _PAST_BMP.sub(_PAST_BMP_STAND_IN, source)
    return parser.parse(text if not text or text.endswith(b"\n") else text + b"\n")
