"""`codeloupe serve --store URL`: the HTTP API over repositories of the shared index, with no checkout on the
serving machine (files are rebuilt from the index's chunks) and answers pinned to the commit indexed."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx2 as httpx
from served_store import served_store

from codeloupe.api import Workspace

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"


def test_serve_answers_every_repository_of_the_shared_index_without_a_checkout(tmp_path: Path,
                                                                               pg_url: str) -> None:
    queries = {"python": "charge the card total price", "go": "open the store and flush it"}
    expected = {}
    for name, query in queries.items():
        root = tmp_path / name
        shutil.copytree(FIXTURES / name, root)
        ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url})
        try:
            ws.index()
            expected[name] = ([h.path for h in ws.search(query).files],
                              (root / next(iter(sorted(ws.store.file_rows())))).read_text())
            first_path = sorted(ws.store.file_rows())[0]
        finally:
            ws.close()
        assert expected[name][0]
        if name == "python":
            python_first = first_path
        shutil.rmtree(root)  # the server has no checkout to read from
    with served_store(pg_url) as base:
        for name, query in queries.items():
            bundle = httpx.get(f"{base}/v1/search", params={"q": query, "root": name}).json()
            assert [f["path"] for f in bundle["core"] + bundle["related"]] == expected[name][0]
        text = httpx.get(f"{base}/v1/expand", params={"path": python_first, "root": "python"}).json()["text"]
        assert text == expected["python"][1]
        everything = httpx.get(f"{base}/v1/search/all", params={"q": "flush the store, total price"}).json()
        assert {hit["repository"] for hit in everything["core"] + everything["related"]} == {"python", "go"}
        subset = httpx.get(f"{base}/v1/search/all", params={"q": "flush the store, total price", "repos": "go"})
        assert {hit["repository"] for hit in subset.json()["core"] + subset.json()["related"]} == {"go"}
        assert httpx.get(f"{base}/v1/search/all", params={"q": "flush", "repos": "go,nowhere"}).status_code == 400
        # `*` names every repository, as in MCP's `repos` (it was refused as "not a served workspace" here).
        starred = httpx.get(f"{base}/v1/search/all", params={"q": "flush the store, total price", "repos": "*"})
        assert starred.status_code == 200, starred.text
        assert {hit["repository"] for hit in starred.json()["core"] + starred.json()["related"]} == {"python", "go"}
        status = httpx.get(f"{base}/v1/status").json()["workspaces"]
        assert {w["root"] for w in status} == {"python", "go"} and all(w["files"] for w in status)


def test_serve_answers_a_graph_target_from_the_index_never_from_its_own_working_directory(
        tmp_path: Path, pg_url: str, monkeypatch) -> None:
    root = tmp_path / "python"
    shutil.copytree(FIXTURES / "python", root)
    (root / "NOTES.md").write_text("# Notes\n\nIndexed, and no node of the graph.\n")
    ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url})
    try:
        ws.index()
    finally:
        ws.close()
    shutil.rmtree(root)
    # The server's working directory holds a folder named as the repository, with things the index does not
    # hold: a graph request once answered from them (`python` was taken for a folder of this machine).
    here = tmp_path / "server"
    (here / "python" / "planted" / "deeper").mkdir(parents=True)
    (here / "python" / "planted.py").write_text("print('on the server only')\n")
    monkeypatch.chdir(here)
    with served_store(pg_url) as base:
        def graph(node: str) -> httpx.Response:
            return httpx.get(f"{base}/v1/graph", params={"node": node, "root": "python"})

        for planted in ("planted/deeper", "planted.py"):
            assert graph(planted).json() == {"error": f"{planted} is not in the graph (no such file in the workspace)"}
        # What the index holds is answered with no checkout: a folder's part of the graph, a file not of it.
        folder = graph("src/shop").json()
        assert folder["folder"] == "src/shop" and "src/shop/cart.py" in [f["path"] for f in folder["files"]]
        assert graph("NOTES.md").json() == {"error": "NOTES.md is not in the graph (not a code file of the graph)"}
