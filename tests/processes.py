"""Process helpers for the tests that kill a parent or stop its work and watch its workers (Linux /proc), and a
workspace whose first index runs in such workers."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from codeloupe.parallel import KEPT_WORKER_NAME


def children_of(pid: int) -> list[int]:
    """The child processes of `pid` but multiprocessing's resource tracker (a helper a spawned pool starts
    once per process, not a worker)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"resource_tracker" not in cmdline:
                found.append(int(entry))
    return found


def parse_workers(pids: list[int]) -> set[int]:
    """Those of `pids` that are kept parse workers (`codeloupe.parallel`'s, named so): one per process, kept for the
    files after, whichever workspace closes."""
    found = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_bytes().strip() == KEPT_WORKER_NAME:
                found.add(pid)
        except OSError:  # ended meanwhile
            continue
    return found


def children_but_parse_workers(pid: int) -> list[int]:
    """The child processes of `pid` (`children_of`) but its kept parse workers: the tests' own process keeps a spawned
    one from test to test (conftest's `no_strategy_worker_left`), none of the workers a test counts there."""
    children = children_of(pid)
    kept = parse_workers(children)
    return [child for child in children if child not in kept]


def children_running(pid: int, module: str) -> list[int]:
    """The child processes of `pid` that run `module` (`python -m module ...`)."""
    found = []
    for child in children_of(pid):
        try:
            if module.encode() in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0"):
                found.append(child)
        except OSError:  # ended meanwhile
            continue
    return found


def in_group(pgid: int) -> list[int]:
    """The live processes (not zombies) of process group `pgid`: a command started in a session of its own, its
    workers, the resource tracker and whatever those started, wherever they were reparented."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                state, _parent, group = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[:3]
            except OSError:
                continue
            if int(group) == pgid and state != "Z":
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has exited; only its parent's reaping is left


def assert_workers_die_with_their_parent(parent: subprocess.Popen, find_workers: Callable[[], list[int]]) -> None:
    """Kill `parent` with SIGKILL once `find_workers()` names its workers, and assert that they all exit soon
    after; on failure, never leave behind the parent or the orphans the caller is testing for."""
    workers: list[int] = []
    try:
        workers = find_workers()
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in workers):
            assert time.monotonic() < deadline, f"workers outlived their parent: {workers}"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def _without_root_read_override() -> None:
    """In the child before exec: drop root's right to read any directory (CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH from the bounding set), so chmod 0 stops it as it stops a user."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2
    for cap in (cap_dac_override, cap_dac_read_search):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def unprivileged() -> dict[str, object]:
    """subprocess.run's arguments for a child that a chmod 0 stops, as it stops a user, even when the tests run
    as root."""
    return {"preexec_fn": _without_root_read_override} if os.geteuid() == 0 else {}


def many_small_files(root: Path, files: int = 1500) -> Path:
    """A workspace whose first index takes seconds (tens on a loaded machine): chunked by a worker pool."""
    for i in range(files):
        folder = root / f"pkg{i % 30}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i}.py").write_text("".join(f"def step_{i}_{j}(value):\n    total = value + {j}\n"
                                                   f"    return total * {i}\n\n\n" for j in range(25)))
    return root


def at_a_terminal(start: Callable[[int], subprocess.Popen], timeout: float = 120) -> tuple[int, bytes]:
    """What a process writes where a person would read it: `start(fd)` starts it with `fd`, a pseudo-terminal's end,
    as its stdout (and stderr, where it passes it on); its exit status and every byte it wrote there."""
    import pty

    main, child = pty.openpty()
    proc = start(child)
    os.close(child)
    seen = b""
    while True:
        try:
            read = os.read(main, 65536)
        except OSError:  # the terminal's other end closed: the command is done
            break
        if not read:
            break
        seen += read
    os.close(main)
    return proc.wait(timeout=timeout), seen


# A grammar that fails on one file: the grammar pack's parsers, wrapped, crash their worker on that file's text
# (SIGSEGV, as tree-sitter-bash's scanner did on `{` then a character past U+FFFF: tree-sitter/tree-sitter-bash#337,
# in about half the processes, by where their memory lay) or never end there (a loop in C that only a kill stops, as
# tree-sitter-cobol's on "x\n"); in the indexing process they end it at once, saying so, where the real grammar
# would crash or hang it. Top level, so that spawned workers wrap theirs too; `with_short_timeouts()` gives the
# index's maps 5 s.
FAILING_GRAMMAR = textwrap.dedent("""
    import functools, os, signal, sys, time
    from pathlib import Path

    import tree_sitter_language_pack as pack

    import codeloupe.graph.build as build
    import codeloupe.index as index
    from codeloupe import parallel

    INDEXING = os.environ.setdefault("INDEXING_PID", str(os.getpid()))  # a spawned worker's parent set it
    FAILURE = sys.argv[-1]  # crash | hang | allocate | fixed (it parses the file): the script's last argument
    REAL_GET_PARSER = pack.get_parser
    if FAILURE == "allocate":  # a cap its workers start under (they are given it) that the file's parse goes past
        parallel.PARSE_MEMORY_BYTES = 256 * 2**20

    class FailingParser:
        def __init__(self, real):
            self.real, self.language = real, real.language

        def parse(self, source):
            if b"fails its grammar" in source and FAILURE != "fixed":
                if str(os.getpid()) == INDEXING:
                    print("parsed in the indexing process", flush=True)
                    os._exit(3)
                if FAILURE == "crash":
                    os.kill(os.getpid(), signal.SIGSEGV)
                if FAILURE == "allocate":  # past the cap: MemoryError (with none, it takes it and parses)
                    bytearray(parallel.PARSE_MEMORY_BYTES)
                    return self.real.parse(source)
                time.sleep(600)
            return self.real.parse(source)

    pack.get_parser = lambda language: FailingParser(REAL_GET_PARSER(language))

    def with_short_timeouts():
        index.map_in_workers = build.map_in_workers = functools.partial(parallel.map_in_workers, timeout_s=5)
""")
