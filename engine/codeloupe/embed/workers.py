"""Bulk embedding in worker processes: one single-threaded onnxruntime session per core.

Why processes: one session split over the cores hands every MatMul of a small batch between its threads, and
the Python around each run (padding, pooling) leaves the other core idle; whole batches on one thread per
process keep every core on model work. bench/embed_bench.py compares both in one run: 14.4 against 17.9 ms
of CPU per 128-token window on a shared 2-core machine (CPU time on a loaded machine varies by ~20% between
runs; the comparison is within one).

Trust: a worker loads the model file only when its sha256 is the one the parent computed when it loaded the
same path after its own checks (shipped checksum, or a derived model this machine recorded), so a file swapped
in between is refused; a refusing or dying worker breaks the pool and the parent embeds in its own process.
Workers die with their parent, even by `kill -9` (`parallel.exit_with_parent`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np
import onnxruntime as ort

from codeloupe.embed import EmbeddingError, EmbeddingStopped, normalise_rows
from codeloupe.parallel import (
    WORKER_TIMEOUT_S,
    exit_with_parent,
    kill_workers,
    may_start,
    pool_context,
    submit,
)

log = logging.getLogger("codeloupe.embed")

# A feed: the arrays of one padded batch (input_ids, attention_mask and, where the model takes it,
# token_type_ids), int64 [windows, width].
Feed = dict[str, np.ndarray]


def hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# Graph fusions onnxruntime must not make when it loads a model. SkipLayerNormFusion turns each residual Add +
# LayerNormalization into one SkipLayerNormalization kernel, which on one thread took 20% of MiniLM's time (8x
# the separate LayerNormalization's per call) at no gain in accuracy: both forms are equally close to the
# float32 model (cosine 0.992 on golden windows), though they round the int8 model's activations differently
# (cosine 0.998 between them), so the choice is part of every model id (SESSION_RECIPE, with windows run alone:
# unit_vectors).
DISABLED_FUSIONS = ["SkipLayerNormFusion"]
SESSION_RECIPE = "solo-addln"


def open_session(model: Path | bytes, threads: int) -> ort.InferenceSession:
    """A session on `model`: a file, or its bytes (read once and checked by whoever passes them)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    # Idle worker threads sleep instead of spinning: this runs beside an editor on a laptop.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # Batch shapes vary with every call, so planned memory patterns only add to the peak.
    options.enable_mem_pattern = False
    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), options,
                                providers=["CPUExecutionProvider"], disabled_optimizers=DISABLED_FUSIONS)


def unit_vectors(session: ort.InferenceSession, output: str, feed: Feed) -> np.ndarray:
    """Unit vectors [windows, dim] for one padded batch, each window run alone without its padding: the
    model's sentence output, or its token states averaged.

    Alone, because a dynamically quantised model scales each MatMul's input by the range of the whole tensor:
    a window run beside others, or beside padding, got a vector that depended on them (cosine 0.994 on
    average, 0.989 at worst, between golden chunks embedded together and one at a time), so a text's vector
    depended on which texts shared its call. Alone it is a function of the window only, and no closer or
    further from the float32 model (cosine 0.992 per window either way) at the same CPU time per window."""
    lengths = feed["attention_mask"].sum(axis=1)
    rows = []
    for row, length in enumerate(lengths):
        out = session.run([output], {name: array[row:row + 1, :length] for name, array in feed.items()})[0]
        rows.append(out.mean(axis=1) if out.ndim == 3 else out)
    return normalise_rows(np.concatenate(rows))


# ---------------------------------------------------------------------- inside a worker process

_worker_session: ort.InferenceSession | None = None
_worker_output = ""
_worker_refusal = ""  # why this worker would not load the model; every task raises it (an initialiser's
# exception reaches the parent only as a nameless broken pool)


def _start_worker(model_path: str, model_sha256: str, output: str, parent_pid: int) -> None:
    global _worker_session, _worker_output, _worker_refusal
    exit_with_parent(parent_pid)
    actual = hash_file(Path(model_path))
    if actual != model_sha256:
        _worker_refusal = f"{model_path} changed since it was loaded (sha256 {actual}, expected {model_sha256})"
        return
    _worker_session = open_session(Path(model_path), threads=1)
    _worker_output = output


def _run_in_worker(feed: Feed) -> np.ndarray:
    if _worker_session is None:
        raise EmbeddingError(_worker_refusal or "the worker initialiser did not run")
    return unit_vectors(_worker_session, _worker_output, feed)


# ---------------------------------------------------------------------- in the parent


class WorkerPool:
    """Worker processes that each hold a single-threaded session of one model file, started on first use.

    Threads share it: those that run at once share one set of workers, and a close asked for while any run
    waits on them (one thread's bulk run ending beside another's) ends them once the last run is done, rather
    than cancelling that run's feeds."""

    def __init__(self, model_path: Path, model_sha256: str, output: str, workers: int, *,
                 timeout_s: float = WORKER_TIMEOUT_S) -> None:
        self.model_path, self.model_sha256, self.output = model_path, model_sha256, output
        self.workers = workers
        self.timeout_s = timeout_s  # without a result for this long, the workers are stuck: killed
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._running = 0  # runs waiting on the workers
        self._close_when_idle = False
        self.broken = False  # once a worker failed, this model is embedded in the parent for good
        self.stopped = False  # `stop` was called: no run starts, and one under way raises EmbeddingStopped

    def run(self, feeds: list[Feed]) -> list[np.ndarray] | None:
        """Unit vectors per feed, in order; None when the workers cannot (the caller runs them itself)."""
        with self._lock:
            if self.stopped:
                raise EmbeddingStopped("embedding was stopped")
            if self.broken:
                return None
            if self._pool is None:
                context = pool_context()
                if not may_start(context, "embedding"):
                    return None
                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=context, initializer=_start_worker,
                    initargs=(str(self.model_path), self.model_sha256, self.output, os.getpid()))
            pool = self._pool
            self._running += 1
            self._close_when_idle = False
        try:
            futures = [submit(pool, _run_in_worker, feed) for feed in feeds]
            return [future.result(self.timeout_s) for future in futures]
        except (BrokenProcessPool, CancelledError, OSError, RuntimeError, TimeoutError) as exc:  # EmbeddingError too
            if self.stopped:  # its workers killed by `stop`: the feeds are dropped, not run in this process
                raise EmbeddingStopped("embedding was stopped") from exc
            log.warning("embedding in worker processes failed (%r); embedding in this process", exc)
            with self._lock:
                self.broken = True
                if self._pool is pool:
                    self._pool = None
            kill_workers(pool)
            return None
        finally:
            with self._lock:
                self._running -= 1
                close = self._running == 0 and self._close_when_idle
            if close:
                self.close()

    def stop(self) -> None:
        """Kill the workers now, for good (from any thread): a run waiting on them raises EmbeddingStopped, and
        so does every later one. Killed rather than let finish the batches they hold, each up to a second of
        work: a server whose client went (an MCP client closing stdin allows 2 s) must end before it is killed,
        which would leave the pool's semaphores to the resource tracker."""
        with self._lock:
            self.stopped = True
            pool, self._pool = self._pool, None
        if pool is not None:
            kill_workers(pool)

    def close(self) -> None:
        """End the workers now, or, while a run waits on them, once the last run is done."""
        with self._lock:
            if self._running:
                self._close_when_idle = True
                return
            pool, self._pool, self._close_when_idle = self._pool, None, False
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
