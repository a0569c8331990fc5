"""Helpers to drive the real `codeloupe-lsp` over stdio with pytest-lsp's client, on fixture workspaces in tmp_path.

Every server gets the test's own cache dir (the root conftest sets CODELOUPE_CACHE_DIR) and, unless a test
says otherwise, `embedProvider: none`, so nothing downloads or loads a model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.protocol import default_converter
from pygls.protocol.json_rpc import JsonRPCResponseMessage
from pygls.uris import from_fs_path
from pytest_lsp import LanguageClient
from pytest_lsp.client import register_lsp_features

# A small project with imports between files, a doc file and an ignored directory.
PROJECT: dict[str, str] = {
    "app/__init__.py": "",
    "app/auth.py": '''
        """Password checks and session tokens."""

        import hashlib

        from app.store import load_user


        def hash_password(password: str, salt: str) -> str:
            """Salted SHA-256 of a password."""
            return hashlib.sha256((salt + password).encode()).hexdigest()


        class SessionManager:
            """Issues and validates login sessions."""

            def login(self, name: str, password: str) -> str:
                user = load_user(name)
                if user is None or user["hash"] != hash_password(password, user["salt"]):
                    raise PermissionError("bad credentials")
                return "token-" + name
        ''',
    "app/store.py": '''
        """A tiny user store."""

        USERS = {"ada": {"salt": "s1", "hash": "x"}}


        def load_user(name: str):
            return USERS.get(name)
        ''',
    "app/web.py": '''
        from app.auth import SessionManager
        from app.store import load_user


        def handle_login(form: dict) -> str:
            return SessionManager().login(form["name"], form["password"])


        def profile(name: str) -> dict:
            return load_user(name) or {}
        ''',
    "docs/guide.md": '''
        # Guide

        ## Logging in

        Users log in with a password; the server answers with a session token.
        ''',
    "node_modules/dep/index.js": "module.exports = function ignoredDependency() {};\n",
}


def write_project(root: Path, files: dict[str, str] = PROJECT) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def uri(path: Path) -> str:
    return from_fs_path(str(path))


def _raw_converter():
    """Custom-request results stay plain JSON (pygls would make namedtuples of them)."""
    converter = default_converter()
    converter.register_structure_hook(JsonRPCResponseMessage, lambda obj, cls: cls(**obj))
    return converter


class Client(LanguageClient):
    """pytest-lsp's client plus what our server asks of a client: capability registration."""

    def __init__(self) -> None:
        super().__init__(converter_factory=_raw_converter)
        self.registrations: list[lsp.Registration] = []
        self.init_result: lsp.InitializeResult | None = None

    async def request(self, method: str, params: Any) -> Any:
        return await self.protocol.send_request_async(method, params)

    async def raw_request(self, method: str, params: Any) -> Any:
        """Send params exactly as given, bypassing the client's typing (to send malformed standard requests)."""
        msg_id = f"raw-{uuid.uuid4().hex}"
        future: Future[Any] = Future()
        self.protocol._request_futures[msg_id] = future  # how pygls matches the response to the request
        self.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await asyncio.wrap_future(future)

    async def command(self, name: str, *arguments: Any) -> Any:
        return await self.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=name, arguments=list(arguments)))

    async def wait_until(self, predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> None:
        """Wait for a condition the server brings about asynchronously (not a speed assertion)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.05)

    async def status(self) -> list[dict[str, Any]]:
        return (await self.request("codeloupe/status", {}))["folders"]

    async def wait_ready(self, count: int = 1) -> list[dict[str, Any]]:
        """Poll codeloupe/status until `count` folders exist and none is still indexing."""
        folders: list[dict[str, Any]] = []

        async def ready() -> bool:
            nonlocal folders
            folders = await self.status()
            return len(folders) == count and all(f["state"] != "indexing" for f in folders)

        deadline = asyncio.get_running_loop().time() + 120
        while not await ready():
            assert asyncio.get_running_loop().time() < deadline, f"folders never became ready: {folders}"
            await asyncio.sleep(0.05)
        return folders

    async def search_until(self, query: str, accept: Callable[[dict[str, Any]], bool], what: str,
                           **extra: Any) -> dict[str, Any]:
        """Repeat a search until its result satisfies `accept` (a save is indexed in the background)."""
        result: dict[str, Any] = {}
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            result = await self.request("codeloupe/search", {"query": query, **extra})
            if accept(result):
                return result
            assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}: {result}"
            await asyncio.sleep(0.05)


def make_client() -> Client:
    client = Client()
    register_lsp_features(client)

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def on_register(params: lsp.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    return client


CAPABILITIES = lsp.ClientCapabilities(
    window=lsp.WindowClientCapabilities(work_done_progress=True, show_document=lsp.ShowDocumentClientCapabilities(
        support=True)),
    workspace=lsp.WorkspaceClientCapabilities(
        workspace_folders=True, configuration=True,
        did_change_watched_files=lsp.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True)),
)


async def start_server(roots: list[Path], options: dict[str, Any] | None = None,
                       env: dict[str, str] | None = None, command: tuple[str, ...] = ("-m", "codeloupe_lsp")) -> Client:
    """The server (`command`: Python's arguments, a script that runs it in its own way) started on `roots`."""
    client = make_client()
    await client.start_io(sys.executable, *command, env={**os.environ, **(env or {})})
    init_options = {"embedProvider": "none", **(options or {})}
    client.init_result = await client.initialize_session(lsp.InitializeParams(
        capabilities=CAPABILITIES, process_id=os.getpid(),
        workspace_folders=[lsp.WorkspaceFolder(uri=uri(r), name=r.name) for r in roots],
        initialization_options=init_options))
    return client


async def stop_server(client: Client) -> None:
    await client.shutdown_session()


def location_paths(result: dict[str, Any]) -> list[str]:
    return [f["path"] for f in [*result["core"], *result["related"]]]


def disk_lines(path: Path, start0: int, end0: int) -> str:
    """Lines start0..end0 (0-based, end exclusive) of a file as it is on disk."""
    return "".join(path.read_text().splitlines(keepends=True)[start0:end0])


async def expect_error(pending: Awaitable[Any], code: int) -> str:
    """Await a request that must fail with `code`; returns the error message."""
    try:
        await pending
    except JsonRpcException as exc:
        assert exc.code == code, exc.message
        return exc.message
    raise AssertionError(f"expected error {code}, got a result")


class RawServer:
    """`codeloupe-lsp` as a subprocess spoken to in bytes, so a test can send what no client library would."""

    def __init__(self, errlog: Path | None = None) -> None:
        """`errlog`: the file its stderr goes to (none kept without one)."""
        with errlog.open("w") if errlog is not None else contextlib.nullcontext(subprocess.DEVNULL) as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "codeloupe_lsp"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, env=os.environ.copy())
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                return
            self.messages.put(json.loads(out.read(length)))

    def send_bytes(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    @staticmethod
    def frame(message: dict[str, Any], length_delta: int = 0) -> bytes:
        body = json.dumps(message).encode()
        return f"Content-Length: {len(body) + length_delta}\r\n\r\n".encode() + body

    def request(self, msg_id: int, method: str, params: Any = None) -> bytes:
        return self.frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    def initialize(self, folders: list[Path] | None = None, *, process_id: int | None = None, **options: Any) -> None:
        """The handshake: `initialize` with embeddings off (`options` over that) and its reply; with `folders`, those
        as the workspace folders and `initialized` after, which starts their indexes; `process_id`: the editor's
        process the server is to end with (none by default)."""
        params: dict[str, Any] = {"processId": process_id, "rootUri": None, "capabilities": {},
                                  "initializationOptions": {"embedProvider": "none", **options}}
        if folders is not None:
            params["workspaceFolders"] = [{"uri": uri(folder), "name": folder.name} for folder in folders]
        self.send_bytes(self.request(1, "initialize", params))
        assert self.next_reply()["id"] == 1
        if folders is not None:
            self.send_bytes(self.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def next_reply(self, timeout: float = 60) -> dict[str, Any]:
        """The next response or error (server-to-client requests and notifications are skipped)."""
        while True:
            message = self.messages.get(timeout=timeout)
            if "method" not in message:
                return message

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
