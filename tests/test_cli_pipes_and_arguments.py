"""What a user meets at the shell: output piped into a reader that stops early (`| head`, a pager quit) ends the
command quietly, and a mistyped number in a server's arguments is one line of usage error, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codeloupe.api import MAX_TOUR_ENTRY_POINTS, MAX_TOUR_NAMES


def _ends_quietly_after_one_line(tmp_path: Path, *args: str) -> None:
    """`codeloupe ARGS | head -1`: one line read, then the pipe closed; the command ends with 141 (SIGPIPE's
    status, as a shell tool killed by it), without a traceback."""
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "codeloupe", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        status = proc.wait(timeout=120)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert status == 141


def test_a_reader_that_stops_early_ends_the_command_without_a_traceback(tmp_path: Path) -> None:
    many = tmp_path / "many.py"
    many.write_text("".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(20000)), encoding="utf-8")
    _ends_quietly_after_one_line(tmp_path, "chunks", str(many), "--chunk-budget", "100")


def test_a_reader_that_stops_early_ends_a_search_as_it_ends_any_other_command(tmp_path: Path) -> None:
    """The bundle is printed through rich, whose own handling of a closed pipe exited with status 1, which is
    `locate`'s "nothing found", and not the 141 of every other command (and of a shell tool killed by SIGPIPE)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.py").write_text("".join(f"def hello_{i}():\n    return 'hello {i}'\n\n\n" for i in range(3000)),
                                        encoding="utf-8")
    _ends_quietly_after_one_line(tmp_path, "search", str(workspace), "hello", "--embed-provider", "none")


def test_a_piped_search_keeps_each_related_file_on_one_line(tmp_path: Path) -> None:
    """Piped, rich wrapped at 80 columns: a file's why (and a RELATED one's `(via graph)`), or a chunk's breadcrumb,
    went to a line of its own, which `grep PATH` or `grep 'via graph'` then missed."""
    workspace = tmp_path / "ws"
    (workspace / "app").mkdir(parents=True)
    for i in range(6):
        (workspace / "app" / f"a_rather_long_module_name_for_the_request_payload_{i}.py").write_text(
            f"def handle_request_payload_{i}(payload):\n    return 'request payload {i}'\n", encoding="utf-8")
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(workspace), "request payload",
                           "--embed-provider", "none"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    ranked = [line for line in done.stdout.splitlines() if line.lstrip().split(". ", 1)[0].isdigit()]
    assert len(ranked) == 6 and all("bm25" in line for line in ranked), done.stdout
    spans = [line for line in done.stdout.splitlines() if line.startswith("app/")]
    assert spans and all(line.endswith("(payload)") for line in spans), done.stdout  # path:lines  breadcrumb


def test_a_dense_lane_switched_off_is_shown_off_not_pending(tmp_path: Path) -> None:
    """With `--embed-provider none` the lanes line said `dense (not ready)`, as if vectors were on their way."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "app.py").write_text("def hello():\n    return 'hello'\n", encoding="utf-8")
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(tmp_path / "ws"), "hello",
                           "--embed-provider", "none"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "lanes: dense (off), lexical" in done.stdout.splitlines()[0], done.stdout


def _usage_error(command: list[str], tmp_path: Path) -> str:
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(("flag", "value", "problem"), [
    ("--port", "99999", "expected a port number 0..65535, got '99999'"),
    ("--port", "-1", "expected a port number"),
    ("--rate", "0", "above 0"),
    ("--rate", "-5", "above 0"),
    ("--rate", "nan", "above 0"),
])
def test_serve_refuses_a_port_or_rate_it_cannot_use(tmp_path: Path, flag: str, value: str, problem: str) -> None:
    last = _usage_error([sys.executable, "-m", "codeloupe", "serve", str(tmp_path), f"{flag}={value}"], tmp_path)
    assert problem in last


@pytest.mark.parametrize(("flag", "value", "problem"), [
    ("--lease-s", "0", "--lease-s: expected a number of seconds above 0, got '0'"),
    ("--lease-s", "-5", "above 0"),
    ("--lease-s", "inf", "above 0"),
    ("--exit-when-idle", "-1", "--exit-when-idle: expected a number of seconds of at least 0, got '-1'"),
])
def test_worker_refuses_a_lease_or_idle_wait_it_cannot_use(tmp_path: Path, flag: str, value: str, problem: str) -> None:
    """A --lease-s of 0 was taken for the default without a word, and a negative one made every claim expire as it
    was made (each batch claimed again by the next worker while still being written)."""
    last = _usage_error([sys.executable, "-m", "codeloupe", "worker", "--store", "postgresql://127.0.0.1:9/none",
                         f"{flag}={value}"], tmp_path)
    assert problem in last


def test_serve_names_a_file_given_for_a_workspace_folder(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\n", encoding="utf-8")
    last = _usage_error([sys.executable, "-m", "codeloupe", "serve", str(tmp_path / "app.py"), "--port", "0"],
                        tmp_path)
    assert last.endswith("app.py: is a file, not a directory (pass the workspace folder)")


@pytest.mark.parametrize(("args", "problem"), [
    (["--tcp", "127.0.0.1:99999"], "expected HOST:PORT"),
    (["--log-level", "LOUD"], "invalid choice: 'LOUD'"),
])
def test_the_language_server_refuses_a_port_or_log_level_it_cannot_use(tmp_path: Path, args: list[str],
                                                                        problem: str) -> None:
    assert problem in _usage_error([sys.executable, "-m", "codeloupe_lsp", *args], tmp_path)


@pytest.mark.parametrize("command", [["search", ".", "hello", "--limit", "0"], ["locate", ".", "hello", "--limit", "-3"],
                                     ["related", ".", "app.py", "--limit", "zero"]])
def test_a_count_below_one_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    """`--limit 0` or below was taken as 1 (search) or as nothing (tour, locate) without a word (tour's counts,
    bounded on both sides, say their range: test_a_tour_count_past_the_servers_bound_is_a_usage_error)."""
    (tmp_path / "app.py").write_text("def hello():\n    return 1\n", encoding="utf-8")
    last = _usage_error([sys.executable, "-m", "codeloupe", *command], tmp_path)
    assert "--limit: expected a whole number of at least 1" in last


@pytest.mark.parametrize(("command", "said"), [(["search"], "the query is empty"),
                                              (["ask"], "the question is empty")])
def test_a_query_of_nul_and_whitespace_read_from_stdin_is_empty(tmp_path: Path, command: list[str],
                                                                said: str) -> None:
    """A query of NUL bytes passed the blank check (`str.strip` keeps a NUL) and was searched; the rule is now
    every surface's (`codeloupe.types.is_blank`)."""
    (tmp_path / "app.py").write_text("def hello():\n    return 1\n", encoding="utf-8")
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "codeloupe", *command, ".", "-"], input="\x00 \x00\n",
                          capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == f"codeloupe: {said}", done.stderr


@pytest.mark.parametrize(("flag", "most"), [("--entry-points", MAX_TOUR_ENTRY_POINTS), ("--limit", MAX_TOUR_NAMES)])
def test_a_tour_count_past_the_servers_bound_is_a_usage_error(tmp_path: Path, flag: str, most: int) -> None:
    """`tour --entry-points 1000` listed them all, where /v1/tour, MCP and the language server refuse more than 500
    (and more than 50 names); the bound is the same constant everywhere, and the bound itself is taken. A count
    below 1 names the same range (it said "of at least 1", and the user's next try, 100, was refused again)."""
    (tmp_path / "app.py").write_text("if __name__ == '__main__':\n    print(1)\n", encoding="utf-8")
    for value in (0, -1, "x", most + 1, 1000):
        last = _usage_error([sys.executable, "-m", "codeloupe", "tour", ".", flag, str(value)], tmp_path)
        assert last.endswith(f"{flag}: expected a whole number from 1 to {most}, got '{value}'"), last
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "codeloupe", "tour", ".", flag, str(most), "--json",
                           "--embed-provider", "none"], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["entry_points"][0]["path"] == "app.py", done.stderr


def test_a_flag_out_of_range_names_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("def hello():\n    return 1\n", encoding="utf-8")
    last = _usage_error([sys.executable, "-m", "codeloupe", "search", ".", "hello", "--chunk-budget", "5"], tmp_path)
    assert last == "codeloupe: setting 'chunk_budget' from the command line: 5 is outside 100..100000"


@pytest.mark.parametrize("command", [["tour", "http://127.0.0.1:9/tiny.tar.gz"], ["stats", "owner/repo@main"]])
def test_a_command_that_reads_a_folder_says_so_of_a_remote_repository(tmp_path: Path, command: list[str]) -> None:
    """`tour http://host/x.tar.gz` said 'http:/host/x.tar.gz: no such directory' (the URL read as a path)."""
    last = _usage_error([sys.executable, "-m", "codeloupe", *command], tmp_path)
    assert last == (f"codeloupe: {command[1]}: a remote repository; this command reads a folder (search, ask, "
                    "graph and index take a remote repository)")


def test_a_remote_repository_named_without_its_ref_is_told_how_to_name_it(tmp_path: Path) -> None:
    """`codeloupe index pallets/click` said only 'pallets/click: no such directory'."""
    last = _usage_error([sys.executable, "-m", "codeloupe", "index", "pallets/click"], tmp_path)
    assert last == ("codeloupe: pallets/click: no such directory (a remote repository is named with its ref: "
                    "pallets/click@REF, e.g. pallets/click@main)")
    last = _usage_error([sys.executable, "-m", "codeloupe", "tour", "pallets/click"], tmp_path)
    assert last == "codeloupe: pallets/click: no such directory"  # tour reads folders only


def test_a_search_shows_the_code_of_as_many_files_as_its_limit(tmp_path: Path) -> None:
    """`--limit N` is how many files come with their code: only the JSON's changed with it, and `--limit 3` and
    `--limit 12` printed the same lines. The files past CORE within the limit now show their best chunk under their
    map line, and every candidate is still listed (rule 2)."""
    workspace = tmp_path / "ws"
    (workspace / "ledger").mkdir(parents=True)
    for i in range(9):
        (workspace / "ledger" / f"book_{i:02}.py").write_text(f"def ledger_total_{i}(rows):\n    return sum(rows) * {i}\n")
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}

    def search(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(workspace), "ledger total",
                               "--embed-provider", "none", *args], capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    bundle = json.loads(search("--json", "--limit", "5"))
    with_code = [hit["path"] for hit in bundle["core"] + bundle["related"] if hit["chunks"]]
    assert len(with_code) == 5 and len(bundle["core"]) < 5
    for limit in (3, 5, 9):
        shown = search("--limit", str(limit)).splitlines()
        code = [line.split("*")[1].strip() for line in shown if "return sum(rows) *" in line]
        assert code == [str(i) for i in range(limit)], shown
        assert len([line for line in shown if line.lstrip().split(". ", 1)[0].isdigit()]) == 9
    fifth = search("--limit", "5").splitlines()
    at = fifth.index(next(line for line in fifth if line.lstrip().startswith("5. ledger/book_04.py:1-2")))
    assert fifth[at + 1:at + 3] == ["1  def ledger_total_4(rows):", "2      return sum(rows) * 4"]


def test_a_related_files_chunk_shown_around_its_best_line_says_how_many_lines_were_cut(tmp_path: Path) -> None:
    """Past CORE, a file within --limit shows its best chunk only around its best-matching line: the lines cut
    above and below that window were left out without a word, as if the chunk ended there."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for i in range(3):
        (workspace / f"refund_{i}.py").write_text(f"def refund_payment_{i}(order):\n    return 'refund payment {i}'\n",
                                                   encoding="utf-8")
    steps = [f"    step_{j} = order.value + {j}\n" for j in range(60)]
    (workspace / "long.py").write_text("def process(order):\n" + "".join(steps[:30]) + "    note = 'refund'\n"
                                       + "".join(steps[30:]) + "    return order\n", encoding="utf-8")
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(workspace), "refund payment",
                           "--embed-provider", "none"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    shown = done.stdout.split("long.py:1-63", 1)[1].splitlines()[1:]
    assert shown[0] == "... 16 lines above, from line 1", done.stdout
    assert shown[1].split()[0] == "17" and shown[31].split()[0] == "47", done.stdout  # 15 either side of line 32
    assert shown[32] == "... 16 more lines, to line 63", done.stdout
    whole = done.stdout.split("refund_2.py:1-2", 1)[1].splitlines()[1:4]
    assert [line.split()[0] for line in whole[:2]] == ["1", "2"] and not whole[2].startswith("..."), done.stdout


def _search_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "render.py").write_text("def render_template(name):\n    return cached_template(name)\n\n\n"
                                         "def add_dry_run(parser):\n    parser.add_argument('--dry-run')\n",
                                         encoding="utf-8")
    (workspace / "GUIDE.md").write_text("# Templates\n\nTemplate caching keeps each rendered page.\n",
                                        encoding="utf-8")
    return workspace


def test_a_search_with_only_a_query_says_how_to_name_this_folder(tmp_path: Path) -> None:
    """`codeloupe search "where is the cache"` in a checkout said 'name a workspace PATH, or the shared index's
    repositories': the query was taken and the folder left out, with no word of how to name the one the user is in."""
    last = _usage_error([sys.executable, "-m", "codeloupe", "search", "where is the cache"], tmp_path)
    assert last == ("codeloupe: name the workspace to search: codeloupe search . 'where is the cache' for this "
                    "folder; or the shared index's repositories: --repo A,B or --all")


def _codeloupe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "codeloupe", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)


@pytest.mark.parametrize("args", [["PATH", "--no-embed", "template caching"],
                                  ["--ignore", "*.txt", "PATH", "--ignore", "*.log", "template caching", "--limit", "3"],
                                  ["--docs", "PATH", "--no-embed", "template caching"]])
def test_a_search_takes_its_options_between_its_path_and_its_query(tmp_path: Path, args: list[str]) -> None:
    """`codeloupe search PATH --no-embed "query"` said 'unrecognized arguments: query': argparse took the lone PATH
    before an option for the query (PATH may be left out), as `git` or `rg` never would."""
    workspace = _search_workspace(tmp_path)
    done = _codeloupe(tmp_path, "search", "--embed-provider", "none",
                      *(str(workspace) if arg == "PATH" else arg for arg in args))
    assert done.returncode == 0, done.stderr
    assert ("GUIDE.md" if "--docs" in args else "render.py") in done.stdout, done.stdout


@pytest.mark.parametrize("args", [["PATH", "--", "--dry-run"], ["--", "PATH", "--dry-run"],
                                  ["--no-embed", "--", "PATH", "--dry-run"], ["PATH", "--no-embed", "--", "--dry-run"]])
def test_a_query_that_starts_with_a_dash_follows_a_double_dash(tmp_path: Path, args: list[str]) -> None:
    """`--` ends the options wherever it comes, before PATH as after it: the strings past it are the query even
    when they look like an option."""
    workspace = _search_workspace(tmp_path)
    done = _codeloupe(tmp_path, "search", "--embed-provider", "none", "--json",
                      *(str(workspace) if arg == "PATH" else arg for arg in args))
    assert done.returncode == 0, done.stderr
    bundle = json.loads(done.stdout)
    assert bundle["query"] == "--dry-run" and bundle["core"][0]["path"] == "render.py", bundle


def test_serve_takes_its_options_between_its_workspace_folders(tmp_path: Path) -> None:
    """`codeloupe serve A --port 0 B` said 'unrecognized arguments: B'; B is now the second folder (here a file,
    which serve names)."""
    (tmp_path / "app.py").write_text("x = 1\n", encoding="utf-8")
    last = _usage_error([sys.executable, "-m", "codeloupe", "serve", str(tmp_path), "--port", "0",
                         str(tmp_path / "app.py")], tmp_path)
    assert last.endswith("app.py: is a file, not a directory (pass the workspace folder)")


def test_serve_takes_repositories_as_search_does_comma_separated_or_repeated() -> None:
    """`serve --repo A,B` was taken for one repository named "A,B" (and refused as not in the shared index), where
    `search --repo A,B` searches both."""
    from codeloupe.cli import build_parser

    args = build_parser().parse_args(["serve", "--repo", "billing, auth", "--repo", "web", "--repo", "a,,"])
    assert args.repo == ["billing", "auth", "web", "a"]


@pytest.mark.parametrize("command", [["admin", "repos"], ["worker", "--exit-when-idle", "0"], ["serve", "--repo", "a"]])
def test_a_command_on_the_shared_index_alone_names_where_it_takes_one_from(tmp_path: Path,
                                                                          command: list[str]) -> None:
    """`admin` and `worker` took the database from `--store` only (argparse's "the following arguments are
    required"), where `index` and `search` take it from the store_url setting too."""
    last = _usage_error([sys.executable, "-m", "codeloupe", *command], tmp_path)
    assert last == (f"codeloupe: {command[0]} works on the shared index: --store postgresql://... (or the"
                    " store_url setting: CODELOUPE_STORE_URL or your config.toml)")


def test_the_command_line_says_its_version_as_the_language_server_does(tmp_path: Path) -> None:
    """`codeloupe --version` was 'the following arguments are required: COMMAND' (`codeloupe-lsp --version` answered);
    both now name the installed version, as MCP's server info and the HTTP API's do."""
    from importlib.metadata import version

    installed = version("codeloupe")
    cli = subprocess.run([sys.executable, "-m", "codeloupe", "--version"], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    lsp = subprocess.run([sys.executable, "-m", "codeloupe_lsp", "--version"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert (cli.returncode, cli.stdout.strip()) == (0, f"codeloupe {installed}")
    assert (lsp.returncode, lsp.stdout.strip()) == (0, f"codeloupe-lsp {installed}")


def test_a_blank_scope_is_refused_naming_the_option(tmp_path: Path) -> None:
    """`search --scope "  "` searched the whole workspace, where MCP, HTTP and now the language server refuse a
    blank scope: it is refused (exit 2) naming `--scope` (a blank graph part: tests/serve/test_graph_request.py)."""
    (tmp_path / "app.py").write_text("def hello():\n    return 1\n", encoding="utf-8")
    for blank in ("  ", "\t"):
        done = _codeloupe(tmp_path, "search", ".", "hello", "--scope", blank, "--embed-provider", "none")
        assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (
            2, "codeloupe: search: argument --scope: is blank: name a folder or file of the workspace, or leave it "
               "out to search all of it"), done.stderr
    # No scope at all is still the whole workspace: the default, "", as a client sends it.
    whole = _codeloupe(tmp_path, "search", ".", "hello", "--scope", "", "--embed-provider", "none", "--json")
    assert whole.returncode == 0 and json.loads(whole.stdout)["core"][0]["path"] == "app.py", whole.stderr



@pytest.mark.parametrize(("args", "action"), [
    (["repos", "--json", "--store", "postgresql://x/y"], "repos"),
    (["--store", "postgresql://x/y", "repos", "--json"], "repos"),
    (["--json", "--store", "postgresql://x/y", "global-index", "status"], "global-index"),
    (["drop", "billing", "--store", "postgresql://x/y", "--json", "--wait"], "drop"),
    (["queue", "--json", "prune", "--store", "postgresql://x/y"], "queue"),
])
def test_admin_takes_its_options_after_its_action_as_every_command_takes_them_anywhere(args: list[str],
                                                                                       action: str) -> None:
    """`codeloupe admin repos --json` (and `--store URL` after the action) was refused, 'unrecognized arguments',
    where the README says every command takes its options anywhere; one given before the action is still kept."""
    from codeloupe.cli import build_parser

    parsed = build_parser().parse_args(["admin", *args])
    assert (parsed.action, parsed.store_url, parsed.json) == (action, "postgresql://x/y", True)
