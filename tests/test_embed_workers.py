"""Bulk embedding in worker processes: the same vectors as in one process, the same trust, the same lifetime."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from codeloupe.embed.local import (
    MAX_WINDOWS,
    POOL_MIN_WINDOWS,
    EncoderOptions,
    OnnxSentenceEncoder,
    minilm_tokenizer,
    shipped_model_path,
)
from processes import alive, assert_workers_die_with_their_parent, children_but_parse_workers, children_of

# Enough long texts that one call holds more than POOL_MIN_WINDOWS windows (each has the maximum: its
# distinct words fill more than MAX_WINDOWS windows).
TEXTS = [f"def handler{i}(request, response):\n" + "".join(f"    value{j} = request.get('field{i}x{j}')\n"
                                                         for j in range(60))
         for i in range(POOL_MIN_WINDOWS // MAX_WINDOWS + 4)] + ["a short one", "class Empty:\n    pass\n"]


def _encoder(model: Path, threads: int) -> OnnxSentenceEncoder:
    return OnnxSentenceEncoder(model, minilm_tokenizer(), model_id="test", options=EncoderOptions(threads=threads))


@pytest.fixture()
def model_copy(tmp_path: Path) -> Path:
    return Path(shutil.copyfile(shipped_model_path(), tmp_path / "model.onnx"))


def test_worker_processes_give_the_vectors_of_one_process(model_copy: Path) -> None:
    owners, _ = _encoder(model_copy, threads=1).embed_windows(TEXTS)
    assert len(owners) >= POOL_MIN_WINDOWS
    alone = _encoder(model_copy, threads=1).embed(TEXTS)
    pooled = _encoder(model_copy, threads=2)
    try:
        vectors = pooled.embed(TEXTS)
        workers = children_but_parse_workers(os.getpid())
        assert len(workers) >= 2, "the bulk call did not start worker processes"
    finally:
        pooled.release_workers()
    assert vectors.shape == alone.shape
    assert np.abs(vectors - alone).max() < 1e-5
    assert not any(alive(pid) for pid in workers), "release_workers left workers running"


def test_a_model_file_changed_after_loading_is_refused_by_the_workers(model_copy: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    reference = _encoder(model_copy, threads=1).embed(TEXTS)
    encoder = _encoder(model_copy, threads=2)
    model_copy.write_bytes(model_copy.read_bytes() + b"planted")  # the workers would load these bytes
    with caplog.at_level(logging.WARNING, logger="codeloupe.embed"):
        vectors = encoder.embed(TEXTS)
    # Embedded by the parent's own session, loaded before the change.
    assert np.abs(vectors - reference).max() < 1e-5
    assert "changed since it was loaded" in caplog.text
    assert not children_but_parse_workers(os.getpid())
    encoder.embed(TEXTS)  # and it does not try the workers again
    assert caplog.text.count("embedding in worker processes failed") == 1


# Embeds once in bulk (starting the workers), then waits to be killed with the idle workers alive.
SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from codeloupe.embed.local import EncoderOptions, OnnxSentenceEncoder, minilm_tokenizer
    sys.path.insert(0, sys.argv[2])
    from test_embed_workers import TEXTS

    encoder = OnnxSentenceEncoder(Path(sys.argv[1]), minilm_tokenizer(), model_id="test",
                                  options=EncoderOptions(threads=2))
    encoder.embed(TEXTS)
    print("embedded", flush=True)
    time.sleep(600)
""")


def test_workers_exit_when_the_parent_is_killed(model_copy: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", SCRIPT, str(model_copy), str(Path(__file__).parent)],
                              stdout=subprocess.PIPE, text=True)

    def idle_workers() -> list[int]:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "embedded"
        workers = children_of(parent.pid)
        assert len(workers) >= 2
        return workers

    assert_workers_die_with_their_parent(parent, idle_workers)


def test_a_worker_imports_its_module_without_the_whole_engine() -> None:
    # A spawned worker imports what its task names; the package must not pull in the engine's API (search,
    # graph, bundle: ~0.2 s of CPU per worker, paid every bulk run).
    probe = ("import sys, codeloupe.embed.workers, codeloupe.chunk\n"
             "assert 'codeloupe.api' not in sys.modules, 'codeloupe.api imported'\n"
             "from codeloupe import Workspace\n"
             "assert Workspace.__module__ == 'codeloupe.api'\n")
    subprocess.run([sys.executable, "-c", probe], check=True, env={**os.environ})


def test_workers_released_by_another_thread_mid_run_finish_that_run_first(model_copy: Path) -> None:
    """A server embeds on more than one thread (a save beside the start-up refresh): one bulk run ending releases
    the workers while another still waits on them. That run gets its vectors (its feeds are not cancelled), and
    the workers end once it is done; two threads starting at once share one set of workers."""
    import threading

    alone = _encoder(model_copy, threads=1).embed(TEXTS)
    pooled = _encoder(model_copy, threads=2)
    results: dict[str, np.ndarray] = {}
    start = threading.Barrier(2)

    def embed(name: str) -> None:
        start.wait()
        results[name] = pooled.embed(TEXTS)

    runs = [threading.Thread(target=embed, args=(name,)) for name in ("a", "b")]
    for run in runs:
        run.start()
    deadline = time.monotonic() + 120
    while len(children_but_parse_workers(os.getpid())) < 2:  # both runs are waiting on the workers
        assert time.monotonic() < deadline, "the runs never started worker processes"
        time.sleep(0.01)
    workers = children_but_parse_workers(os.getpid())
    pooled.release_workers()  # as the first bulk run to end does
    for run in runs:
        run.join()
    assert set(results) == {"a", "b"}
    for vectors in results.values():
        assert np.abs(vectors - alone).max() < 1e-5
    assert len(workers) == 2, workers
    assert not any(alive(pid) for pid in workers), "the released workers outlived the runs"
    assert pooled.embed(TEXTS[:1]).shape == (1, alone.shape[1])  # and the encoder still embeds


def test_a_stopped_encoder_refuses_bulk_calls_but_still_embeds_queries(model_copy: Path) -> None:
    """`stop_bulk` (a served workspace closing) stops bulk embedding only: a search still running meanwhile
    embeds its query on the in-process session, and keeps its dense lane."""
    from codeloupe.embed import EmbeddingStopped

    running = _encoder(model_copy, threads=1)
    stopped = _encoder(model_copy, threads=2)
    stopped.stop_bulk()
    with pytest.raises(EmbeddingStopped):
        stopped.embed(TEXTS)
    query = "how are bearer tokens checked"
    assert np.abs(stopped.embed_query(query) - running.embed_query(query)).max() < 1e-5
    asked = [query, f"{query}\n\n{TEXTS[0]}"]  # an ask's question, and with the prose it got (a long text)
    assert np.abs(stopped.embed(asked) - running.embed(asked)).max() < 1e-5
    with pytest.raises(EmbeddingStopped):  # and still no bulk call after
        stopped.embed(TEXTS)
