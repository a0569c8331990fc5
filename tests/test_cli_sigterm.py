"""A command's SIGTERM stops it as Ctrl-C does (`codeloupe: stopped by SIGTERM`, status 143), but never inside an
import: there it could leave the interpreter's import lock held, every later import in another thread waiting for
ever, and the command's close with it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

# `codeloupe index`, its work replaced by an import that waits for a line on stdin, then a wait where the stop lands.
COMMAND = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from codeloupe import cli
    from codeloupe.cli import index_cmd

    def run(args):
        import held_import  # noqa: F401
        time.sleep(600)
        return 0

    index_cmd.run = run
    sys.exit(cli.main(["index", "."]))
""")


def test_a_sigterm_during_an_import_stops_the_command_once_the_import_is_done(tmp_path: Path) -> None:
    """SIGTERM raised its stop in the main thread wherever that was, inside an import too (the CLI imports lazily, as
    each command starts): landing in the import system's own locking it left the import lock held (`codeloupe serve`
    hung so). It now waits for the import to end, then stops the command as before: the module imported whole, the
    one-line message, status 143."""
    # The module's last line says it ran to its end: printed after the import, the line could itself be cut by the
    # stop (sent again as soon as the import is done), between the word and its line break.
    (tmp_path / "held_import.py").write_text(
        'import sys\nprint("importing", flush=True)\nsys.stdin.readline()\nprint("imported", flush=True)\n')
    command = subprocess.Popen([sys.executable, "-c", COMMAND, str(tmp_path)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert command.stdout is not None and command.stdout.readline() == "importing\n"
        command.send_signal(signal.SIGTERM)  # it waits in the import's read: the signal comes during the import
        out, err = command.communicate("go on\n", timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
            command.communicate()
    assert (command.returncode, out, err) == (128 + signal.SIGTERM, "imported\n", "codeloupe: stopped by SIGTERM\n")
