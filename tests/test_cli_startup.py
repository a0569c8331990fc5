"""Start-up imports only what the command runs: the openai client (seconds of imports) is for the commands that
call a model, not for `codeloupe search`; the PostgreSQL driver is for a shared index, not for a folder's own
index (neither the CLI nor the language server imports it then)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def imported_modules(*args: str, cache: Path) -> set[str]:
    """The modules a real `python -m codeloupe ...` imported (`-X importtime` names each on stderr)."""
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "codeloupe", *args, "--embed-provider", "none"],
                          capture_output=True, text=True, check=True, env=env)
    return import_names(done.stderr)


def import_names(importtime: str) -> set[str]:
    """The modules `-X importtime`'s report (stderr) names."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines() if line.startswith("import time:")}


def test_search_does_not_import_the_model_client_and_ask_does(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "ledger.py").write_text("def post_ledger_entry(account, amount):\n    return amount\n")
    searched = imported_modules("search", str(tmp_path / "repo"), "ledger entry", cache=tmp_path / "cache")
    assert "codeloupe.search" in searched
    assert not {m for m in searched if m.split(".")[0] in ("openai", "psycopg") or m.startswith("codeloupe.ask")}
    assert "codeloupe.store.postgres" not in searched
    # The same probe sees the client where a command needs a model (no model configured: the bundle answers).
    asked = imported_modules("ask", str(tmp_path / "repo"), "ledger entry", cache=tmp_path / "cache")
    assert "openai" in asked and "codeloupe.ask.run" in asked


def test_the_language_server_starts_without_the_postgresql_driver() -> None:
    probe = "import sys, codeloupe_lsp.server; print(sorted(m for m in sys.modules if m.startswith('psycopg')))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_language_server_starts_without_the_sparse_matrices_or_the_graph_builder() -> None:
    """What the server imports before it answers `initialize` holds back its first progress (issue 15: within a
    second at 40K files): scipy is for the lexical index, built or loaded after the walk starts, and the graph's
    building and querying modules are for the graph, refreshed once the index is; the API's graph types and
    errors come without them (docs/measurements.md, "first progress")."""
    probe = ("import sys, codeloupe_lsp.server; codeloupe_lsp.server.build_server(); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'"
             " or m in ('codeloupe.graph.build', 'codeloupe.graph.query')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    # What the API names of the graph is there as before, its functions at their first use.
    probe = ("from codeloupe.graph import NotInGraph, ensure_edges, graph_map; from codeloupe.graph import query; "
             "print(query.NotInGraph is NotInGraph, ensure_edges.__module__, graph_map.__module__)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "codeloupe.graph.build", "codeloupe.graph.query"]


def test_the_servers_start_without_the_model_client() -> None:
    """The language server with every feature registered, the MCP server and the HTTP app import no model
    client (~0.7 s) until an ask runs: their ask handlers name the ask's types for type checking only."""
    probe = ("import sys, codeloupe_lsp.server, codeloupe_mcp.server, codeloupe_web.app; "
             "codeloupe_lsp.server.build_server(); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'openai' or m.startswith('codeloupe.ask')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_worker_help_states_the_defaults_the_worker_uses() -> None:
    """`codeloupe worker --help` writes its defaults as literals (reading them would import the PostgreSQL driver
    at every start); they must say what the worker then does."""
    from codeloupe.cli import build_parser
    from codeloupe.shared_index import GLOBAL_INDEX_MIN_VECTORS, LEASE_S

    worker = build_parser()._subparsers._group_actions[0].choices["worker"]
    helps = {action.dest: action.help for action in worker._actions}
    assert f"(default {LEASE_S:g})" in helps["lease_s"]
    assert f"holds {GLOBAL_INDEX_MIN_VECTORS:,} vectors" in helps["no_global_index"]


def test_help_and_argument_errors_do_not_import_the_engine(tmp_path: Path) -> None:
    """`codeloupe --help`, a command's `--help` and a mistyped command answer from the parser alone: building it
    imported the engine (numpy, scipy, tree-sitter: about a second of CPU) for a usage line."""
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path)}
    for args, status in ((["--help"], 0), (["search", "--help"], 0), (["search"], 2)):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "codeloupe", *args],
                              capture_output=True, text=True, env=env)
        assert done.returncode == status, done.stderr[-2000:]
        imported = import_names(done.stderr)
        assert "codeloupe.cli.common" in imported  # the probe sees the modules the parser is built from
        assert not {m for m in imported if m.split(".")[0] == "numpy" or m == "codeloupe.api"}, args
