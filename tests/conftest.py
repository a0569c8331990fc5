"""Shared test setup: every test gets its own cache and config dirs, so nothing reads or lands in the user's."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.internal.conjecture import providers as hypothesis_providers

from codeloupe.api import Workspace
from full_disk import can_mount

# Property tests draw the same examples on every run (a failure is seen again by running the test again), and keep
# no example database: no failure of an earlier run replayed first, nor a `.hypothesis/` folder in the tree.
settings.register_profile("codeloupe", derandomize=True, database=None)
settings.load_profile("codeloupe")
# Derandomized, Hypothesis still mixes in literals from the project's modules loaded at the moment (and caches them
# under `.hypothesis/constants`): a test's examples changed with the tests run before it in the process (a file
# alone, or the suite under xdist), so a failure in CI did not come back when the test was run by itself. No
# public setting turns that off; this private hook does, and fails loudly here if a Hypothesis upgrade drops it.
assert hasattr(hypothesis_providers, "_get_local_constants"), "Hypothesis moved _get_local_constants"
hypothesis_providers._get_local_constants = hypothesis_providers.Constants


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis' caches (its Unicode tables) in a folder of this run, not the working directory's `.hypothesis/`:
    set before any test module is imported, as some build strategies (and read the tables) at import."""
    config.hypothesis_home = Path(tempfile.mkdtemp(prefix="codeloupe-hypothesis-"))
    set_hypothesis_home_dir(config.hypothesis_home)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(config.hypothesis_home, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def isolated_user_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Module- and session-scoped fixtures run before the per-test fixture below: keep them off the user's too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CODELOUPE_CONFIG_DIR", str(tmp_path_factory.mktemp("codeloupe-session-config")))
        # The user's git config and excludes file (which discovery applies, as git does) stay out too: a
        # developer's global `*.log` or `.idea/` must not change what a test's tree indexes.
        empty = tmp_path_factory.mktemp("git-config") / "gitconfig"
        empty.write_text("")
        patch.setenv("GIT_CONFIG_GLOBAL", str(empty))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
        yield


@pytest.fixture(scope="session", autouse=True)
def no_parse_worker_left() -> Iterator[None]:
    """The kept parse worker that `no_strategy_worker_left` keeps from test to test ends with the session."""
    yield
    from codeloupe.parallel import stop_kept_workers

    stop_kept_workers()


@pytest.fixture(autouse=True)
def no_strategy_worker_left() -> Iterator[None]:
    """A test that chunked with a workspace strategy leaves this process's strategy worker running, with the test's
    strategies loaded: ended after each test. One that chunked a few files leaves its kept parse worker (kept for the
    files after): a forked one, a copy of this process as the test had it (its patches too), is ended after the test;
    a spawned one (this process has loaded onnxruntime, or had threads: `parallel.pool_context`) imported the engine
    anew, holds nothing of the test, and takes ~0.5 s to start again (in a run of part of the suite under xdist,
    111 of 215 tests each spawned one): kept for the session. The tests that count
    this process's children leave it out (`processes.children_but_parse_workers`)."""
    yield
    from codeloupe.chunk.strategy_process import stop_worker
    from codeloupe.parallel import stop_kept_workers

    stop_worker()
    stop_kept_workers(forked_only=True)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    cache = tmp_path_factory.mktemp("codeloupe-cache")
    monkeypatch.setenv("CODELOUPE_CACHE_DIR", str(cache))
    # The user's own config.toml and trust store: empty for every test unless it writes them.
    monkeypatch.setenv("CODELOUPE_CONFIG_DIR", str(tmp_path_factory.mktemp("codeloupe-config")))
    for name in ("CODELOUPE_EMBED_PROVIDER", "CODELOUPE_EMBED_BASE_URL", "CODELOUPE_EMBED_MODEL",
                 "CODELOUPE_EMBED_API_KEY", "CODELOUPE_CHAT_BASE_URL", "CODELOUPE_CHAT_MODEL",
                 "CODELOUPE_CHAT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return cache


@pytest.fixture
def lexical_workspace() -> Iterator[Callable[[Path], Workspace]]:
    """Open and index a workspace with embeddings off (fast, no model); closed after the test."""
    opened: list[Workspace] = []

    def open_indexed(root: Path) -> Workspace:
        ws = Workspace(root, overrides={"embed_provider": "none"})
        ws.index()
        opened.append(ws)
        return ws

    yield open_indexed
    for ws in opened:
        ws.close()


@pytest.fixture
def make_tree(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """Write {relative path: text} under the test's tmp_path (each text dedented); returns the root."""

    def write(files: dict[str, str]) -> Path:
        for rel, text in files.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(textwrap.dedent(text))
        return tmp_path

    return write


@pytest.fixture
def cache_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Path]:
    """The cache dir on its own small disk (a tmpfs when we may mount one), of 3 MB unless the test names another
    size (`@pytest.mark.parametrize("cache_disk", ["32m"], indirect=True)`)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    mounted = can_mount(cache, getattr(request, "param", "3m"))
    monkeypatch.setenv("CODELOUPE_CACHE_DIR", str(cache))
    yield cache
    if mounted:
        subprocess.run(["umount", "-l", str(cache)], check=False)
