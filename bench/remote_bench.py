"""Remote index benchmark: the same tree indexed from disk and from a .tar.gz served on 127.0.0.1.

    .venv/bin/python bench/remote_bench.py TREE [TREE ...]

Each tree is packed into a gzipped tarball in memory (under a `NAME-<sha>/` folder, as GitHub packs them) and
served by a loopback HTTP server; each index runs in a fresh subprocess with its own cache dir, chunks only (no
vectors). Reports files, chunks, seconds and peak RSS for both, and the remote index's revision.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_CHILD = r"""
import json, resource, sys, time
from codeloupe.api import Workspace, open_remote
t = time.perf_counter()
ws = open_remote(sys.argv[1], refresh=True) if sys.argv[1].startswith("http") else Workspace(sys.argv[1])
report = ws.index()
print(json.dumps({"files": report.files_indexed, "chunks": report.chunks, "seconds": time.perf_counter() - t,
                  "root": report.root, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def pack(tree: Path) -> bytes:
    sha = hashlib.sha1(str(tree).encode()).hexdigest()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(tree.resolve(), arcname=f"{tree.resolve().name}-{sha}")
    return buffer.getvalue()


def serve(body: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def measure(source: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "CODELOUPE_CACHE_DIR": cache, "CODELOUPE_EMBED_PROVIDER": "none"}
        out = subprocess.run([sys.executable, "-c", _CHILD, source], capture_output=True, text=True, check=True,
                             env=env, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    args = parser.parse_args()
    for tree in args.trees:
        body = pack(tree)
        httpd = serve(body)
        try:
            url = f"http://127.0.0.1:{httpd.server_address[1]}/{tree.resolve().name}.tar.gz"
            local, remote = measure(str(tree)), measure(url)
        finally:
            httpd.shutdown()
            httpd.server_close()
        print(json.dumps({"tree": str(tree), "tarball_kb": len(body) // 1024, "local": local, "remote": remote}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
