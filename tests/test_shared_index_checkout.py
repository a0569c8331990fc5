"""What a worker of the shared index reads from a checkout to resolve its graph (go.mod, tsconfig.json, read by
name whether indexed or not) is read as a workspace's files are (rule 6): inside the folder, a regular file, bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codeloupe.shared_index import _Checkout

MARKER = "module exfiltrate_me_marker\n"


def _checkout(root: Path) -> _Checkout:
    return _Checkout(root, store=None)  # type: ignore[arg-type]  # reading a file needs no index


def test_a_configuration_file_that_links_out_of_the_checkout_is_not_read(tmp_path: Path) -> None:
    """A go.mod that is a link to a file outside the checkout was read there: a key of the worker's user, or
    /dev/zero read until memory ran out."""
    root = tmp_path / "repo"
    (root / "cfg").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text(MARKER)
    (root / "go.mod").symlink_to(tmp_path / "secret.txt")
    (root / "outside").symlink_to(tmp_path)
    (root / "loop").symlink_to("loop")
    (root / "cfg" / "tsconfig.json").write_text('{"compilerOptions": {}}\n')
    checkout = _checkout(root)
    for linked in ("go.mod", "outside/secret.txt", "loop"):
        with pytest.raises(OSError, match="not a path inside"):
            checkout.read_bytes(linked)
    assert checkout.read_bytes("cfg/tsconfig.json") == b'{"compilerOptions": {}}\n'


def test_a_configuration_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A go.mod that is a FIFO held the worker reading it for ever (no writer ever comes)."""
    root = tmp_path / "repo"
    root.mkdir()
    os.mkfifo(root / "go.mod")
    with pytest.raises(OSError, match="not a regular file"):
        _checkout(root).read_bytes("go.mod")
