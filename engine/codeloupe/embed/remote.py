"""Any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Azure-style proxies, llama.cpp, vLLM, Ollama).

Requests go out in batches of `embed_batch_size` over `embed_concurrency` threads. The `openai` client
retries 429, 5xx and timeouts with exponential backoff (honouring Retry-After); what still fails becomes an
`EmbeddingError` that names the endpoint. A loopback endpoint needs no key; a key is only sent to an endpoint
set by the same party (`Settings.api_key`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import numpy as np
import openai

from codeloupe.embed import EmbeddingError, QueryCachingProvider, normalise_rows
from codeloupe.settings import OPENAI_BASE_URL, Settings, is_loopback_url

DEFAULT_MODEL = "text-embedding-3-small"
NATIVE_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
MAX_RETRIES = 4
# Hosted models refuse inputs over ~8k tokens; code runs 3-4 characters a token, so this stays under it.
MAX_INPUT_CHARS = 16_000


def _base_url(settings: Settings) -> str:
    return (settings.embed_base_url or OPENAI_BASE_URL).rstrip("/")


def _model(settings: Settings) -> str:
    return settings.embed_model or DEFAULT_MODEL


def openai_model_id(settings: Settings) -> str:
    # The host is part of the id: two servers may serve different weights under one model name.
    host = urlsplit(_base_url(settings)).netloc
    dims = settings.embed_dimensions or "native"
    return f"openai:{host}/{_model(settings)}@{dims}"


class OpenAIProvider(QueryCachingProvider):
    def __init__(self, settings: Settings, *, max_retries: int = MAX_RETRIES) -> None:
        super().__init__()
        self.base_url = _base_url(settings)
        self.model = _model(settings)
        self.model_id = openai_model_id(settings)
        self._requested_dims = settings.embed_dimensions
        self._dim = settings.embed_dimensions or NATIVE_DIMS.get(self.model, 0)
        self._batch_size = max(1, settings.embed_batch_size)
        self._concurrency = max(1, settings.embed_concurrency)
        self._timeout_s = settings.embed_timeout_s
        self._max_retries = max_retries
        key, held_back = settings.api_key("embed_base_url", "embed_api_key", "OPENAI_API_KEY")
        if not key:
            if not is_loopback_url(self.base_url):
                raise EmbeddingError(
                    f"the embedding endpoint {self.base_url} needs an API key: "
                    + (held_back or "set embed_api_key (CODELOUPE_EMBED_API_KEY) or OPENAI_API_KEY")
                )
            key = "unused-for-loopback"  # the client insists on some key; a local server ignores it
        self._client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=settings.embed_timeout_s,
                                     max_retries=max_retries)

    @property
    def dim(self) -> int:  # type: ignore[override]
        if not self._dim:  # an unknown model on a custom server: ask it once
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        # Endpoints reject empty strings and over-long inputs; neither changes what a chunk is about.
        inputs = [t[:MAX_INPUT_CHARS] if t.strip() else " " for t in texts]
        batches = [inputs[i:i + self._batch_size] for i in range(0, len(inputs), self._batch_size)]
        if len(batches) == 1 or self._concurrency == 1:
            parts = [self._request(b) for b in batches]
        else:
            with ThreadPoolExecutor(max_workers=self._concurrency, thread_name_prefix="embed") as pool:
                parts = list(pool.map(self._request, batches))
        vectors = np.concatenate(parts)
        if vectors.shape[1] != self.dim:
            raise self._error(f"returned {vectors.shape[1]}-dimensional vectors, expected {self.dim}"
                              " (check embed_dimensions)")
        return vectors

    def _error(self, what: str) -> EmbeddingError:
        return EmbeddingError(f"the embedding endpoint {self.base_url} (model {self.model}) {what}")

    def _request(self, batch: list[str]) -> np.ndarray:
        extra = {"dimensions": self._requested_dims} if self._requested_dims else {}
        try:
            response = self._client.embeddings.create(model=self.model, input=batch, encoding_format="float",
                                                      **extra)
        except openai.APITimeoutError:
            raise self._error(f"did not answer within {self._timeout_s:g}s ({self._max_retries} retries)") from None
        except openai.APIConnectionError as exc:
            raise self._error(f"is unreachable: {exc.__cause__ or exc}") from None
        except openai.APIStatusError as exc:
            raise self._error(f"answered HTTP {exc.status_code}: {str(exc.message)[:300]}") from None
        except (openai.APIError, ValueError) as exc:  # a body that is not the JSON the API describes
            raise self._error(f"sent a malformed response: {str(exc)[:300]}") from None
        try:
            rows = sorted(response.data, key=lambda item: item.index)
            # A number past float32 becomes inf here, which the check below reports: no warning on stderr too.
            with np.errstate(over="ignore"):
                vectors = np.array([row.embedding for row in rows], dtype=np.float32)
        except (AttributeError, TypeError, ValueError) as exc:
            raise self._error(f"sent a malformed response: {str(exc)[:300]}") from None
        if vectors.ndim != 2 or len(vectors) != len(batch):
            raise self._error(f"sent {len(rows)} vectors for {len(batch)} inputs")
        if not np.isfinite(vectors).all():  # NaN or a number past float32: no cosine, and the database refuses it
            raise self._error("sent vectors with values that are not finite numbers")
        return normalise_rows(vectors)
