"""The real CLI in a subprocess on a workspace whose names hold control and bidi characters: the lines naming the
workspace, a folder inside it or a file type show them escaped, as every line naming a file does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from codeloupe.types import CONTROL_CHARACTERS, one_line

# A folder named by a repository (a clone takes its name): a bidi override, a terminal's retitle and clear.
HOSTILE = "repo\u202egnp.py\x1b]0;owned\x07\x1b[2J"


def codeloupe(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "codeloupe", *args, "--embed-provider", "none"],
                          capture_output=True, text=True, check=True, env=env)


def test_index_tour_scan_and_a_sub_folder_show_the_names_escaped(tmp_path: Path) -> None:
    """`index` (the folder and the index file named after it), `tour`, `scan` (the folder and an extension no
    chunker covers) and the notice of a command run from a folder inside the workspace printed them raw."""
    root = tmp_path / HOSTILE
    inner = root / f"lib{HOSTILE}"
    inner.mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (inner / "main.py").write_text("def main():\n    return 1\n\n\nif __name__ == '__main__':\n    main()\n")
    for n in range(3):
        (root / f"notes{n}.q\x1b[31m").write_text("plain notes\n")
    cache = tmp_path / "cache"
    runs = {command: codeloupe(*args, cache=cache) for command, args in (
        ("index", ("index", str(root))), ("tour", ("tour", str(root))), ("scan", ("scan", str(root))),
        ("stats from a sub-folder", ("stats", str(inner))))}
    for command, run in runs.items():
        for shown in (run.stdout, run.stderr):
            assert not CONTROL_CHARACTERS.search(shown), (command, shown)
    assert f"indexed {one_line(str(root))}" in runs["index"].stdout.splitlines()
    assert f"Where to start reading {one_line(str(root))}" in runs["tour"].stdout
    assert f"{one_line(str(root))}: " in runs["scan"].stdout and ".q\\x1b[31m" in runs["scan"].stdout
    assert f"lib{one_line(HOSTILE)} is a folder inside it" in runs["stats from a sub-folder"].stderr


def test_a_warning_quoting_the_model_s_error_shows_it_escaped(tmp_path: Path) -> None:
    """`index` printed an embedding error raw on stderr (every other message of the CLI is escaped): the error
    names what the model was given, a folder here, and an endpoint's error its answer's words."""
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'onnx_model_dir = "{tmp_path / "model"}\\u001b[2J\\u202e"\n', encoding="utf-8")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("def a():\n    return 1\n")
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache"), "CODELOUPE_CONFIG_DIR": str(tmp_path / "config")}
    run = subprocess.run([sys.executable, "-m", "codeloupe", "index", str(root), "--embed-provider", "onnx"],
                         capture_output=True, text=True, check=True, env=env)
    [warning] = [line for line in run.stderr.splitlines() if "no vectors computed" in line]
    assert not CONTROL_CHARACTERS.search(warning), warning
    assert one_line(f"{tmp_path / 'model'}\x1b[2J\u202e") in warning
