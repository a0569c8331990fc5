"""Files a real repository holds that must be skipped and counted, never end the index: undecodable text,
names that are not UTF-8, a file swapped for a link after discovery, an unreadable workspace root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codeloupe.api import Workspace
from codeloupe.discover import decode_source, walk
from codeloupe.graph import graph_node, render_text
from codeloupe.index import index_paths, index_workspace, prepare
from codeloupe.settings import Settings
from processes import unprivileged

# pylint's test data: a UTF-16 byte-order mark, then an odd number of bytes.
ODD_UTF16 = b"\xff\xfeh\x00i\x00\n"
BAD_NAME = b"caf\xe9.py"  # Latin-1 bytes: not a UTF-8 name


def cli(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codeloupe", *args], capture_output=True, text=True,
                          timeout=120, **kwargs)


def test_an_odd_length_utf16_file_is_a_counted_skip(tmp_path: Path) -> None:
    assert decode_source(ODD_UTF16, Settings()).skip_reason == "not utf-16 (undecodable)"
    (tmp_path / "odd.txt").write_bytes(ODD_UTF16)
    (tmp_path / "ok.py").write_text("def ok():\n    return 1\n")
    ws = Workspace(tmp_path, overrides={"embed_provider": "none"})
    try:
        report = ws.index()
        assert report.files_indexed == 1
        assert report.skipped == {"not utf-16 (undecodable)": 1}
        assert set(ws.store.file_rows()) == {"ok.py"}
    finally:
        ws.close()


def test_a_name_that_is_not_utf8_is_skipped_and_everything_else_indexed(tmp_path: Path) -> None:
    os.makedirs(os.path.join(os.fsencode(tmp_path), b"d\xff"))
    for name in (BAD_NAME, b"d\xff/inner.py"):
        with open(os.path.join(os.fsencode(tmp_path), name), "wb") as fh:
            fh.write(b"def hidden():\n    return 1\n")
    (tmp_path / "zzz_after.py").write_text("def later_file():\n    return 2\n")
    ws = Workspace(tmp_path, overrides={"embed_provider": "none"})
    try:
        report = ws.index()
        assert report.skipped == {"name not utf-8": 2}
        assert set(ws.store.file_rows()) == {"zzz_after.py"}
        assert [f.path for f in ws.search("later_file").files] == ["zzz_after.py"]
    finally:
        ws.close()
    run = cli("index", str(tmp_path), "--embed-provider", "none")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "name not utf-8" in run.stdout + run.stderr


def test_a_file_swapped_for_a_link_after_discovery_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("SECRET_TOKEN = 'do not index me'\n")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "config.py").write_text("NAME = 'fine'\n")
    settings = Settings(embed_provider="none")
    (candidate,) = walk(root, settings).candidates
    (root / "config.py").unlink()
    (root / "config.py").symlink_to(outside)  # the swap, between discovery and read
    prepared = prepare(candidate, "", settings)
    assert prepared.chunked is None and prepared.skip_reason == "replaced since discovery"

    # The same through a directory swapped for a link: the identity check catches what O_NOFOLLOW cannot.
    (root / "pkg").mkdir()
    (root / "pkg" / "secret.txt").write_text("x = 1\n")
    (candidate,) = [c for c in walk(root, settings).candidates if c.rel_path == "pkg/secret.txt"]
    (root / "pkg" / "secret.txt").unlink()
    (root / "pkg").rmdir()
    (root / "pkg").symlink_to(outside.parent)
    assert prepare(candidate, "", settings).skip_reason == "replaced since discovery"


def test_the_index_never_stores_a_file_swapped_for_a_link(tmp_path: Path, monkeypatch) -> None:
    """The whole index: the swap happens after the walk returned (as a race would have it)."""
    import codeloupe.index as index_module

    outside = tmp_path / "passwd"
    outside.write_text("root:x:0:0:root:/root:/bin/bash\n")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "victim.py").write_text("x = 1\n")
    real_walk = index_module.walk

    def walk_then_swap(*args, **kwargs):
        found = real_walk(*args, **kwargs)
        (root / "victim.py").unlink()
        (root / "victim.py").symlink_to(outside)
        return found

    monkeypatch.setattr(index_module, "walk", walk_then_swap)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        report = index_workspace(root, ws.store, ws.settings)
        assert report.skipped == {"replaced since discovery": 1}
        assert ws.store.counts()["chunks"] == 0
        # The editor's save path (a watcher event naming the path) does not follow it either.
        assert index_paths(root, ws.store, ws.settings, ["victim.py"]).files_indexed == 0
        assert ws.store.counts()["chunks"] == 0
    finally:
        ws.close()


def test_an_unreadable_workspace_root_is_one_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "locked"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    root.chmod(0)
    try:
        run = cli("index", str(root), "--embed-provider", "none", **unprivileged())
        missing = cli("index", str(tmp_path / "absent"), "--embed-provider", "none")
    finally:
        root.chmod(0o755)
    assert run.returncode == missing.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.strip() == f"codeloupe: {root}: Permission denied"
    assert missing.stderr.strip() == f"codeloupe: {tmp_path / 'absent'}: no such directory"


def test_the_engine_refuses_an_unreadable_root_with_a_workspace_error(tmp_path: Path) -> None:
    root = tmp_path / "locked"
    root.mkdir()
    root.chmod(0)
    probe = (f"from codeloupe.api import Workspace, WorkspaceError\n"
             f"try:\n    Workspace({str(root)!r})\nexcept WorkspaceError as exc:\n    print(exc)\n")
    try:
        run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                             **unprivileged())
    finally:
        root.chmod(0o755)
    assert run.stdout.strip() == f"{root}: Permission denied", run.stderr


@pytest.mark.parametrize("line", [
    "!",  # black's test data: pathspec's GitIgnorePatternError
    "[z-a]",  # a range backwards: Python's re.error, which is no ValueError
    "[[:foo:]]",  # no such character class: RE2's error
])
def test_an_invalid_line_in_an_ignore_file_is_skipped_not_the_index(tmp_path: Path, lexical_workspace,
                                                                     line: str) -> None:
    """black's test data holds a .gitignore whose line is a lone `!`: git skips such a line; the index did not.
    Nor may a line that the pattern compilers refuse in their own ways stop every command on the workspace."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / ".gitignore").write_text(f"{line}\nsecret.txt\n")
    (tmp_path / "data" / "secret.txt").write_text("hidden_marker_word\n")
    (tmp_path / "data" / "kept.py").write_text("def visible_marker_word():\n    return 1\n")
    ws = lexical_workspace(tmp_path)
    indexed = set(ws.store.file_rows())
    assert "data/kept.py" in indexed
    assert "data/secret.txt" not in indexed, "the valid lines of that ignore file still apply"


def test_an_ignore_line_python_warns_about_prints_no_warning(tmp_path: Path) -> None:
    """pathspec compiles every pattern with Python's `re` too, which prints a FutureWarning ("Possible nested
    set") for a line such as `[[:foo:]]`: a repository's ignore file put Python's warning on the terminal."""
    (tmp_path / ".gitignore").write_text("[[:foo:]]\n")
    (tmp_path / "kept.py").write_text("def kept():\n    return 1\n")
    run = subprocess.run([sys.executable, "-m", "codeloupe", "index", str(tmp_path), "--embed-provider", "none"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Warning" not in run.stderr, run.stderr


def test_an_ignore_file_that_is_a_link_a_fifo_or_huge_cannot_stall_the_walk(tmp_path: Path) -> None:
    """A .gitignore linked to /dev/zero would be read forever, a FIFO would wait for a writer, and a file of
    hundreds of thousands of patterns would match each of them against every path: git reads no ignore file
    through a link, and discovery reads a bounded head of the others."""
    from codeloupe.discover import IGNORE_PATTERNS_MAX

    (tmp_path / "main.py").write_text("x = 1\n")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / ".gitignore").symlink_to("/dev/zero")
    (tmp_path / "linked" / "a.py").write_text("a = 1\n")
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / ".gitignore")
    (tmp_path / "fifo" / "b.py").write_text("b = 1\n")
    (tmp_path / "huge").mkdir()
    # The first pattern ignores c.log; past the bounds a negation would have brought it back.
    patterns = ["*.log"] + [f"never_{i}/" for i in range(IGNORE_PATTERNS_MAX * 60)] + ["!c.log"]
    (tmp_path / "huge" / ".gitignore").write_text("\n".join(patterns) + "\n")
    (tmp_path / "huge" / "c.log").write_text("c\n")
    (tmp_path / "huge" / "d.py").write_text("d = 1\n")
    assert os.path.getsize(tmp_path / "huge" / ".gitignore") > 1024 * 1024
    done = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                           "from codeloupe.discover import walk; from codeloupe.settings import Settings; "
                           "print(' '.join(c.rel_path for c in walk(Path(sys.argv[1]), Settings()).candidates))",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fifo/b.py", "huge/d.py", "linked/a.py", "main.py"]
    assert "only its first 256 KiB" in done.stderr


def test_an_ignore_file_too_large_for_one_pattern_set_keeps_every_pattern(tmp_path: Path) -> None:
    """RE2 compiles an ignore file's patterns as one set within a memory budget: a .gitignore listing a few hundred
    long paths (here four of 20,000 characters, each valid alone) ended `codeloupe index` with a traceback
    ("failed to compile Set"). Every pattern still applies, in order: a later line's negation wins."""
    long_lines = [letter * 20_000 for letter in "abcd"]
    (tmp_path / ".gitignore").write_text("\n".join(["*.log", *long_lines, "!kept.log", "secret.txt"]) + "\n")
    for name in ("main.py", "other.log", "kept.log", "secret.txt"):
        (tmp_path / name).write_text("x = 1\n")
    assert [c.rel_path for c in walk(tmp_path, Settings()).candidates] == ["kept.log", "main.py"]


def test_reading_a_fifo_or_a_huge_file_for_an_answer_is_a_clear_error(tmp_path: Path, lexical_workspace) -> None:
    """An agent or an editor asks for a workspace file's lines: a FIFO would wait for a writer forever and a
    file of gigabytes would fill the memory; both are refused with the reason."""
    from codeloupe.api import READ_MAX_BYTES, WorkspaceError

    (tmp_path / "main.py").write_text("x = 1\n")
    ws = lexical_workspace(tmp_path)
    os.mkfifo(tmp_path / "pipe.py")
    with open(tmp_path / "dump.sql", "wb") as fh:
        fh.truncate(READ_MAX_BYTES + 1)  # sparse: no disk used
    for name, reason in (("pipe.py", "not a regular file"), ("dump.sql", "larger than 64 MiB")):
        try:
            ws.read_lines(name, 1, 2)
        except WorkspaceError as exc:
            assert reason in str(exc), exc
        else:
            raise AssertionError(f"{name} was read")
    assert ws.read_lines("main.py") == "x = 1\n"


def test_settings_files_that_are_links_fifos_or_nested_deep_are_skipped_with_a_warning(tmp_path: Path) -> None:
    """A .codeloupe.toml linked to /proc/kmsg blocked every command for good (a link elsewhere would read a file
    outside the workspace); a pyproject.toml or .codeloupe.toml nested thousands deep raised RecursionError
    out of every command, then stopped it (exit 2). Each command runs in a process of its own with a timeout."""
    def index(root: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "codeloupe", "index", str(root), "--embed-provider", "none"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "c")})

    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "a.py").write_text("a = 1\n")
    (tmp_path / "elsewhere.toml").write_text("chunk_budget = 1234\n")
    (linked / ".codeloupe.toml").symlink_to(tmp_path / "elsewhere.toml")
    os.mkfifo(linked / "pyproject.toml")
    run = index(linked)
    assert run.returncode == 0 and "is a link: not read for settings" in run.stderr, run.stderr
    nested = tmp_path / "nested"
    nested.mkdir()
    (nested / "a.py").write_text("a = 1\n")
    (nested / "pyproject.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    run = index(nested)
    assert run.returncode == 0 and "nested too deeply" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_manifests_and_configs_nested_thousands_deep_leave_the_graph_and_the_tour_working(tmp_path: Path) -> None:
    """A tsconfig.json or package.json nested 100,000 deep raised RecursionError out of index, search, graph
    and tour."""
    deep = "[\n" * 100_000 + "]\n" * 100_000
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "tsconfig.json").write_text('{"compilerOptions":' + deep + "}")
    (tmp_path / "package.json").write_text('{"main":' + deep + "}")
    (tmp_path / "web" / "a.ts").write_text('import {b} from "./b";\nexport const a = b();\n')
    (tmp_path / "web" / "b.ts").write_text("export function b() { return 1; }\n")
    ws = Workspace(tmp_path, overrides={"embed_provider": "none"})
    try:
        ws.index()
        assert ws.search("function b").core[0].path == "web/b.ts"
        # The tsconfig read as none: the relative import still resolves; the package.json declares no program.
        assert [n.path for n in graph_node(ws, "web/a.ts").imports] == ["web/b.ts"]
        assert ws.tour().entry_points == []
    finally:
        ws.close()


def test_file_names_and_contents_never_drive_the_terminal_or_forge_lines(tmp_path: Path) -> None:
    """Escape sequences in a strategy file's name reached stderr raw (its warning), a newline in a file name
    printed a line of its own in every listing, and bidirectional overrides in names or code reordered what the
    terminal showed."""
    root = tmp_path / "repo"
    (root / ".codeloupe" / "strategies").mkdir(parents=True)
    (root / "app.py").write_text("def f():\n    return 1\n")
    (root / ".codeloupe" / "strategies" / "e\x1b[2J\x1b]0;T\x07x.py").write_text("x = 1\n")
    (root / "nl_\n  9. fake.py").write_text("def g():\n    return 1\n")
    (root / "bidi\u202e.py").write_text('def h():\n    return "\u202e"\n')
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "c"), "CODELOUPE_CONFIG_DIR": str(tmp_path / "u")}
    for command in (["search", str(root), "return g", "--embed-provider", "none"], ["locate", str(root), "return"],
                    ["tour", str(root)], ["graph", str(root), "--embed-provider", "none"], ["stats", str(root)]):
        run = subprocess.run([sys.executable, "-m", "codeloupe", *command], capture_output=True, text=True,
                             timeout=120, env=env)
        assert run.returncode == 0, run.stderr
        shown = run.stdout + run.stderr
        assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown, command
        assert not any(line.startswith("  9. fake.py") for line in shown.splitlines()), command


def test_a_line_break_in_a_file_name_stays_inside_its_line_of_the_graph_text(tmp_path: Path) -> None:
    """The graph's text (the CLI's `graph`, the agents' `graph` tool) wove names into its lines as they were: a
    file named with a newline listed a forged neighbour of its own."""
    (tmp_path / "app.py").write_text("def f():\n    return 1\n")
    odd = "nl_\n  forged.py:1 import [secret]\u2028x.py"
    (tmp_path / odd).write_text("from app import f\n\n\ndef g():\n    return f()\n")
    ws = Workspace(tmp_path, overrides={"embed_provider": "none"})
    try:
        ws.index()
        for node in ("app.py", odd):
            text = render_text(graph_node(ws, node))
            assert "nl_\\n  forged.py:1 import [secret]\\u2028x.py" in text, node
            assert not any(line.lstrip().startswith("forged.py") for line in text.splitlines()), node
            assert "x.py" not in {line.strip() for line in text.splitlines()}, node
    finally:
        ws.close()


def test_a_character_past_u_ffff_after_a_brace_crashes_no_process_that_parses_it() -> None:
    """tree-sitter-bash's scanner reads out of bounds on `{` followed by a character past U+FFFF (upstream
    tree-sitter-bash#337): chunking such a shell script killed the process by SIGSEGV (the language server,
    `index` of a small workspace, a save), in about half the processes, by where memory lay. Eight processes
    each chunk 300 such scripts and build the graph's facts of as many Python and JavaScript files (the graph
    parses too): before, nearly every one died. The chunks are still the file's own lines, byte for byte."""
    probe = (
        "import random, sys\n"
        "from codeloupe.chunk.chunker import chunk_file\n"
        "from codeloupe.graph.langs.common import parse\n"
        "draw = random.Random(int(sys.argv[1]))\n"
        "for _ in range(300):\n"
        "    text = 'echo {' + chr(draw.randrange(0x10000, 0x110000)) + '}\\n{' + chr(draw.randrange(0x10000, 0x110000))\n"
        "    chunked = chunk_file('run.sh', text, 'bash')\n"
        "    assert ''.join(chunk.text for chunk in chunked.chunks) == text, chunked\n"
        "    for grammar in ('python', 'javascript'):\n"
        "        parse(grammar, text.encode())\n"
        "print('parsed')\n")
    runs = [subprocess.Popen([sys.executable, "-c", probe, str(seed)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for seed in range(8)]
    done = [(run.wait(timeout=300), run.communicate()) for run in runs]
    assert [(code, out.strip()) for code, (out, _) in done] == [(0, "parsed")] * 8, [err for _, (_, err) in done]


def test_texts_that_loop_a_grammar_for_ever_are_chunked_in_a_moment() -> None:
    """Two grammars looped for ever on ordinary text, in C, where nothing stops them but killing the process (the
    language server parses a saved file in its own): tree-sitter-perl on a last line with no break after it that
    ends in a comment after a word, tree-sitter-cobol on a line of one word. Perl's file is parsed with a break
    added at its end; COBOL's grammar is not used (line windows). In a process of its own, so that the code
    before the fix fails on the timeout rather than hanging the suite."""
    probe = (
        "from codeloupe.chunk.chunker import chunk_file\n"
        "for path, text, language in (('tool.pl', 'my $x = 1;\\nx# y', 'perl'), ('run.pl', 'é#', 'perl'),\n"
        "                             ('PAY.cbl', 'x\\n', 'cobol'), ('COPY.cpy', '#\\n', 'cobol')):\n"
        "    chunked = chunk_file(path, text, language)\n"
        "    assert ''.join(chunk.text for chunk in chunked.chunks) == text, chunked\n"
        "    print(path, chunked.fallback_reason or 'grammar')\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["tool.pl grammar", "run.pl grammar", "PAY.cbl no grammar for 'cobol'",
                                       "COPY.cpy no grammar for 'cobol'"], run.stdout
