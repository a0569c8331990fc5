"""Reading a file a workspace holds, such that the file cannot stall or exhaust the process.

A path in a workspace can name a FIFO (opening it waits for a writer), a device (`/dev/zero` never ends), or a
file of gigabytes. Every read of such a path whose size is not known beforehand goes through `read_head`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

# A workspace file read whole (an answer's lines, a cited span, a hash to verify one, a configuration file its
# graph reads): the most read.
READ_MAX_BYTES = 64 * 1024 * 1024


def read_whole(path: Path) -> bytes:
    """The regular file at `path` whole. Raises OSError as `open_regular` does, and EFBIG past `READ_MAX_BYTES`."""
    data = read_head(path, READ_MAX_BYTES)
    if len(data) > READ_MAX_BYTES:
        raise OSError(errno.EFBIG, f"larger than {READ_MAX_BYTES >> 20} MiB", str(path))
    return data


def read_head(path: Path, limit: int, *, follow_links: bool = True) -> bytes:
    """At most `limit + 1` bytes of the regular file at `path`: one byte more than `limit` says it is longer.
    Raises OSError as `open_regular` does."""
    with open_regular(path, follow_links=follow_links) as fh:
        return fh.read(limit + 1)


def open_regular(path: Path, *, follow_links: bool = True) -> BinaryIO:
    """The regular file at `path`, open for reading. Raises OSError when it is absent or unreadable, is a link
    and `follow_links` is false, or is not a regular file (EINVAL). It is opened without blocking, so a FIFO is
    refused, not waited on."""
    if not follow_links and os.path.islink(path):  # where O_NOFOLLOW is missing; the open below refuses too
        raise OSError(errno.ELOOP, "a link, not followed", str(path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        fh.close()
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fh
