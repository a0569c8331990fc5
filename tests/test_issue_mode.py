"""Issue mode on real fixture repositories: stack traces of every language the graph reads switch it on and
ground their frames, however short the trace."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from chat_server import ChatServer
from codeloupe.api import Workspace
from codeloupe.issue import frames, is_issue

FIXTURES = Path(__file__).parent / "fixtures" / "graph"

# (fixture repository, a short trace as the runtime prints it on another machine, the frame's workspace file)
SHORT_TRACES = {
    "go": ("panic: runtime error: invalid memory address or nil pointer dereference\n"
           "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a2b1c]\n\n"
           "goroutine 1 [running]:\n"
           "example.com/shop/internal/store.flush()\n"
           "\t/home/ci/src/shop/internal/store/flush.go:4 +0x1d\n",
           "internal/store/flush.go"),
    "js": ("    at Layer.handle (/srv/app/lib/router/layer.js:7:15)\n"
           "    at next (/srv/app/lib/router/route.js:3:5)\n",
           "lib/router/layer.js"),
    "ruby": ("/usr/src/app/lib/shop/cart.rb:6:in `total': undefined method `sum' for Shop::Pricing (NoMethodError)\n",
             "lib/shop/cart.rb"),
    "rust": ("thread 'main' panicked at src/util/pricing.rs:2:5:\nattempt to add with overflow\n",
             "src/util/pricing.rs"),
    "php": ("PHP Fatal error:  Uncaught TypeError: strtolower(): Argument #1 must be of type string\n"
            "#0 /var/www/html/src/Support/Str.php(6): strtolower(NULL)\n",
            "src/Support/Str.php"),
}


@pytest.fixture
def fixture_workspace(tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]):
    def open_copy(name: str) -> Workspace:
        root = tmp_path / name
        shutil.copytree(FIXTURES / name, root)
        return lexical_workspace(root)

    return open_copy


@pytest.mark.parametrize("name", sorted(SHORT_TRACES))
def test_a_short_trace_switches_on_issue_mode_and_ranks_its_frame(name: str, fixture_workspace) -> None:
    trace, frame_file = SHORT_TRACES[name]
    bundle = fixture_workspace(name).search(trace)
    assert bundle.issue_mode
    assert frame_file in [h.path for h in bundle.files][:4]
    assert any("traceback frame" in h.why for h in bundle.files if h.path == frame_file)


def test_jvm_frames_name_the_package_folder() -> None:
    trace = ('Exception in thread "main" java.lang.NullPointerException\n'
             "\tat com.acme.cart.Cart.total(Cart.java:42)\n")
    assert is_issue(trace)
    assert [(f.path, f.line) for f in frames(trace)] == [("com/acme/cart/Cart.java", 42)]


@pytest.mark.parametrize("question", [
    "how does the router match a route",
    "what happens at layer.js:12 in the router",
    "where is flush.go:12 called from",
    "why does cart.rb:6 call Pricing.sum",
])
def test_a_question_that_names_a_line_stays_a_question(question: str) -> None:
    assert not is_issue(question)


def test_a_bare_basename_pins_one_file_or_none(tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    root = tmp_path / "repo"
    for rel in ("app/__init__.py", "app/conf.py", "site/__init__.py", "site/conf.py", "site/render.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"SETTING_{rel.replace('/', '_').replace('.', '_').upper()} = 1\n")
    ws = lexical_workspace(root)
    report = ("Traceback (most recent call last):\n"
              '  File "/opt/venv/lib/site/render.py", line 1, in <module>\n'
              "KeyError: 'theme'\n\nThe setting is read in conf.py and exported from __init__.py; "
              "setting it in app/conf.py changes nothing.\n")
    bundle = ws.search(report)
    pinned = {h.path: h.why for h in bundle.files if "in the text" in h.why or "traceback frame" in h.why}
    assert set(pinned) == {"site/render.py", "app/conf.py"}
    assert "path app/conf.py in the text" in pinned["app/conf.py"]


def test_what_a_frame_calls_joins_related(tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    files = {
        "app/__init__.py": "",
        "app/web.py": "def handle(request):\n    raise KeyError(request.path)\n",
        "app/cli.py": ("from options.loader import read_options\nfrom app.web import handle\n\n\n"
                       "def main(argv):\n    settings = read_options(argv[0])\n    return handle(settings)\n"),
        "options/__init__.py": "",
        "options/loader.py": "def read_options(name):\n    return {'n': name}\n",
        # files that match the report's words better than the loader does, so no lane shortlists it
        **{f"app/views_{i}.py": f"def handle_{i}(request):\n    return main(request)  # KeyError srv app\n"
           for i in range(15)},
    }
    for rel, text in files.items():
        (tmp_path / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / rel).write_text(text)
    ws = lexical_workspace(tmp_path / "repo")
    report = ("Traceback (most recent call last):\n"
              '  File "/srv/app/cli.py", line 7, in main\n'
              '  File "/srv/app/web.py", line 2, in handle\n'
              "KeyError: '/'\n")
    bundle = ws.search(report)
    loader = next(h for h in bundle.files if h.path == "options/loader.py")
    assert loader.via == "graph" and loader.why == "read_options called from app/cli.py"


def test_catalogs_tests_and_examples_do_not_crowd_a_report(tmp_path: Path,
                                                           lexical_workspace: Callable[[Path], Workspace]) -> None:
    message = "Cannot combine the timezone offset with a naive datetime value"
    files = {
        "shop/clock.py": f"def localise(value, offset):\n    if value.tzinfo is None:\n        raise ValueError('{message}')\n",
        "shop/locale/fr/LC_MESSAGES/shop.po": f'msgid "{message}"\nmsgstr "Impossible de combiner"\n',
        # a test and a doc example that quote the report better than the implementation does
        "tests/test_clock.py": (f"def test_localise_aware():\n    # {message}\n"
                                "    localise(aware_datetime, offset)  # tzinfo set, still fails\n"),
        "docs/examples/clock_example.py": f"# {message}\nlocalise(aware_datetime, offset)  # tzinfo set\n",
    }
    for rel, text in files.items():
        (tmp_path / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / rel).write_text(text)
    ws = lexical_workspace(tmp_path / "repo")
    report = (f"localise raises '{message}' for an aware value\n\n" + " ".join(
        f"step_{i}" for i in range(30)) + "\n\nCalling localise(aware_datetime, offset) with tzinfo set still fails.")
    bundle = ws.search(report)
    assert bundle.issue_mode
    ranked = [h.path for h in bundle.files]
    assert ranked[0] == "shop/clock.py"
    assert ranked[-1] == "shop/locale/fr/LC_MESSAGES/shop.po"  # a catalog only repeats the words
    assert set(files) <= set(ranked)  # demoted, never dropped


# The code a retry report is about, and a manifest and a CI workflow that repeat its words (versions, the
# option, the plugin) more often than the code does.
RETRY_FILES = {
    "shop/client.py": ("def retry_after(response, backoff_seconds):\n"
                      "    header = response.headers.get('Retry-After')\n"
                      "    return int(header) if header else backoff_seconds\n"),
    "pyproject.toml": ("[project]\nname = 'shop'\nversion = '2.4.1'\n[tool.shop.retry]\n"
                       "backoff_seconds = 30  # retry backoff seconds when the server sends Retry-After\n"
                       "retry_after_header = 'Retry-After'\n"),
    ".github/workflows/retry.yaml": ("name: retry backoff seconds\non: push\njobs:\n  retry:\n"
                                     "    steps:\n      - run: pytest -k retry_after --backoff-seconds 30\n"),
}


@pytest.mark.parametrize("report", [
    ("Retry-After header ignored: backoff seconds used instead (version 2.4.1)\n\n"
     + " ".join(f"note_{i}" for i in range(30))
     + "\n\nWhen the server sends a Retry-After header the client still waits the configured backoff seconds; "
       "with backoff_seconds = 30 in pyproject it always waits 30 seconds."),
    "retry backoff ignored when the server sends Retry-After",  # a commit message's words: read as a question
])
def test_manifests_and_ci_config_do_not_outrank_the_code_a_report_is_about(
        report: str, make_tree: Callable[[dict[str, str]], Path],
        lexical_workspace: Callable[[Path], Workspace]) -> None:
    bundle = lexical_workspace(make_tree(RETRY_FILES)).search(report)
    assert bundle.issue_mode == is_issue(report)
    ranked = [h.path for h in bundle.files]
    assert ranked[0] == "shop/client.py"
    assert set(RETRY_FILES) <= set(ranked)  # demoted, never dropped


def test_a_one_line_report_still_reaches_the_dense_lane(tmp_path: Path) -> None:
    (tmp_path / "repo" / "shop").mkdir(parents=True)
    (tmp_path / "repo" / "shop" / "cart.py").write_text("def total(items):\n    return sum(i.price for i in items)\n")
    report = "cart total is wrong when " + " ".join(f"item_{i}" for i in range(30)) + " are in the basket"
    assert is_issue(report) and "\n" not in report
    with ChatServer() as server:  # its embeddings: deterministic vectors over loopback
        ws = Workspace(tmp_path / "repo", overrides={"embed_provider": "openai", "embed_base_url": server.base_url,
                                                     "embed_model": "scripted-embed", "embed_dimensions": 8})
        try:
            ws.index()
            ws.embed()
            before = len(server.received)
            bundle = ws.search(report)
            asked = [seen.body for seen in server.received[before:] if seen.path.endswith("/embeddings")]
        finally:
            ws.close()
    assert bundle.issue_mode
    assert any(report in json.loads(body)["input"] for body in asked)  # before: no variant was embedded


def test_a_query_of_one_long_word_or_repeated_frame_parts_is_parsed_in_linear_time() -> None:
    """Each of these took seconds at 10,000-20,000 characters (a frame pattern tried from every position of a
    run, scanning it to its end), and minutes at the sizes here: one request held a server. In a process of
    its own, so that a regression fails after a minute rather than hanging the suite (a regular expression
    holds the interpreter until it returns)."""
    code = """if True:
        from codeloupe.issue import is_issue, parse_issue
        for text in ["a." * 100_000, "x" * 200_000, "a.rb." * 40_000, "at " * 70_000, "```a" * 50_000,
                     "a/" * 100_000, "a.php(" * 33_000]:
            is_issue(text)
            parse_issue(text, 1.0)
        print("parsed")
    """
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "parsed", run.stderr
