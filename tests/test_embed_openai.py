"""The OpenAI-compatible provider against a real HTTP server on 127.0.0.1 that speaks /v1/embeddings."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest

from chat_server import LoopbackHTTPServer
from codeloupe.embed import EmbeddingError, describe_provider, make_provider
from codeloupe.embed.remote import OpenAIProvider
from codeloupe.settings import Settings

DIM = 6


def vector_for(text: str, dim: int = DIM) -> list[float]:
    """A deterministic, unnormalised vector per text (the provider must normalise it)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [float(b) - 100.0 for b in digest[:dim]]


class Scripted:
    """What the server answers: a queue of one-shot behaviours, then `default` for every later request."""

    def __init__(self) -> None:
        self.queue: list[str] = []
        self.default = "ok"
        self.dim = DIM
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    def next(self) -> str:
        with self.lock:
            return self.queue.pop(0) if self.queue else self.default


def _handler(script: Scripted) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/embeddings":
                self._send(404, b'{"error": {"message": "no such route"}}')
                return
            with script.lock:
                script.requests.append({**payload, "authorization": self.headers.get("Authorization", "")})
            behaviour = script.next()
            if behaviour == "slow":
                time.sleep(1.0)
            if behaviour == "429":
                self._send(429, b'{"error": {"message": "slow down"}}', {"retry-after-ms": "20"})
            elif behaviour == "500":
                self._send(500, b'{"error": {"message": "overloaded"}}', {"retry-after-ms": "20"})
            elif behaviour == "garbage":
                self._send(200, b"{this is not json")
            elif behaviour == "400":
                self._send(400, b'{"error": {"message": "model not found: nope"}}')
            elif behaviour in ("NaN", "1e39"):  # JSON that Python's parser reads, numbers no cosine can use
                row = ", ".join([behaviour] + ["0.5"] * (script.dim - 1))
                data = ", ".join(f'{{"object": "embedding", "index": {i}, "embedding": [{row}]}}'
                                 for i in range(len(payload["input"])))
                self._send(200, f'{{"object": "list", "model": "m", "data": [{data}]}}'.encode())
            else:
                inputs = payload["input"]
                data = [{"object": "embedding", "index": i, "embedding": vector_for(t, script.dim)}
                        for i, t in reversed(list(enumerate(inputs)))]  # out of order on purpose
                body = {"object": "list", "data": data, "model": payload["model"],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1}}
                self._send(200, json.dumps(body).encode())

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Scripted]]:
    script = Scripted()
    httpd = LoopbackHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", script
    finally:
        httpd.shutdown()
        httpd.server_close()


def _settings(base_url: str, **changes: object) -> Settings:
    base = {"embed_provider": "openai", "embed_base_url": base_url, "embed_model": "tiny-embed",
            "embed_timeout_s": 5.0}
    return Settings(**{**base, **changes})


def _expected(texts: list[str], dim: int = DIM) -> np.ndarray:
    raw = np.array([vector_for(t, dim) for t in texts], dtype=np.float32)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def test_embeds_in_batches_over_threads_in_input_order(server: tuple[str, Scripted]) -> None:
    url, script = server
    provider = make_provider(_settings(url, embed_batch_size=2, embed_concurrency=3, embed_dimensions=DIM))
    texts = [f"text number {i}" for i in range(7)] + [""]
    vectors = provider.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (8, DIM)
    np.testing.assert_allclose(vectors[:7], _expected(texts[:7]), atol=1e-6)
    assert len(script.requests) == 4 and all(len(r["input"]) <= 2 for r in script.requests)
    first = script.requests[0]
    assert first["model"] == "tiny-embed" and first["encoding_format"] == "float" and first["dimensions"] == DIM
    assert [""] not in [r["input"] for r in script.requests]  # an empty text is sent as a space
    assert all(r["authorization"] == "Bearer unused-for-loopback" for r in script.requests)


def test_model_id_names_host_model_and_dimensions(server: tuple[str, Scripted]) -> None:
    url, _ = server
    settings = _settings(url, embed_dimensions=DIM)
    provider = make_provider(settings)
    assert provider.model_id == f"openai:{url.split('//')[1].split('/')[0]}/tiny-embed@{DIM}"
    assert describe_provider(settings) == ("openai", provider.model_id)


def test_an_unknown_models_dimension_is_asked_once(server: tuple[str, Scripted]) -> None:
    url, script = server
    provider = make_provider(_settings(url))
    assert provider.dim == DIM and len(script.requests) == 1
    assert provider.embed_query("hello").shape == (DIM,)
    provider.embed_query("hello")
    assert len(script.requests) == 2  # the repeated query came from memory


def test_429_and_5xx_are_retried(server: tuple[str, Scripted]) -> None:
    url, script = server
    script.queue = ["429", "500", "ok"]
    provider = make_provider(_settings(url, embed_dimensions=DIM))
    np.testing.assert_allclose(provider.embed(["retry me"]), _expected(["retry me"]), atol=1e-6)
    assert len(script.requests) == 3


def test_persistent_429_is_a_clear_error(server: tuple[str, Scripted]) -> None:
    url, script = server
    script.default = "429"
    provider = OpenAIProvider(_settings(url, embed_dimensions=DIM), max_retries=1)
    with pytest.raises(EmbeddingError, match=f"endpoint {url} .*answered HTTP 429: .*slow down"):
        provider.embed(["x"])
    assert len(script.requests) == 2


def test_a_timeout_names_the_endpoint(server: tuple[str, Scripted]) -> None:
    url, script = server
    script.default = "slow"
    provider = OpenAIProvider(_settings(url, embed_dimensions=DIM, embed_timeout_s=0.2), max_retries=0)
    with pytest.raises(EmbeddingError, match=f"endpoint {url} .*did not answer within 0.2s"):
        provider.embed(["x"])


def test_a_timeout_then_an_answer_succeeds(server: tuple[str, Scripted]) -> None:
    url, script = server
    script.queue = ["slow"]
    provider = OpenAIProvider(_settings(url, embed_dimensions=DIM, embed_timeout_s=0.4), max_retries=1)
    np.testing.assert_allclose(provider.embed(["late"]), _expected(["late"]), atol=1e-6)


def test_malformed_json_is_a_clear_error(server: tuple[str, Scripted]) -> None:
    url, script = server
    script.default = "garbage"
    provider = OpenAIProvider(_settings(url, embed_dimensions=DIM), max_retries=0)
    with pytest.raises(EmbeddingError, match=f"endpoint {url} .*malformed response"):
        provider.embed(["x"])


@pytest.mark.parametrize("value", ["NaN", "1e39"])
@pytest.mark.filterwarnings("error")  # reported as the error below, not also as a warning
def test_vectors_that_are_not_finite_are_a_clear_error(server: tuple[str, Scripted], value: str) -> None:
    """NaN (which Python's JSON parser accepts) or a number past float32 would rank every chunk alike in
    memory and be refused by the shared index's database mid-search."""
    url, script = server
    script.default = value
    provider = OpenAIProvider(_settings(url, embed_dimensions=DIM), max_retries=0)
    with pytest.raises(EmbeddingError, match=f"endpoint {url} .*values that are not finite numbers"):
        provider.embed_query("x")


def test_a_client_error_is_reported_with_the_servers_message(server: tuple[str, Scripted]) -> None:
    url, script = server
    script.default = "400"
    provider = OpenAIProvider(_settings(url, embed_dimensions=DIM), max_retries=0)
    with pytest.raises(EmbeddingError, match="HTTP 400: .*model not found: nope"):
        provider.embed(["x"])


def test_wrong_dimension_is_a_clear_error(server: tuple[str, Scripted]) -> None:
    url, script = server
    provider = make_provider(_settings(url, embed_dimensions=8))
    with pytest.raises(EmbeddingError, match=f"endpoint {url} .*returned 6-dimensional vectors, expected 8"):
        provider.embed(["x"])


def test_an_unreachable_endpoint_is_named() -> None:
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    provider = OpenAIProvider(_settings(url, embed_dimensions=DIM), max_retries=0)
    with pytest.raises(EmbeddingError, match=f"endpoint {url} \\(model tiny-embed\\) is unreachable"):
        provider.embed(["x"])


def test_a_remote_endpoint_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EmbeddingError, match="https://embeddings.example.com/v1 needs an API key"):
        make_provider(_settings("https://embeddings.example.com/v1"))
    provider = make_provider(_settings("https://embeddings.example.com/v1", embed_api_key="k"))
    assert provider.model_id == "openai:embeddings.example.com/tiny-embed@native"
