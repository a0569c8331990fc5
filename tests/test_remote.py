"""Remote repositories: tarballs served from 127.0.0.1, indexed in memory, searched, graphed and asked at a
pinned revision; hostile archives (traversal, absolute names, links, devices, bombs) refused or skipped."""

from __future__ import annotations

import gzip
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from chat_server import ChatServer, LoopbackHTTPServer, Reply, cite
from codeloupe.api import RemoteError, Workspace, index_remote, is_remote_source, open_remote
from codeloupe.cli import main
from codeloupe.settings import load_settings

SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER_SHA = "fedcba9876543210fedcba9876543210fedcba98"

FILES = {
    "pkg/__init__.py": "",
    "pkg/parser.py": 'def parse_config(text: str) -> dict:\n    """Parse the widget configuration."""\n'
                     '    return dict(line.split("=", 1) for line in text.splitlines())\n',
    "app.py": "from pkg.parser import parse_config\n\n\ndef main():\n    return parse_config(open('w.cfg').read())\n",
    "README.md": "# Widget\n\nParses widget configuration files.\n",
    ".gitignore": "secret.env\n",
    "secret.env": "TOKEN=abc\n",
    "node_modules/dep/index.js": "module.exports = 1;\n",
    "logo.png": "\x89PNG not really\n",
}


@dataclass
class Member:
    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    linkname: str = ""


def tarball(files: dict[str, str] | None = None, *, top: str = "widget-main", comment: str = "",
            extra: list[Member] = (), gzip_comment: str = "") -> bytes:
    return _gzip(tar_bytes(files, top=top, comment=comment, extra=extra), gzip_comment)


def tar_bytes(files: dict[str, str] | None = None, *, top: str = "widget-main", comment: str = "",
              extra: list[Member] = ()) -> bytes:
    buffer = io.BytesIO()
    headers = {"comment": comment} if comment else {}
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers=headers) as tar:
        members = [Member(f"{top}/{path}" if top else path, text.encode()) for path, text in (files or {}).items()]
        for member in [*members, *extra]:
            info = tarfile.TarInfo(member.name)
            info.type, info.linkname, info.mtime = member.type, member.linkname, 1_700_000_000
            info.size = len(member.data)
            tar.addfile(info, io.BytesIO(member.data) if member.type == tarfile.REGTYPE else None)
    return buffer.getvalue()


def _gzip(data: bytes, comment: str = "") -> bytes:
    packed = gzip.compress(data, mtime=0)
    if not comment:
        return packed
    # Set FCOMMENT in the header and insert the zero-terminated comment after the fixed 10 bytes.
    return packed[:3] + bytes([packed[3] | 0x10]) + packed[4:10] + comment.encode("latin-1") + b"\0" + packed[10:]


class IPv6LoopbackHTTPServer(LoopbackHTTPServer):
    address_family = socket.AF_INET6


@dataclass
class TarballServer:
    """Serves fixed bodies by path on 127.0.0.1 (or ::1) and records every request path."""

    bodies: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)  # the Host header of every request
    proxy_credentials: list[str] = field(default_factory=list)  # the Proxy-Authorization header of every request
    redirects: dict[str, str] = field(default_factory=dict)  # path -> Location of a 302
    announced: dict[str, int] = field(default_factory=dict)  # path -> a Content-Length that lies
    trickled: set[str] = field(default_factory=set)  # paths whose body comes a byte at a time, slowly
    tls: Any = None  # an ssl.SSLContext: serve https
    host: str = "127.0.0.1"  # or "::1"

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
                server.requests.append(self.path)
                server.hosts.append(self.headers.get("Host", ""))
                server.proxy_credentials.append(self.headers.get("Proxy-Authorization", ""))
                if self.path in server.redirects:
                    self.send_response(302)
                    self.send_header("Location", server.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = server.bodies.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(server.announced.get(self.path, len(body or b""))))
                self.end_headers()
                if self.path not in server.trickled:
                    self.wfile.write(body or b"")
                    return
                for byte in body or b"":  # until the client hangs up
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    threading.Event().wait(0.05)

        self._httpd = (LoopbackHTTPServer if ":" not in self.host else IPv6LoopbackHTTPServer)((self.host, 0), Handler)
        if self.tls is not None:
            self._httpd.socket = self.tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base(self) -> str:
        host, port = self._httpd.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls is not None else 'http'}://{host}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[TarballServer]:
    server = TarballServer()
    monkeypatch.setenv("CODELOUPE_REMOTE_TARBALL_URL", server.base + "/{owner}/{repo}/{ref}.tar.gz")
    monkeypatch.setenv("CODELOUPE_REMOTE_COMMIT_URL", server.base + "/commits/{owner}/{repo}/{ref}")
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")
    yield server
    server.close()


def cache_files(cache: Path) -> list[str]:
    return sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*") if p.is_file())


# ---------------------------------------------------------------------- index, search, graph, ask


def test_index_then_search_a_remote_repository_pinned_to_its_commit(
        served: TarballServer, isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    monkeypatch.chdir(tmp_path)
    assert main(["index", "acme/widget@main", "--json", "--no-embed"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["root"] == f"acme/widget@{SHA}"
    assert report["files_indexed"] == 4  # pkg/__init__.py, pkg/parser.py, app.py, README.md
    assert report["skipped"] == {"binary": 1, "ignore file": 1, "ignored": 1, "skipped directory": 1}
    assert served.requests == ["/acme/widget/main.tar.gz"]  # the archive named its commit: no second request

    assert main(["search", "acme/widget@main", "parse_config", "--json", "--no-embed"]) == 0
    bundle = json.loads(capsys.readouterr().out)
    assert bundle["revision"] == SHA and bundle["root"] == "acme/widget"
    assert bundle["core"][0]["path"] == "pkg/parser.py"
    assert len(served.requests) == 1  # search answers from the index: nothing fetched
    assert list(tmp_path.iterdir()) == []  # nothing written but the index, in the cache
    assert [p for p in cache_files(isolated_cache) if not p.startswith("indexes/remote-widget-")] == []


def test_graph_expand_and_ask_read_the_indexed_copy_and_cite_the_revision(served: TarballServer) -> None:
    served.bodies["/acme/widget/v1.tar.gz"] = tarball(FILES, top="", gzip_comment=SHA)
    with ChatServer() as chat:
        # Matched to the question: the map request below may ask the same model to name communities.
        chat.add(Reply(render=lambda body: f"It splits lines on `=` [[{cite(body, 'pkg/parser.py')}:1-3]].",
                       when="widget configuration"))
        ws = open_remote("acme/widget@v1", overrides={"chat_base_url": chat.base_url, "chat_model": "scripted"})
        try:
            ws.index()
            assert ws.revision == SHA
            graph = ws.graph_map()
            assert ("app.py", "pkg/parser.py") in {(e.source, e.target) for e in graph.edges}
            assert ws.expand("pkg/parser.py", symbol="parse_config").text == FILES["pkg/parser.py"]
            events = list(ws.ask("how is the widget configuration parsed?", agents=False))
            result = events[-1].result
            assert result is not None and result.fallback is None
            [citation] = result.citations
            assert (citation.path, citation.revision, citation.changed) == ("pkg/parser.py", SHA, False)
            assert citation.text == FILES["pkg/parser.py"]
            assert [e.data["revision"] for e in events if e.type == "citation"] == [SHA]
            # So are the streamed parts naming a span, and the result's: a draft kept without its code reads it there.
            assert {e.data["revision"] for e in events if e.type == "delta" and "path" in e.data} == {SHA}
            assert {p.to_dict()["revision"] for p in result.parts if p.citation is not None} == {SHA}
            assert result.bundle.revision == SHA
            with pytest.raises(ValueError, match="remote index"):
                ws.update_files(["app.py"])
            with pytest.raises(ValueError, match="traversal"):
                ws.read_lines("../outside.py")
        finally:
            ws.close()


def test_the_revision_comes_from_the_folder_name_the_commit_endpoint_or_the_digest(served: TarballServer) -> None:
    served.bodies["/acme/widget/dev.tar.gz"] = tarball(FILES, top=f"widget-{SHA}")
    served.bodies["/acme/widget/feature.tar.gz"] = tarball(FILES)
    served.bodies["/commits/acme/widget/feature"] = json.dumps({"sha": OTHER_SHA}).encode()
    served.bodies["/plain/widget.tar.gz"] = tarball(FILES)
    ws = open_remote("acme/widget@dev")
    try:
        ws.index()
        assert ws.revision == SHA
        assert "pkg/parser.py" in ws.store.file_rows()  # the top folder is stripped
    finally:
        ws.close()
    assert index_remote("acme/widget@feature", embed=False).root == f"acme/widget@{OTHER_SHA}"
    plain = index_remote(f"{served.base}/plain/widget.tar.gz", embed=False)
    assert plain.root.split("@")[1].startswith("sha256:")


def test_indexing_a_remote_repository_names_no_command_that_refuses_it(
        served: TarballServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Its skipped files were followed by "`codeloupe stats --skipped` lists those ...", and `stats` refuses a
    remote repository."""
    served.bodies["/plain/widget.tar.gz"] = tarball(FILES)
    url = f"{served.base}/plain/widget.tar.gz"
    assert main(["index", url, "--no-embed"]) == 0
    [skipped] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  skipped")]
    assert "binary 1" in skipped and "codeloupe stats" not in skipped
    assert main(["stats", url, "--skipped"]) == 2  # why the hint is left out


def test_a_local_folder_is_never_taken_for_a_remote_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert is_remote_source("acme/widget@main") and is_remote_source("https://example.com/a.tar.gz")
    (tmp_path / "acme" / "widget@main").mkdir(parents=True)
    assert not is_remote_source("acme/widget@main")


def test_the_fetch_templates_are_user_settings_only(tmp_path: Path) -> None:
    (tmp_path / ".codeloupe.toml").write_text('remote_tarball_url = "http://127.0.0.1:9/{owner}"\n')
    settings = load_settings(tmp_path, trusted=True)
    assert settings.remote_tarball_url.startswith("https://codeload.github.com/")


# ---------------------------------------------------------------------- hostile archives


def test_hostile_members_are_skipped_and_counted_and_nothing_is_written(
        served: TarballServer, isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = [
        Member("../escape.py", b"print('escaped')\n"),
        Member("/tmp/absolute.py", b"print('absolute')\n"),
        Member("widget-main/pkg/../../../deep.py", b"print('deep')\n"),
        Member("widget-main/link.py", type=tarfile.SYMTYPE, linkname="/etc/passwd"),
        Member("widget-main/hard.py", type=tarfile.LNKTYPE, linkname="widget-main/app.py"),
        Member("widget-main/dev/null", type=tarfile.CHRTYPE),
        Member("widget-main/dev/disk", type=tarfile.BLKTYPE),
        Member("widget-main/pipe", type=tarfile.FIFOTYPE),
        Member("widget-main/app.py", b"print('the last one wins')\n"),
    ]
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA, extra=hostile)
    monkeypatch.chdir(tmp_path)
    report = index_remote("acme/widget@main", embed=False)
    for reason, count in {"unsafe path (traversal)": 2, "unsafe path (absolute)": 1, "link member": 2,
                          "special file member": 3, "duplicate member": 1}.items():
        assert report.skipped[reason] == count, reason
    ws = open_remote("acme/widget@main")
    try:
        assert sorted(ws.store.file_rows()) == ["README.md", "app.py", "pkg/__init__.py", "pkg/parser.py"]
        assert ws.read_lines("app.py") == "print('the last one wins')\n"
    finally:
        ws.close()
    assert list(tmp_path.iterdir()) == []
    assert not Path("/tmp/absolute.py").exists() or Path("/tmp/absolute.py").read_text() != "print('absolute')\n"
    assert [p for p in cache_files(isolated_cache) if not p.startswith("indexes/remote-widget-")] == []


def test_a_decompression_bomb_is_refused_before_it_unpacks(served: TarballServer, capsys) -> None:
    zeros = Member("widget-main/zeros.txt", bytes(64 * 2**20))
    served.bodies["/acme/widget/bomb.tar.gz"] = tarball(FILES, comment=SHA, extra=[zeros])
    assert len(served.bodies["/acme/widget/bomb.tar.gz"]) < 2**20
    assert main(["index", "acme/widget@bomb", "--no-embed"]) == 2
    assert "decompression bomb" in capsys.readouterr().err
    ws = open_remote("acme/widget@bomb")
    try:
        assert ws.revision == "" and ws.store.file_rows() == {}  # refused as a whole: nothing indexed
    finally:
        ws.close()


def test_a_failed_fetch_leaves_no_index_behind_and_the_next_fetch_indexes(
        served: TarballServer, isolated_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fetch that fails (the archive not there yet: a 404) wrote an empty index at the source's name in the
    cache, one for every source tried; the index is put there only once it holds the files."""
    assert main(["search", "acme/widget@main", "parse_config", "--no-embed"]) == 2
    assert "404" in capsys.readouterr().err
    assert cache_files(isolated_cache) == []
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    assert main(["search", "acme/widget@main", "parse_config", "--json", "--no-embed"]) == 0
    assert json.loads(capsys.readouterr().out)["core"][0]["path"] == "pkg/parser.py"
    assert served.requests == ["/acme/widget/main.tar.gz"] * 2
    assert [p for p in cache_files(isolated_cache) if ".fetching" in p] == []


def test_two_first_fetches_of_one_source_at_once_both_answer_from_one_index(
        served: TarballServer, isolated_cache: Path) -> None:
    """Both opened before either fetched: the first puts its index in place, the second finds it there and uses
    it (replacing a file the first has open would mix their write-ahead logs), and neither leaves a file of its own."""
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    first, second = open_remote("acme/widget@main"), open_remote("acme/widget@main")
    try:
        first.index()
        second.index()
        for ws in (first, second):
            assert ws.revision == SHA and sorted(ws.store.file_rows()) == [
                "README.md", "app.py", "pkg/__init__.py", "pkg/parser.py"]
            assert ws.search("parse_config").core[0].path == "pkg/parser.py"
        assert first.store.path == second.store.path
    finally:
        first.close()
        second.close()
    assert [p for p in cache_files(isolated_cache) if ".fetching" in p] == []
    assert len({p.split(".sqlite")[0] for p in cache_files(isolated_cache)}) == 1


def test_a_first_fetch_killed_midway_leaves_files_the_next_fetch_removes_once_stale(
        served: TarballServer, isolated_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A first fetch killed (SIGKILL: no close ran) left its `.fetching` index in the cache for good, one for every
    fetch killed (as large as the repository's index). Never taken for an index, it is now removed by a later open
    of the same source once none of its files was written for longer than a fetch can take and its process is gone;
    one whose process still runs (a fetch under way, quiet while its machine slept) is kept."""
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    served.trickled.add("/acme/widget/main.tar.gz")  # the killed fetch is still downloading
    indexes = isolated_cache / "indexes"
    killed = subprocess.Popen([sys.executable, "-m", "codeloupe", "search", "acme/widget@main", "parse_config",
                               "--no-embed"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(indexes.glob("*.fetching")):
            assert killed.poll() is None and time.monotonic() < deadline, "the fetch never started"
            time.sleep(0.02)
    finally:
        killed.kill()
        killed.wait()
    left = [p for p in cache_files(isolated_cache) if ".fetching" in p]
    assert left  # what a killed fetch leaves
    under_way = open_remote("acme/widget@main")  # its own `.fetching`, of this process
    stale = time.time() - load_settings(None, {}).remote_deadline_s - 2 * 3600
    for name in cache_files(isolated_cache):
        os.utime(isolated_cache / name, (stale, stale))
    try:
        served.trickled.clear()
        assert main(["search", "acme/widget@main", "parse_config", "--json", "--no-embed"]) == 0
        assert json.loads(capsys.readouterr().out)["core"][0]["path"] == "pkg/parser.py"
        fetching = [p for p in cache_files(isolated_cache) if ".fetching" in p]
        assert not set(fetching) & set(left)  # the killed fetch's files are gone
        assert under_way.store.path.name in {Path(p).name for p in fetching}  # the live one's is kept
    finally:
        under_way.close()
    assert [p for p in cache_files(isolated_cache) if ".fetching" in p] == []


def test_the_unpacked_total_the_download_and_the_archive_itself_are_bounded(served: TarballServer) -> None:
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    served.bodies["/acme/widget/broken.tar.gz"] = b"\x1f\x8b\x08\x00 this is not gzip at all"
    cut = tar_bytes(extra=[Member("widget-main/cut.py", b"x = 1\n" * 1000)])
    served.bodies["/acme/widget/short.tar.gz"] = _gzip(cut[:len(cut) // 2])  # ends inside a member
    with pytest.raises(RemoteError, match="remote_max_unpacked_bytes"):
        index_remote("acme/widget@main", embed=False, overrides={"remote_max_unpacked_bytes": 4096})
    with pytest.raises(RemoteError, match="download bound"):
        index_remote("acme/widget@main", embed=False, overrides={"remote_max_download_bytes": 100})
    with pytest.raises(RemoteError, match="not a readable .tar.gz"):
        index_remote("acme/widget@broken", embed=False)
    with pytest.raises(RemoteError, match="not a readable .tar.gz"):
        index_remote("acme/widget@short", embed=False)
    with pytest.raises(RemoteError, match="HTTP 404"):
        index_remote("acme/widget@missing", embed=False)


def test_a_remote_repository_runs_none_of_its_strategy_files(served: TarballServer, tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    strategy = f"from pathlib import Path\nPath({str(marker)!r}).write_text('x')\nEXTENSIONS = ('.zog',)\n"
    served.bodies["/acme/widget/main.tar.gz"] = tarball(
        {**FILES, ".codeloupe/strategies/zog.py": strategy, "a.zog": "rule a\n", "b.zog": "rule b\n"}, comment=SHA)
    report = index_remote("acme/widget@main", embed=False)
    assert report.files_indexed == 7 and not marker.exists()
    assert isinstance(open_remote("acme/widget@main"), Workspace)


def test_a_tree_in_memory_follows_the_same_rules_as_the_same_tree_on_disk(tmp_path: Path) -> None:
    from codeloupe.discover import tree_walk, walk
    from codeloupe.settings import Settings

    tree = {**FILES, "docs/.gitignore": "*.tmp\n!keep.tmp\n", "docs/a.tmp": "x\n", "docs/keep.tmp": "k\n",
            "docs/guide.md": "# Guide\n", "build/out.js": "1\n", "pkg.egg-info/PKG-INFO": "x\n",
            "Cargo.lock": "lock\n", "big.txt": "y" * 2000 + "\n", "sub/.codeloupeignore": "gen/\n",
            "sub/gen/made.py": "x = 1\n", "sub/own.py": "y = 2\n"}
    for path, text in tree.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    settings = Settings(max_file_bytes=1000, ignore=["*.md"])
    on_disk = walk(tmp_path, settings)
    in_memory = tree_walk({path: len(text.encode()) for path, text in tree.items()},
                          lambda rel: tree[rel].encode() if rel in tree else None, settings)
    assert [c.rel_path for c in in_memory.candidates] == [c.rel_path for c in on_disk.candidates]
    assert in_memory.skipped == on_disk.skipped
    assert "docs/keep.tmp" in [c.rel_path for c in in_memory.candidates]


def test_ask_and_graph_take_a_remote_source_on_the_command_line(
        served: TarballServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    with ChatServer() as chat:
        chat.add(Reply(render=lambda body: f"It splits on `=` [[{cite(body, 'pkg/parser.py')}:1-3]]."))
        monkeypatch.setenv("CODELOUPE_CHAT_BASE_URL", chat.base_url)
        monkeypatch.setenv("CODELOUPE_CHAT_MODEL", "scripted")
        assert main(["ask", "acme/widget@main", "how is the configuration parsed?", "--json", "--no-embed",
                     "--no-agents"]) == 0
    done = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert done["type"] == "done" and done["bundle"]["revision"] == SHA
    assert [(c["path"], c["revision"]) for c in done["citations"]] == [("pkg/parser.py", SHA)]
    assert main(["graph", "acme/widget@main", "--json", "--no-embed"]) == 0
    edges = json.loads(capsys.readouterr().out)["edges"]
    assert {"source": "app.py", "target": "pkg/parser.py"}.items() <= next(
        e for e in edges if e["source"] == "app.py").items()
    assert served.requests == ["/acme/widget/main.tar.gz"]  # indexed once, by the first command that needed it


SPARSE_MAP = b"1\n0\n0\n".ljust(512, b"\0")  # one region, at offset 0, of 0 bytes


def sparse_member(name: str, real_size: int) -> tarfile.TarInfo:
    """A GNU sparse file (format 1.0) that stores one empty data block: tarfile reads it as `real_size` zeros."""
    info = tarfile.TarInfo(name)
    info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": name,
                        "GNU.sparse.realsize": str(real_size)}
    info.size = len(SPARSE_MAP)
    return info


def test_archives_built_to_exhaust_memory_or_discovery_are_skipped_or_refused(
        served: TarballServer, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = "widget-main/" + "d/" * 1500 + "deep.py"  # past Python's recursion limit
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": SHA}) as tar:
        for path, text in {**FILES, "n" * 5000 + ".py": "x = 1\n"}.items():
            info = tarfile.TarInfo(f"widget-main/{path}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
        info = tarfile.TarInfo(deep)
        info.size = 6
        tar.addfile(info, io.BytesIO(b"x = 1\n"))
        for number in range(3):  # each unpacks to 900 kB of zeros from 1.5 kB of archive
            tar.addfile(sparse_member(f"widget-main/hole{number}.txt", 900_000), io.BytesIO(SPARSE_MAP))
    served.bodies["/acme/widget/main.tar.gz"] = _gzip(buffer.getvalue())
    report = index_remote("acme/widget@main", embed=False)
    assert report.files_indexed == 4
    for reason, count in {"sparse file member": 3, "unsafe path (too deep)": 1,
                          "unsafe path (too long)": 1}.items():
        assert report.skipped[reason] == count, reason

    import codeloupe.remote

    monkeypatch.setattr(codeloupe.remote, "MAX_MEMBERS", 20)  # folders count against the member bound
    served.bodies["/acme/widget/nested.tar.gz"] = tarball({f"f{n}/g/h/a.py": "x = 1\n" for n in range(8)},
                                                          comment=SHA)
    with pytest.raises(RemoteError, match="more than 20 folders"):
        index_remote("acme/widget@nested", embed=False)

    broken = io.BytesIO()  # a sparse map that is not one: tarfile raises ValueError while reading the header
    with tarfile.open(fileobj=broken, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(sparse_member("widget-main/hole.txt", 10), io.BytesIO(bytes(len(SPARSE_MAP))))
    served.bodies["/acme/widget/broken.tar.gz"] = _gzip(broken.getvalue())
    with pytest.raises(RemoteError, match="not a readable .tar.gz"):
        index_remote("acme/widget@broken", embed=False)


def _with_pax_member(name: str, pax: dict[str, str]) -> bytes:
    """FILES under widget-main/, and a small member `name` whose pax header says `pax`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": SHA}) as tar:
        for path, text in {**FILES, name: "def odd():\n    return 1\n"}.items():
            info = tarfile.TarInfo(f"widget-main/{path}")
            info.size, info.mtime = len(text.encode()), 1_700_000_000
            info.pax_headers = pax if path == name else {}
            tar.addfile(info, io.BytesIO(text.encode()))
    return _gzip(buffer.getvalue())


def test_a_member_claiming_more_bytes_than_the_unpacked_bound_refuses_the_archive_at_once(
        served: TarballServer) -> None:
    """tarfile steps over a member's data by reading its claimed size in 16 KiB blocks, empty ones past the end of
    the archive: a 10 KB archive whose pax header claimed 10**30 bytes kept a core busy for ever (this one's 4 GiB,
    a second's work, ended as an unreadable archive), whether the member was to be read or skipped (its name)."""
    for ref, name in (("claims", "odd.py"), ("skipped", "../odd.py")):
        served.bodies[f"/acme/widget/{ref}.tar.gz"] = _with_pax_member(name, {"size": str(2**32)})
        with pytest.raises(RemoteError, match=r"a member claims 4,294,967,296 bytes, more than "
                                              r"remote_max_unpacked_bytes \(1,073,741,824\)"):
            index_remote(f"acme/widget@{ref}", embed=False)


def test_a_member_whose_mtime_is_not_a_number_is_indexed(served: TarballServer) -> None:
    """A pax header's mtime is any float text: "nan" went into the index as NULL and the fetch failed on it with
    sqlite3's IntegrityError, a traceback for `index` and `search` alike."""
    served.bodies["/acme/widget/main.tar.gz"] = _with_pax_member("odd.py", {"mtime": "nan"})
    report = index_remote("acme/widget@main", embed=False)
    assert report.files_indexed == 5
    ws = open_remote("acme/widget@main")
    try:
        assert ws.read_lines("odd.py") == "def odd():\n    return 1\n"
    finally:
        ws.close()


def test_a_redirect_is_followed_only_within_the_network_and_scheme_it_started_on(
        served: TarballServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    # The refused target is an address off this machine: were the guard to let it through, the test fails here
    # rather than reach out (tests use loopback only).
    connect = socket.create_connection

    def loopback_only(address, *args, **kwargs):
        assert address[0] in ("127.0.0.1", "localhost", "::1"), f"the test tried to reach {address}"
        return connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", loopback_only)
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    port = served.base.rsplit(":", 1)[1]
    served.redirects["/acme/widget/moved.tar.gz"] = f"http://localhost:{port}/acme/widget/main.tar.gz"
    served.redirects["/acme/widget/file.tar.gz"] = "file:///etc/passwd"
    served.redirects["/acme/widget/out.tar.gz"] = "http://192.0.2.1:9/widget.tar.gz"  # TEST-NET-1: not this machine
    assert index_remote("acme/widget@moved", embed=False).files_indexed == 4  # another name for this machine
    with pytest.raises(RemoteError, match="refused the redirect to file:///etc/passwd: not http"):
        index_remote("acme/widget@file", embed=False)
    with pytest.raises(RemoteError, match="it is on a private network, the URL on this machine"):
        index_remote("acme/widget@out", embed=False, overrides={"remote_timeout_s": 0.5})

    from urllib.request import Request

    from codeloupe.remote_http import _GuardedRedirects, _Route

    with pytest.raises(RemoteError, match="from https down to http"):
        _GuardedRedirects(_Route("https://127.0.0.1:9/a.tar.gz")).http_error_302(
            Request("https://127.0.0.1:9/a.tar.gz"), None, 302, "Found", {"location": "http://127.0.0.1:9/a.tar.gz"})


@dataclass
class StubDNS:
    """socket.getaddrinfo for names ending in `.test` (a stand-in for DNS, which tests cannot reach): each gives
    the answers in `answers` in turn, the last one for good (an answer: its addresses, split by commas; "": the
    name does not resolve); every other name and address resolves as usual."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> StubDNS:
    import socket

    stub = StubDNS()
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if not str(host).endswith(".test"):
            return real(host, port, *args, **kwargs)
        answers = stub.answers[host]
        answer = answers[min(stub.asked.count(host), len(answers) - 1)]
        stub.asked.append(host)
        if not answer:  # a name this machine cannot resolve
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [info for address in answer.split(",") for info in real(address, port, *args, **kwargs)]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return stub


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Where the fetches connect: only ever to a loopback address, given as an address (a name would be resolved
    again when connecting); anything else fails the test before a packet leaves."""
    import ipaddress
    import socket

    made: list[str] = []
    connect = socket.create_connection

    def is_loopback_address(host: str) -> bool:
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:  # a name
            return False

    def loopback_addresses_only(address: Any, *args: Any, **kwargs: Any) -> Any:
        host = str(address[0])
        assert is_loopback_address(host), f"the fetch connected to {address}, not to a loopback address"
        made.append(host)
        return connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", loopback_addresses_only)
    return made


def test_a_redirect_connects_to_the_address_its_host_was_checked_at(
        served: TarballServer, dns: StubDNS, connections: list[str]) -> None:
    """DNS rebinding: a name that answers an address of the fetch's own network when it is checked, then
    another (here TEST-NET-1, off this machine) when asked again to connect."""
    dns.answers["rebind.test"] = ["127.0.0.1", "192.0.2.1"]
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    port = served.base.rsplit(":", 1)[1]
    served.redirects["/acme/widget/rebound.tar.gz"] = f"http://rebind.test:{port}/acme/widget/main.tar.gz"
    assert index_remote("acme/widget@rebound", embed=False).files_indexed == 4
    assert dns.asked == ["rebind.test"]  # resolved once, when checked
    assert connections == ["127.0.0.1", "127.0.0.1"]
    assert served.hosts[-1] == f"rebind.test:{port}"  # the name still goes in the Host header


def test_special_addresses_are_reached_only_when_the_url_names_them(
        served: TarballServer, dns: StubDNS, connections: list[str]) -> None:
    dns.answers |= {"metadata.test": ["169.254.169.254"], "mixed.test": ["127.0.0.1,169.254.169.254"]}
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    port = served.base.rsplit(":", 1)[1]
    refused = {  # from a fetch on this machine, each by redirect
        "metadata": ("http://169.254.169.254/latest/meta-data/", "link-local"),
        "unspecified": (f"http://0.0.0.0:{port}/acme/widget/main.tar.gz", "unspecified"),  # Linux: this machine
        "mapped": ("http://[::ffff:169.254.169.254]/", "link-local"),
        "multicast": ("http://224.0.0.1/", "multicast"),
        "by-name": (f"http://metadata.test:{port}/", "metadata.test is at 169.254.169.254, link-local"),
        "one-of-its-addresses": (f"http://mixed.test:{port}/acme/widget/main.tar.gz", "link-local"),
    }
    for ref, (location, why) in refused.items():
        served.redirects[f"/acme/widget/{ref}.tar.gz"] = location
        with pytest.raises(RemoteError, match=f"refused the redirect to .*{why}"):
            index_remote(f"acme/widget@{ref}", embed=False)
    with pytest.raises(RemoteError, match="refused: metadata.test is at 169.254.169.254, link-local"):
        index_remote(f"http://metadata.test:{port}/acme/widget/main.tar.gz", embed=False)  # the first URL too
    # Each fetch connected to the server it started on, and to nothing it was refused.
    assert connections == ["127.0.0.1"] * len(refused) and dns.asked.count("metadata.test") == 2

    # A fetch started on a private network (no test server is there: no connection is made here, only the
    # route's checks).
    from codeloupe.remote_http import _Route

    private = _Route("http://10.1.2.3/a.tar.gz")
    assert private.admit("http://10.1.2.3/a.tar.gz") == ""
    assert private.admit("http://10.9.9.9/b.tar.gz") == ""  # another host of the same network
    assert "link-local" in private.admit("http://169.254.169.254/latest/meta-data/")
    assert "a cloud metadata service" in private.admit("http://[fd00:ec2::254]/")
    assert "link-local" in private.admit("http://[64:ff9b::a9fe:a9fe]/")  # NAT64 of 169.254.169.254
    named = _Route("http://169.254.10.20:8080/a.tar.gz")  # the user named this address: it may be reached
    assert named.admit("http://169.254.10.20:8080/a.tar.gz") == ""
    assert "link-local" in named.admit("http://169.254.169.254/")  # but no other


def certificate_for(name: str, folder: Path) -> tuple[Path, Path, Path]:
    """A certificate authority's certificate, and a server certificate and key it signed for `name` only."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def made(subject: str, issuer: str, key: Any, signer: Any, ca: bool) -> x509.Certificate:
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                            critical=True)
        else:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = made("codeloupe test CA", "codeloupe test CA", ca_key, ca_key, True)
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(made(name, "codeloupe test CA", key, ca_key, False)
                         .public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@pytest.mark.parametrize("with_scheme", [True, False], ids=["http://host:port", "host:port"])
def test_a_proxy_the_user_set_carries_the_fetch_and_the_guard_still_holds(
        served: TarballServer, dns: StubDNS, connections: list[str], monkeypatch: pytest.MonkeyPatch,
        with_scheme: bool) -> None:
    """Behind a proxy that alone resolves outside names (a corporate network), connecting to checked addresses
    must not mean ignoring the user's `http_proxy` (spelt with its scheme or without, as urllib, curl and pip
    take it): the fetch goes through it, and a redirect the proxy relays is still checked. The tarball server
    plays the proxy here (it answers absolute-form requests)."""
    dns.answers["tarballs.proxied.test"] = [""]  # only the proxy can resolve it
    for name in ("no_proxy", "NO_PROXY", "https_proxy", "HTTPS_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", served.base if with_scheme else served.base.removeprefix("http://"))
    monkeypatch.setenv("CODELOUPE_REMOTE_TARBALL_URL", "http://tarballs.proxied.test/{owner}/{repo}/{ref}.tar.gz")
    monkeypatch.setenv("CODELOUPE_REMOTE_COMMIT_URL", "http://tarballs.proxied.test/commits/{owner}/{repo}/{ref}")
    served.bodies["http://tarballs.proxied.test/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    served.redirects["http://tarballs.proxied.test/acme/widget/meta.tar.gz"] = "http://169.254.169.254/latest/"
    assert index_remote("acme/widget@main", embed=False).files_indexed == 4
    assert "http://tarballs.proxied.test/acme/widget/main.tar.gz" in served.requests  # asked of the proxy
    assert connections and set(connections) == {"127.0.0.1"}  # the proxy's address, and nothing else
    with pytest.raises(RemoteError, match="refused the redirect to http://169.254.169.254/latest/: .*link-local"):
        index_remote("acme/widget@meta", embed=False)
    monkeypatch.setenv("no_proxy", "tarballs.proxied.test")  # not through the proxy: this machine must resolve it
    with pytest.raises(RemoteError, match="tarballs.proxied.test: cannot resolve it"):
        index_remote("acme/widget@main", embed=False, overrides={"remote_timeout_s": 0.5})


def test_a_redirect_around_the_proxy_does_not_carry_the_proxy_password(
        served: TarballServer, dns: StubDNS, connections: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's proxy password (in `http_proxy`) is the proxy's: a redirect to a host the fetch reaches
    directly (`no_proxy`) must not hand it to that host."""
    import base64

    dns.answers |= {"tarballs.proxied.test": ["127.0.0.1"], "direct.test": ["127.0.0.1"]}
    for name in ("NO_PROXY", "https_proxy", "HTTPS_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    port = served.base.rsplit(":", 1)[1]
    monkeypatch.setenv("http_proxy", f"http://codeloupe:s3cret@127.0.0.1:{port}")
    monkeypatch.setenv("no_proxy", "direct.test")
    monkeypatch.setenv("CODELOUPE_REMOTE_TARBALL_URL", f"http://tarballs.proxied.test:{port}/{{owner}}/{{repo}}/{{ref}}.tar.gz")
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    served.redirects[f"http://tarballs.proxied.test:{port}/acme/widget/moved.tar.gz"] = \
        f"http://direct.test:{port}/acme/widget/main.tar.gz"
    assert index_remote("acme/widget@moved", embed=False).files_indexed == 4
    password = "Basic " + base64.b64encode(b"codeloupe:s3cret").decode()
    assert served.requests == [f"http://tarballs.proxied.test:{port}/acme/widget/moved.tar.gz",  # to the proxy
                               "/acme/widget/main.tar.gz"]  # straight to the host
    assert served.proxy_credentials == [password, ""]


def test_over_https_the_checked_address_is_connected_to_and_the_name_verified(
        tmp_path: Path, dns: StubDNS, connections: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import ssl

    ca, cert, key = certificate_for("mirror.test", tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the client's default trust: this test's authority only
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    names: list[str | None] = []
    tls.sni_callback = lambda _socket, name, _context: names.append(name)
    server = TarballServer(tls=tls)
    try:
        server.bodies["/widget.tar.gz"] = tarball(FILES, comment=SHA)
        port = server.base.rsplit(":", 1)[1]
        dns.answers |= {"mirror.test": ["127.0.0.1", "192.0.2.1"], "other.test": ["127.0.0.1"]}
        assert index_remote(f"https://mirror.test:{port}/widget.tar.gz", embed=False).files_indexed == 4
        assert names == ["mirror.test"] and connections == ["127.0.0.1"]
        assert server.hosts == [f"mirror.test:{port}"]
        with pytest.raises(RemoteError, match="CERTIFICATE_VERIFY_FAILED"):  # the certificate is not other.test's
            index_remote(f"https://other.test:{port}/widget.tar.gz", embed=False)
    finally:
        server.close()


def test_a_body_cut_short_of_its_length_or_trickled_forever_is_refused(served: TarballServer) -> None:
    body = tarball(FILES, comment=SHA)
    served.bodies["/acme/widget/short.tar.gz"] = body
    served.announced["/acme/widget/short.tar.gz"] = len(body) + 5000  # a complete archive, then the line drops
    served.bodies["/acme/widget/slow.tar.gz"] = body
    served.trickled.add("/acme/widget/slow.tar.gz")
    with pytest.raises(RemoteError, match=f"ended after {len(body)} of the {len(body) + 5000} bytes"):
        index_remote("acme/widget@short", embed=False)
    with pytest.raises(RemoteError, match="not received within remote_deadline_s"):
        index_remote("acme/widget@slow", embed=False, overrides={"remote_deadline_s": 0.5})


def test_a_refresh_killed_midway_leaves_the_index_pinned_to_what_it_holds(served: TarballServer) -> None:
    served.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
    index_remote("acme/widget@main", embed=False)
    served.bodies["/acme/widget/main.tar.gz"] = tarball({"moved.py": "def moved():\n    return 1\n"}, comment=OTHER_SHA)

    def killed(progress) -> None:
        if progress.phase == "chunk":  # the new files are written, the revision not yet
            raise KeyboardInterrupt

    ws = open_remote("acme/widget@main", refresh=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            ws.index(killed)
    finally:
        ws.close()
    ws = open_remote("acme/widget@main")  # a later search: the index is used as it is
    try:
        ws.index()
        assert ws.revision == SHA
        assert sorted(ws.store.file_rows()) == ["README.md", "app.py", "pkg/__init__.py", "pkg/parser.py"]
    finally:
        ws.close()


def test_a_url_naming_an_unspecified_address_is_on_this_machine_for_0_0_0_0_and_for_ipv6(
        served: TarballServer) -> None:
    """`http://0.0.0.0/` and `http://[::]/` reach this machine (Linux connects both to its loopback address), but
    counted as on a private network: their redirects to this machine were refused, and to the local network let
    through."""
    from codeloupe.remote_http import _Route

    direct = TarballServer(host="::1")
    try:
        for server, named, loopback in ((served, "0.0.0.0", "127.0.0.1"), (direct, "[::]", "[::1]")):
            port = server.base.rsplit(":", 1)[1]
            server.bodies["/acme/widget/main.tar.gz"] = tarball(FILES, comment=SHA)
            server.redirects["/acme/widget/moved.tar.gz"] = f"http://{loopback}:{port}/acme/widget/main.tar.gz"
            url = f"http://{named}:{port}/acme/widget/moved.tar.gz"
            assert index_remote(url, embed=False).files_indexed == 4
            assert server.requests[-2:] == ["/acme/widget/moved.tar.gz", "/acme/widget/main.tar.gz"]
            route = _Route(url)  # only the route's checks: no connection is made
            assert route.admit(url) == ""
            assert route.admit("http://10.1.2.3/a.tar.gz") == "it is on a private network, the URL on this machine"
    finally:
        direct.close()


@pytest.mark.parametrize("no_proxy", ["::1", "[::1]", "localhost,[::1]:{port}", ".example.test, ::1"])
def test_no_proxy_names_an_ipv6_address_with_or_without_its_brackets(
        served: TarballServer, connections: list[str], monkeypatch: pytest.MonkeyPatch, no_proxy: str) -> None:
    """`no_proxy=::1` did not match a URL's `[::1]` (urllib compares the host as the URL spells it): the fetch
    went through the proxy. The tarball server on 127.0.0.1 plays the proxy; the one on ::1 is reached directly."""
    direct = TarballServer(host="::1")
    try:
        port = direct.base.rsplit(":", 1)[1]
        for name in ("NO_PROXY", "https_proxy", "HTTPS_PROXY", "HTTP_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", served.base)
        monkeypatch.setenv("no_proxy", no_proxy.format(port=port))
        direct.bodies["/widget.tar.gz"] = tarball(FILES, comment=SHA)
        assert index_remote(f"{direct.base}/widget.tar.gz", embed=False).files_indexed == 4
        assert direct.requests == ["/widget.tar.gz"] and served.requests == []  # not through the proxy
        assert connections == ["::1"]
    finally:
        direct.close()
