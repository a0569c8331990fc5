"""Freed memory goes back to the operating system (`codeloupe.memory`): on glibc, blocks of a few MB freed
after a build stayed resident (about 100 MB at 200K chunks)."""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

import pytest

from codeloupe.memory import map_large_blocks_apart, release_freed_memory

_MB = 1 << 20


def _resident_anonymous_mb() -> float:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["RssAnon"].split()[0]) / 1024


def _glibc() -> ctypes.CDLL:
    if not Path("/proc/self/status").exists() or not map_large_blocks_apart():
        pytest.skip("not Linux with glibc: the remedies are no-ops there")
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def test_blocks_freed_inside_the_heap_are_handed_back() -> None:
    """2 MB blocks (under the own-mapping bound, as a build's temporaries are) freed between blocks that stay
    in use: the heap cannot shrink from its top, yet their pages go back."""
    libc = _glibc()
    start = _resident_anonymous_mb()
    big, small = [], []
    for _ in range(60):
        block = libc.malloc(2 * _MB)
        ctypes.memset(block, 1, 2 * _MB)  # resident
        big.append(block)
        # Kept in use after each: the freed blocks cannot merge into the heap's top, which free() trims.
        # 256 KB: no free list of the heap's small sizes serves it, so it lands right after its block.
        small.append(libc.malloc(256 << 10))
    for block in big:
        libc.free(block)
    before = _resident_anonymous_mb()
    assert before - start > 100  # the frees alone kept them resident
    release_freed_memory()
    after = _resident_anonymous_mb()
    for block in small:
        libc.free(block)
    assert before - after > 100


def test_a_block_from_the_own_mapping_bound_up_is_returned_when_freed() -> None:
    libc = _glibc()
    keep = libc.malloc(64)
    block = libc.malloc(8 * _MB)
    ctypes.memset(block, 1, 8 * _MB)
    libc.free(keep)  # released before the measure: nothing of the heap's top moves
    resident = _resident_anonymous_mb()
    libc.free(block)
    assert resident - _resident_anonymous_mb() > 7
