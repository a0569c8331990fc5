"""A full disk for tests: the cache dir on a small disk of its own (conftest's `cache_disk`), filled to the last byte.

The disk is a real one: a 3 MB tmpfs mounted over the cache dir (the tests run as root in CI). Without the right
to mount, the cache dir is made read-only instead, which fails the same writes with a different errno."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


def can_mount(at: Path, size: str = "3m") -> bool:
    """Whether a tmpfs of `size` could be mounted at `at` (it then is)."""
    if os.geteuid() != 0:
        return False
    probe = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(at)], capture_output=True)
    return probe.returncode == 0


@contextlib.contextmanager
def disk_full(cache: Path) -> Iterator[None]:
    """Fill the disk under `cache` to the last byte (or, without a disk of our own, make it read-only)."""
    if os.path.ismount(cache):
        filler = cache / "filler"
        # Unbuffered: a buffered file keeps what the disk refused and fails again when it is closed.
        with filler.open("wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 65536)
        with filler.open("ab", buffering=0) as fh, contextlib.suppress(OSError):  # the last partial block
            while True:
                fh.write(b"\0")
        try:
            yield
        finally:
            filler.unlink()
        return
    modes = {p: p.stat().st_mode for p in [cache, *cache.rglob("*")]}
    for path in modes:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
