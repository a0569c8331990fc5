"""Freed memory goes back to the operating system (`codeloupe.memory`): on glibc, blocks of a few MB freed
after a build stayed resident (about 100 MB at 200K chunks).

Each check runs in a new interpreter: in the suite's own process earlier tests leave the heap's free lists and
the allocator's settings in whatever state they reached, which decides where a block lands."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_PRELUDE = textwrap.dedent("""
    import ctypes, ctypes.util, sys
    from pathlib import Path
    from codeloupe.memory import map_large_blocks_apart, release_freed_memory
    MB = 1 << 20
    def resident_anonymous_mb():
        fields = dict(l.split(":", 1) for l in Path("/proc/self/status").read_text().splitlines() if ":" in l)
        return int(fields["RssAnon"].split()[0]) / 1024
    if not map_large_blocks_apart():
        print("no-glibc"); sys.exit(0)
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
""")


def _run(body: str) -> list[float]:
    if not Path("/proc/self/status").exists():
        pytest.skip("RSS is read from /proc: Linux only")
    engine = Path(__file__).resolve().parents[1] / "engine"
    out = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(body)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(engine), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    if out.stdout.strip() == "no-glibc":
        pytest.skip("not glibc: the remedies are no-ops there")
    return [float(x) for x in out.stdout.split()]


def test_blocks_freed_inside_the_heap_are_handed_back() -> None:
    """2 MB blocks (under the own-mapping bound, as a build's temporaries are) freed between blocks that stay
    in use: the heap cannot shrink from its top, yet their pages go back."""
    start, before, after = _run("""
        start = resident_anonymous_mb()
        big, small = [], []
        for _ in range(60):
            block = libc.malloc(2 * MB)
            ctypes.memset(block, 1, 2 * MB)  # resident
            big.append(block)
            # Kept in use after each: the freed blocks cannot merge into the heap's top, which free() trims.
            small.append(libc.malloc(256 << 10))
        for block in big:
            libc.free(block)
        before = resident_anonymous_mb()
        release_freed_memory()
        print(start, before, resident_anonymous_mb())
    """)
    assert before - start > 100  # the frees alone kept them resident
    assert before - after > 100


def test_a_block_from_the_own_mapping_bound_up_is_returned_when_freed() -> None:
    resident, after = _run("""
        block = libc.malloc(8 * MB)
        ctypes.memset(block, 1, 8 * MB)
        resident = resident_anonymous_mb()
        libc.free(block)
        print(resident, resident_anonymous_mb())
    """)
    assert resident - after > 7


def test_a_large_build_exempts_what_lives_from_the_collector_and_walks_only_what_is_new() -> None:
    """After a large workspace's build every object alive is frozen (full passes of the collector no longer
    walk a warm snapshot's hundreds of thousands of containers); the next build's pass walks only what was made
    since, so a frozen object dropped in a cycle stays until the frozen objects have doubled (each loaded
    repository on a replica paid a pass over every other one's snapshot); a small workspace's build leaves the
    collector as it was."""
    small, frozen, kept, collected = _run("""
        import gc, weakref
        from codeloupe.memory import SETTLE_MIN_FILES, after_large_build
        class Node:
            pass
        after_large_build(SETTLE_MIN_FILES - 1)
        small = gc.get_freeze_count()
        node = Node()
        node.me = node  # a cycle: reference counting alone never frees it
        gone = weakref.ref(node)
        after_large_build(SETTLE_MIN_FILES)
        frozen = gc.get_freeze_count()
        del node
        gc.collect()  # an ordinary full pass skips frozen objects
        after_large_build(SETTLE_MIN_FILES)  # nothing new: no pass over the frozen ones
        kept = float(gone() is not None)
        grown = [[i] for i in range(2 * frozen)]  # a build that more than doubles what is frozen
        after_large_build(SETTLE_MIN_FILES)
        print(small, frozen, kept, float(gone() is None))
    """)
    assert small == 0 and frozen > 1000 and kept == 1.0 and collected == 1.0


def test_a_snapshot_replaced_again_and_again_while_left_in_a_cycle_is_freed_within_a_few_builds() -> None:
    """A replaced snapshot that a reference cycle keeps alive is frozen garbage: the full pass that runs once
    the frozen objects have doubled frees it, so replacing a snapshot of the size of what else lives frees the
    first one within a few builds and the garbage never outgrows what lived at the last full pass."""
    builds, peak, live = _run("""
        import gc, weakref
        from codeloupe.memory import SETTLE_MIN_FILES, after_large_build
        class Snapshot:
            def __init__(self):
                self.rows = [[i] for i in range(20_000)]
                self.me = self  # left in a cycle when replaced
        held = Snapshot()
        after_large_build(SETTLE_MIN_FILES)
        live = gc.get_freeze_count()
        first = weakref.ref(held)
        builds = peak = 0
        while first() is not None and builds < 40:
            held = Snapshot()
            after_large_build(SETTLE_MIN_FILES)
            builds, peak = builds + 1, max(peak, gc.get_freeze_count())
        print(builds, peak, live)
    """)
    assert builds <= 10 and peak <= 2.5 * live
