"""The one door to a chat model: any OpenAI-compatible endpoint through the `openai` package.

Every failure (no endpoint, no key, timeout, HTTP error, a broken stream) surfaces as `ChatUnavailable` or
`ChatError` with a short reason; callers turn both into the plain bundle. No retries: a retry would double
the wait before the user gets the bundle that is already in hand.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import openai

from codeloupe.ask.cancel import CANCELLED, Cancellation
from codeloupe.settings import Settings, is_loopback_url

NOT_CONFIGURED = "no chat model configured"


class ChatUnavailable(Exception):
    """No usable endpoint is configured; the message is the fallback reason."""


class ChatError(RuntimeError):
    """A model call failed; the message is the fallback reason."""


# What a broken or hostile endpoint makes the client raise while it parses a reply (JSON that does not parse,
# bytes that are not UTF-8): a failed call like any other, never a traceback. Cut connections arrive as
# `openai.APIConnectionError`.
_MALFORMED = (ValueError, UnicodeError)


@dataclass(frozen=True)
class ToolRequest:
    id: str
    name: str
    arguments: dict[str, Any]  # {} when the model sent arguments that are not a JSON object
    raw_arguments: str


@dataclass(frozen=True)
class ChatReply:
    content: str
    tool_calls: list[ToolRequest] = field(default_factory=list)


class ChatModel:
    """A configured endpoint plus call counters (read into the ask metrics). Safe to share between threads.

    Its calls end early when `cancellation` is cancelled: the one in flight fails at once, later ones are
    refused, each with the `ChatError` "the ask was cancelled"."""

    def __init__(self, base_url: str, model: str, api_key: str, timeout_s: float,
                 cancellation: Cancellation | None = None) -> None:
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.cancellation = cancellation or Cancellation()
        http = openai.DefaultHttpxClient(event_hooks={"request": [self.cancellation.watch]})
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "no-key-needed-for-loopback",
                                     timeout=timeout_s, max_retries=0, http_client=http)
        self._lock = threading.Lock()
        self.calls = 0
        self.failures = 0

    @classmethod
    def from_settings(cls, settings: Settings, cancellation: Cancellation | None = None) -> ChatModel:
        base_url = settings.chat_base_url.strip()
        if not base_url or not settings.chat_model.strip():
            raise ChatUnavailable(NOT_CONFIGURED)
        if urlparse(base_url).scheme not in ("http", "https"):
            raise ChatUnavailable(f"chat_base_url {base_url!r} is not an http(s) URL")
        # Only a key set by the same party as the endpoint goes there (never the user's to a workspace's).
        api_key, held_back = settings.api_key("chat_base_url", "chat_api_key")
        if not api_key and not is_loopback_url(base_url):
            raise ChatUnavailable(held_back or f"no chat_api_key for {base_url} (only loopback endpoints work"
                                  " without one)")
        if settings.chat_timeout_s <= 0:
            raise ChatUnavailable(f"chat_timeout_s must be positive (got {settings.chat_timeout_s})")
        return cls(base_url, settings.chat_model.strip(), api_key, settings.chat_timeout_s, cancellation)

    def _count(self, failed: bool) -> None:
        with self._lock:
            self.calls += 1
            self.failures += int(failed)

    def _refuse_if_cancelled(self) -> None:
        """Raise the cancelled `ChatError` once the ask is cancelled (the call's own error is not the reason)."""
        if self.cancellation.cancelled:
            raise ChatError(CANCELLED)

    def stream(self, messages: list[dict[str, Any]], *, timeout_s: float | None = None) -> Iterator[str]:
        """The assistant's text as it arrives. Raises `ChatError` (also part-way through)."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        failed = True
        try:
            self._refuse_if_cancelled()
            stream = self._client.chat.completions.create(
                model=self.model, messages=messages, stream=True, temperature=0.0, timeout=limit)
            for chunk in stream:
                if time.monotonic() > deadline or self.cancellation.cancelled:
                    stream.close()
                    self._refuse_if_cancelled()
                    raise ChatError(f"chat model timed out after {limit:g}s")
                text = _delta_text(chunk)
                if text:
                    yield text
            failed = False
        except openai.OpenAIError as exc:
            self._refuse_if_cancelled()
            raise ChatError(describe_error(exc, limit)) from exc
        except _MALFORMED as exc:
            raise ChatError(f"chat model sent a malformed stream: {_short(f'{type(exc).__name__}: {exc}')}") from exc
        finally:
            self._count(failed)

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 timeout_s: float | None = None, temperature: float = 0.0) -> ChatReply:
        limit = self.timeout_s if timeout_s is None else timeout_s
        if limit <= 0:
            self._count(True)
            raise ChatError("chat model timed out (no time left)")
        failed = True
        try:
            self._refuse_if_cancelled()
            extra: dict[str, Any] = {"tools": tools} if tools else {}
            response = self._client.chat.completions.create(
                model=self.model, messages=messages, temperature=temperature, timeout=limit, **extra)
            reply = _reply(response)
            failed = False
            return reply
        except openai.OpenAIError as exc:
            self._refuse_if_cancelled()
            raise ChatError(describe_error(exc, limit)) from exc
        except _MALFORMED as exc:
            raise ChatError(f"chat model sent a malformed reply: {_short(f'{type(exc).__name__}: {exc}')}") from exc
        finally:
            self._count(failed)


def _first_choice(response: Any, field_name: str) -> Any:
    """`choices[0].<field_name>` of a parsed reply (None when there are no choices or the field is absent).
    The client builds replies without validating them, so each level is checked: a wrong shape is a
    `ChatError`, never an AttributeError later."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list):
        raise ChatError("chat model sent a malformed reply: no list of choices")
    if not choices:
        return None
    if not hasattr(choices[0], field_name):
        raise ChatError(f"chat model sent a malformed reply: choices[0] is {type(choices[0]).__name__}")
    found = getattr(choices[0], field_name)
    if isinstance(found, (str, int, float, list, dict)):
        raise ChatError(f"chat model sent a malformed reply: choices[0].{field_name} is {type(found).__name__}")
    return found


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ChatError(f"chat model sent a malformed reply: {what} is {type(value).__name__}, not text")
    return value


def _delta_text(chunk: Any) -> str:
    delta = _first_choice(chunk, "delta")
    return "" if delta is None else _text(getattr(delta, "content", None), "the streamed content")


def _reply(response: Any) -> ChatReply:
    message = _first_choice(response, "message")
    if message is None:
        raise ChatError("chat model returned no choices")
    calls = getattr(message, "tool_calls", None) or []
    if not isinstance(calls, list):
        raise ChatError("chat model sent a malformed reply: tool_calls is not a list")
    return ChatReply(content=_text(getattr(message, "content", None), "the content"),
                     tool_calls=[_tool_request(call) for call in calls if getattr(call, "type", None) == "function"])


def _tool_request(call: Any) -> ToolRequest:
    function = getattr(call, "function", None)
    name = getattr(function, "name", None)
    if not isinstance(name, str) or not isinstance(getattr(call, "id", None), str):
        raise ChatError("chat model sent a malformed tool call")
    raw = _text(getattr(function, "arguments", None), "a tool call's arguments")
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        parsed = {}
    return ToolRequest(call.id, name, parsed if isinstance(parsed, dict) else {}, raw)


def describe_error(exc: openai.OpenAIError, limit: float) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return f"chat model timed out after {limit:g}s"
    if isinstance(exc, openai.APIStatusError):
        return f"chat model answered HTTP {exc.status_code}: {_short(exc.message)}"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return f"chat model connection failed: {_short(str(cause) if cause else exc.message)}"
    return f"chat model failed: {_short(str(exc))}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"
