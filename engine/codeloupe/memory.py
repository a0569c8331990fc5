"""Giving memory the engine freed back to the operating system, and keeping the collector off what lives long.

glibc's allocator keeps freed blocks for reuse: at 200K chunks the snapshot's, the graph's and the summary
lane's build temporaries left about 100 MB resident that nothing used (measured: the warm server's RSS went from
1,255 to 1,160 MB when the freed memory was handed back). Two remedies, both no-ops where the C library is not
glibc (macOS, musl): large blocks get their own mappings, returned the moment they are freed, and after each
large build the heap's free pages are handed back (`malloc_trim`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc

# Blocks from 4 MiB up are mapped on their own (glibc raises this bound up to 32 MiB as programs free large
# blocks, so a build's temporaries of a few MB stayed in the heap). A query's arrays at 200K chunks (0.8-1.6 MB)
# stay below it, so queries reuse heap blocks instead of mapping fresh zeroed pages each time.
_OWN_MAPPING_BYTES = 4 << 20
# Setting the bound above stops glibc's matching rise of the free space it keeps at the heap's top (from 128 KB
# up to 64 MB): a query's freed arrays at the top were then handed back and faulted in again by the next query.
# The builds' memory is handed back by `release_freed_memory` instead.
_KEPT_AT_TOP_BYTES = 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if libc is None or not hasattr(libc, "malloc_trim") or not hasattr(libc, "mallopt"):
        return None
    return libc


@functools.cache
def map_large_blocks_apart() -> bool:
    """Make blocks of `_OWN_MAPPING_BYTES` and more separate mappings, once per process; False where the C
    library has no such setting."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, _OWN_MAPPING_BYTES)
                and libc.mallopt(_M_TRIM_THRESHOLD, _KEPT_AT_TOP_BYTES))


def release_freed_memory() -> None:
    """Hand the heap's free pages back after a large build (milliseconds; never on a query's hot path)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


# From this many files a workspace's builds settle the collector (below that a full pass of the collector costs
# a query little, and a small workspace rebuilds its graph after every save).
SETTLE_MIN_FILES = 2000


# How many objects were frozen right after the collector's last pass over every object (0: none yet).
_frozen_after_full_pass = 0


def after_large_build(files: int) -> None:
    """What a build over `files` files (a snapshot, the graph, a lane's index) leaves behind, settled: the
    heap's free pages handed back and, for a large workspace, cyclic garbage collected and every object alive
    now exempted from the collector's later passes. Never on a query's hot path.

    A warm workspace holds a few hundred thousand container objects (per-file row lists, the graph's maps);
    CPython's collector walks them all whenever enough new objects have survived since its last full pass,
    which a few dozen queries' bundles do: at 200K chunks 2-3 of 68 queries each paid 165-260 ms for a pass
    that found nothing of the snapshot to free (with the dense product on two cores, the warm mean went
    68.0 -> 54.7 ms: bench/search_scale.py --interleave, README).

    A build's pass walks only what is not frozen yet, the objects made since the last build: a process holding
    several repositories' snapshots (an every-repository query on a replica loads up to 8) paid a pass over all
    of them for each one it loaded (~0.5 s per 2,510-file repository, docs/org-scale-measurements.md). Frozen
    objects are still freed by reference counting; one left in a cycle (a replaced snapshot) is collected by
    the full pass that runs once the frozen objects have doubled since the last one, so such garbage is never
    kept for good and never outgrows what lived at that pass."""
    global _frozen_after_full_pass
    if files >= SETTLE_MIN_FILES:
        gc.collect()
        gc.freeze()
        if gc.get_freeze_count() >= 2 * _frozen_after_full_pass:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            _frozen_after_full_pass = gc.get_freeze_count()
    release_freed_memory()
