"""The pygls server object, its protocol tweaks, and the helpers every feature module uses."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import attrs
import cattrs
from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcContentModified,
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, default_converter
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

from codeloupe.api import (
    IndexStopped,
    NotInGraph,
    Settings,
    SourceConflict,
    StoreError,
    Workspace,
    WorkspaceError,
    load_settings,
    workspace_digest,
)
from codeloupe.types import one_line
from codeloupe_lsp import __version__
from codeloupe_lsp.config import EditorOptions
from codeloupe_lsp.convert import uri_to_path
from codeloupe_lsp.folders import Folder, Folders
from codeloupe_lsp.framing import serve_stream
from codeloupe_lsp.params import invalid

log = logging.getLogger("codeloupe_lsp")
T = TypeVar("T")

# LSP 3.17 "RequestFailed": the request was valid but the engine could not answer it.
REQUEST_FAILED = -32803
# The most the process's exit waits for its folders' indexes to stop and close (an index stops within a file, far
# under this; editors allow a server about 2 s to exit before they kill it).
EXIT_WAIT_S = 1.5


class RequestFailed(JsonRpcException):
    CODE = REQUEST_FAILED
    MESSAGE = "Request failed"


# A request whose folder closed under it (`IndexStopped`): answered -32801 ContentModified, LSP's error for a request
# the server's state changed under, which an editor drops quietly; normal editor use, not an engine fault.
FOLDER_CLOSED = ("the folder this request read was closed while it ran (removed from the workspace, reopened on new"
                 " settings, or the server stopping)")


class _MalformedRequest:
    """A request whose params did not match the method's type: answered -32602 instead of dropped."""

    def __init__(self, msg_id: Any, method: str, problem: str) -> None:
        self.id, self.method, self.problem = msg_id, method, problem


# What an editor sends of its buffers' text, which the server never reads.
_EDITOR_TEXT = frozenset({lsp.TEXT_DOCUMENT_DID_OPEN, lsp.TEXT_DOCUMENT_DID_CHANGE, lsp.TEXT_DOCUMENT_DID_CLOSE})
# The notifications whose `message` an editor shows a person as it is (Neovim's vim.notify, a notification).
_SHOWN_MESSAGES = frozenset({lsp.WINDOW_SHOW_MESSAGE, lsp.WINDOW_LOG_MESSAGE})


class CodeloupeProtocol(LanguageServerProtocol):
    """pygls' protocol, with every request answered as LSP says.

    pygls logs and drops a request whose params fail to structure, and every request after `shutdown`; the
    client would wait forever. Those get -32602 and -32600; a request before `initialize` gets -32002."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_seen = False
        # The server reads files from disk, never an editor's buffers; with pygls' own open/close handlers the
        # capability said openClose, so an editor sent every file it opened whole (Neovim stalled 1-1.5 s
        # encoding a 52 MB file) and pygls kept a copy of each. Without them the editors send none.
        for method in _EDITOR_TEXT:
            self.fm.builtin_features.pop(method, None)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        if method_name in _EDITOR_TEXT:
            return  # a client that sends them anyway: nothing to keep, and no warning per opened file
        super()._handle_notification(method_name, params)

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcInvalidParams as exc:
            if "id" not in data or "method" not in data:
                raise
            cause = exc.__cause__
            if isinstance(cause, cattrs.BaseValidationError):
                problem = "; ".join(cattrs.transform_error(cause, path="$"))
            else:
                problem = str(cause or exc)
            return _MalformedRequest(data["id"], data["method"], problem)

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", "")
        if method and getattr(message, "id", None) is not None and self._refuse_out_of_lifecycle(message):
            return
        if method == lsp.INITIALIZE:
            self.initialize_seen = True
        elif not self.initialize_seen and method != lsp.EXIT:
            return  # LSP: notifications before `initialize` are dropped
        if isinstance(message, _MalformedRequest):
            error = JsonRpcInvalidParams(message=f"{message.method}: invalid params: {message.problem}")
            self._send_response(message.id, None, error.to_response_error())
            return
        super().handle_message(message)

    def notify(self, method: str, params: Any | None = None) -> None:
        """A message to a person quotes the workspace's text (a strategy file's name, a settings file's path, a
        shared repository's name, an exception naming a file): every such text leaves here, once, as the CLI prints
        it (`one_line`). A bidi override or an escape sequence in a file name reordered the message or, in a
        terminal editor, drove the terminal, and a newline in one forged a line of its own. pygls' own reports
        (`report_server_error`) pass here too."""
        if method in _SHOWN_MESSAGES and params is not None:
            params = attrs.evolve(params, message=one_line(params.message))
        super().notify(method, params)

    def _send_response(self, msg_id: Any, result: Any | None = None,
                       error: lsp.ResponseError | None = None) -> None:
        if error is not None:  # an error response's message is shown too (Neovim: "codeloupe: ... failed: <it>")
            error = attrs.evolve(error, message=one_line(error.message))
        super()._send_response(msg_id, result, error)


    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        """pygls logs every refused request with its traceback as an error: a request whose folder closed under it
        (ContentModified, `FOLDER_CLOSED`) is answered without one, its line logged as information."""
        refused = None if future.cancelled() else future.exception()
        if not isinstance(refused, JsonRpcContentModified):
            super()._send_handler_result(future, msg_id=msg_id)
            return
        self._request_futures.pop(msg_id, None)
        log.info("request %s: %s", msg_id, refused.message)
        self._send_response(msg_id, None, refused.to_response_error())

    def _refuse_out_of_lifecycle(self, request: Any) -> bool:
        """Answer a request that comes before `initialize` or after `shutdown` with its LSP error."""
        if self._shutdown:
            error = JsonRpcInvalidRequest(message=f"{request.method}: the server is shut down (after `shutdown`"
                                                  " only `exit` is accepted)")
        elif not self.initialize_seen and request.method != lsp.INITIALIZE:
            error = JsonRpcServerNotInitialized(message=f"{request.method}: the server is not initialized"
                                                        " (send `initialize` first)")
        else:
            return False
        self._send_response(request.id, None, error.to_response_error())
        return True


def _keep_raw(obj: dict[str, Any], cls: type) -> Any:
    return cls(**obj)


def _exact_str(value: Any, _cls: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _converter() -> cattrs.Converter:
    """pygls turns untyped params into namedtuples, which rename keys like `from`; keep the JSON instead.

    cattrs makes a string of anything (`{"query": 42}` searched for "42"): a string field takes only a
    string, so mistyped params are -32602 as docs/protocol.md promises."""
    converter = default_converter()
    converter.register_structure_hook(str, _exact_str)
    converter.register_structure_hook(JsonRPCRequestMessage, _keep_raw)
    converter.register_structure_hook(JsonRPCNotification, _keep_raw)
    return converter


class CodeloupeServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("codeloupe", __version__, protocol_cls=CodeloupeProtocol, converter_factory=_converter,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.None_)
        self.folders = Folders()
        self.options = EditorOptions()
        # The client's trust decision, fixed at initialize (a later settings push cannot grant trust).
        self.trusted = False
        # What that trust covers: each folder's settings files as they were when it was first opened (by real path:
        # `codeloupe.api.workspace_digest`, the trust store's own key), which is what the editor asked the user about.
        self.trusted_digests: dict[Path, str] = {}
        # Repositories of the shared index by name, opened from the user's settings (`codeloupe_lsp.shared`).
        self.shared: dict[str, Workspace] = {}
        # Why the settings' repositories, or some of them, are not open ("": all are), for `codeloupe/status`.
        self.shared_problem = ""
        # Re-reads the user's trust store when it changes (`codeloupe_lsp.lifecycle`); cancelled at shutdown.
        self.trust_watch: asyncio.Task[None] | None = None
        # Ends serving once the editor's process is gone (`codeloupe_lsp.lifecycle`; none where initialize's
        # processId is null).
        self.editor_watch: asyncio.Task[None] | None = None
        # What the process exits with (`__main__`): as LSP says of `exit`, 1 where no `shutdown` came before.
        self.exit_status = 0
        self._warned: set[str] = set()

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve over stdio with a reader that survives framing errors (`codeloupe_lsp.framing`), until end of input,
        `exit`, Ctrl-C, SIGTERM or the editor's process ending (`lifecycle`); then `shutdown`. Call it on the main
        thread: it takes SIGTERM."""
        self._stop_event = threading.Event()
        reader = StdinAsyncReader(stdin or sys.stdin.buffer, self.thread_pool)
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(self._serve(reader))
        except BrokenPipeError:
            log.error("the client closed the connection; shutting down")
        except SystemExit as exc:  # `exit`, or the editor gone (`lifecycle`): 0 after `shutdown`, 1 without
            self.exit_status = exc.code if isinstance(exc.code, int) else 1
        except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, SIGTERM
            pass
        finally:
            self.shutdown()

    async def _serve(self, reader: StdinAsyncReader) -> None:
        """`serve_stream`, which SIGTERM (an editor's forced stop, a session's logout) ends as `exit` does: it cancels
        this task from the loop, as asyncio's own Ctrl-C does, so `shutdown` then stops and closes each folder. Its
        default action left a first index or a graph refresh mid-way, the index unclosed and its workers' pool never
        let go. A handler that raised in the main thread instead could land inside an import, which this thread
        does as it answers (the engine's modules load lazily), and leave the interpreter's import lock held: every
        later import in any thread, a folder's close's included, waited for ever (as `codeloupe serve` once hung).
        A SIGTERM before the loop runs meets the default action, with no folder open yet; a second one, while the
        folders close, kills the process."""
        loop = asyncio.get_running_loop()
        serving = asyncio.current_task()
        assert serving is not None  # run by asyncio.run

        def terminated() -> None:
            loop.remove_signal_handler(signal.SIGTERM)  # the default action again
            serving.cancel()

        loop.add_signal_handler(signal.SIGTERM, terminated)
        await serve_stream(self._stop_event, reader, self.protocol)

    def shutdown(self) -> None:
        """Stop serving without waiting for worker threads (pygls would join them).

        An index or a model call in flight must not hold the editor's shutdown for minutes; every store write
        is its own transaction, so leaving mid-index loses nothing (`__main__` then exits the process). An index
        under way stops at its next file and is closed, waited for `EXIT_WAIT_S` at most.
        """
        if self._stop_event is not None:
            self._stop_event.set()
        if self._thread_pool is not None:
            self._thread_pool.shutdown(wait=False, cancel_futures=True)
        if self._server is not None:
            self._server.close()
        # Each folder's index closed once its job in flight stops (an index at its next file, its chunking workers
        # killed and their pool let go, where leaving at once had the resource tracker report leaked semaphores),
        # waiting `EXIT_WAIT_S` at most in all: a search snapshot being built is not waited out.
        closing = [closed for folder in self.folders if (closed := folder.close_at_exit()) is not None]
        deadline = time.monotonic() + EXIT_WAIT_S
        for closed in closing:
            with contextlib.suppress(TimeoutError):
                closed.result(max(0.0, deadline - time.monotonic()))

    # ---------------------------------------------------------------- client messages

    def supports_progress(self) -> bool:
        window = self.client_capabilities.window
        return bool(window and window.work_done_progress)

    def warn(self, message: str, *, once: bool = False) -> None:
        """A `window/showMessage` warning; with `once`, the same text is shown only the first time."""
        if once and self._shown_before(message):
            return
        log.warning("%s", message)
        self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=message))

    def show_error(self, message: str, *, once: bool = False) -> None:
        """A `window/showMessage` error; with `once`, the same text is shown only the first time."""
        if once and self._shown_before(message):
            return
        log.error("%s", message)
        self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=message))

    def _shown_before(self, message: str) -> bool:
        shown = message in self._warned
        self._warned.add(message)
        return shown

    def source_replaced(self, conflict: SourceConflict) -> str:
        """An open folder whose shared repository another folder replaced as its source (`index --replace`
        elsewhere): every search, read and save of it is refused from then on, so the editor is told once per
        replacement, and the folder's status says so (until this folder is the source again and one of its saves
        or re-indexes is written); returns the message (a refused request's)."""
        message = _held_from_elsewhere(conflict, "is no longer searched or indexed: another folder replaced it as"
                                                 " its repository's source",
                                       then="save one of its files (or run the codeloupe.reindex command)")
        folder = self.folders.containing(Path(conflict.folder))
        if folder is None:
            self.show_error(message, once=True)
        elif folder.source_refused(message.removeprefix("codeloupe: ")):
            self.show_error(message)
        return message

    # ---------------------------------------------------------------- folders

    def client_trusts(self, root: Path) -> bool:
        """Whether the client's trust covers the folder's settings files as they are now: the ones it trusted are
        those the folder was first opened with, so a pull or an edit that changes their tables since (a new
        endpoint) is not trusted on the strength of the old ones."""
        if not self.trusted:
            return False
        digest = workspace_digest(root)
        return self.trusted_digests.setdefault(root.resolve(), digest) == digest

    def settings_for(self, root: Path) -> Settings:
        """The folder's settings; once its settings files changed from what the client trusted, the user's trust
        store decides (`codeloupe trust` of the new files), and what they set that needs trust is ignored with a
        warning that says why."""
        # The digest is compared with the tables load_settings reads itself: a file rewritten after
        # `client_trusts` read it (a pull landing between two reads) falls to the trust store, not the editor's trust.
        trusted_digest = self.trusted_digests.setdefault(root.resolve(), workspace_digest(root)) \
            if self.trusted else None
        settings = load_settings(root, self.options.overrides, trusted_digest=trusted_digest)
        if self.trusted and settings.ignored is not None:
            settings = dataclasses.replace(settings, ignored=dataclasses.replace(settings.ignored, editor_changed=True))
        return settings

    def open_folder(self, uri: str) -> Folder | None:
        root = uri_to_path(uri)
        if root is None or not root.is_dir():
            self.warn(f"codeloupe: {uri} is not a local folder; not indexed")
            return None
        try:
            settings = self.settings_for(root)
            folder = Folder(self, uri, root.resolve(), settings)
        except SourceConflict as exc:
            self.show_error(_held_from_elsewhere(exc, "is not opened", then="restart the language server"))
            return None
        except Exception as exc:  # a bad settings file, an unwritable cache dir: say so, keep serving
            log.exception("opening %s failed", root)
            self.show_error(f"codeloupe: cannot open {root}: {exc}")
            return None
        self.warn_notices(settings)
        for warning in folder.ws.strategy_load.warnings:  # strategy files that are not run, and why
            self.warn(warning, once=True)
        self.folders.add(folder)
        folder.request_full()
        return folder

    def warn_notices(self, settings: Settings) -> None:
        """What a folder's settings files hold that is not used, and why, and the network endpoints a trusted
        folder's files chose: each once (each names its folder's file), not again on every reopen or settings
        push."""
        for notice in settings.notices:
            self.warn(notice, once=True)

    def folder_for(self, uri: str, what: str = "uri") -> tuple[Folder, str]:
        """The folder holding `uri` and the path relative to it; anything else is refused with -32602."""
        path = uri_to_path(uri)
        if path is None:
            raise invalid(f"`{what}` {uri!r} is not a file: URI")
        folder = self.folders.containing(path)
        if folder is None:
            raise invalid(f"`{what}` {uri} is outside every workspace folder")
        return folder, folder.ws.relative(path)

    def folders_for(self, folder_uri: str) -> list[Folder]:
        """`folderUri` given: that folder (or -32602); absent: every folder."""
        if not folder_uri:
            if not len(self.folders):
                raise RequestFailed(message="no workspace folder is open")
            return list(self.folders)
        folder = self.folders.get(folder_uri)
        if folder is None:
            raise invalid(f"`folderUri` {folder_uri} is not an open workspace folder")
        return [folder]

    # ---------------------------------------------------------------- running engine calls

    async def engine(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one engine call on the shared read pool; engine refusals become -32602, faults -32803, and a call
        whose folder closed under it -32801.

        The event loop never waits on the engine itself, so other requests keep being answered, and a
        cancelled request stops waiting at once (the call itself finishes in the background).
        """
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.thread_pool, lambda: fn(*args, **kwargs))
        except (JsonRpcException, asyncio.CancelledError, NotInGraph):
            raise  # NotInGraph is an answer (docs/protocol.md), converted by the graph module
        except WorkspaceError as exc:
            raise invalid(str(exc)) from exc
        except FileNotFoundError as exc:
            raise RequestFailed(message=f"{exc.filename}: no such file (deleted since it was indexed?)") from exc
        except SourceConflict as exc:
            raise RequestFailed(message=self.source_replaced(exc)) from exc
        except IndexStopped as exc:  # its folder closed, which stops a graph build the call waited for or ran
            raise JsonRpcContentModified(message=FOLDER_CLOSED) from exc
        except StoreError as exc:  # the index or the shared index's database out of reach: its sentence says what
            if _reads_a_closed_workspace(fn, args):
                raise JsonRpcContentModified(message=FOLDER_CLOSED) from exc
            log.warning("engine call %s: %s", getattr(fn, "__qualname__", fn), exc)
            raise RequestFailed(message=str(exc)) from exc
        except Exception as exc:
            if _reads_a_closed_workspace(fn, args):  # closed under it: its store answers "closed database" and the like
                raise JsonRpcContentModified(message=FOLDER_CLOSED) from exc
            log.exception("engine call %s failed", getattr(fn, "__qualname__", fn))
            raise RequestFailed(message=f"codeloupe engine error: {type(exc).__name__}: {exc}") from exc


def _reads_a_closed_workspace(fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    """Whether an engine call reads a folder closed since (its bound workspace or one of its arguments): a request in
    flight as its folder is removed fails on the closed store, which is the folder's closing, not an engine fault."""
    return any(isinstance(read, Workspace) and read.closed for read in (getattr(fn, "__self__", None), *args))


def build_server() -> CodeloupeServer:
    from codeloupe_lsp import (
        ask,
        codelens,
        commands,
        expand,
        flows,
        graph,
        hover,
        lifecycle,
        locate,
        read,
        related,
        search,
        status,
        symbols,
        tour,
    )

    server = CodeloupeServer()
    for module in (lifecycle, search, locate, symbols, expand, related, status, graph, ask, flows, tour, codelens,
                   hover, commands, read):
        module.register(server)
    return server


def _held_from_elsewhere(conflict: SourceConflict, refused: str, *, then: str) -> str:
    """The refusal (`refused`: what is refused) of a folder whose repository the shared index holds from another
    folder, worded for an editor: what to run in a terminal (the command line reads the same user settings), what
    to do `then` in the editor (a folder never opened needs the server restarted; one open since a replacement is
    ready again at its next save), and in which setting the repository as indexed is searched, rather than the
    command line's flags."""
    repository = conflict.repository
    return (f"codeloupe: {conflict.folder} {refused}: in the shared index your store_url setting names,"
            f" repository {repository!r} holds the files of {conflict.indexed_from}, not this folder (its answers"
            " would be that folder's code, and a save here would replace its files). To index this folder in their"
            f" place, run `codeloupe index {shlex.quote(conflict.folder)} --repo {shlex.quote(repository)} --replace`"
            f" in a terminal, then {then}; to search {repository!r} as indexed, read-only, add"
            " it to the `repositories` setting (VS Code: codeloupe.store.repositories).")
