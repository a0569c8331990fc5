"""`codeloupe/search`: the ranked, complete bundle (docs/protocol.md)."""

from __future__ import annotations

from typing import Any

from codeloupe_lsp.convert import JSON, pruned_result, search_result, uri_to_path
from codeloupe_lsp.params import Params, invalid
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import Target, folder_target, targets

METHOD = "codeloupe/search"
MODES = ("code", "docs", "both")
DEFAULT_LIMIT = 12


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_search(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        query = params.text("query", required=True, non_empty=True)
        return await search(ls, query, scope=params.text("scope"), mode=params.choice("docs", MODES, "code"),
                            limit=params.integer("limit", DEFAULT_LIMIT), folder_uri=params.text("folderUri"),
                            prune=bool(params.flag("prune", False)))


async def search(ls: CodeloupeServer, query: str, *, scope: str = "", mode: str = "code",
                 limit: int = DEFAULT_LIMIT, folder_uri: str = "", prune: bool = False) -> JSON:
    """Search one folder, or every folder and merge; `scope` may be a URI, which also picks the folder.

    `prune`: only the ranked chunks, flat (the CLI's `--prune`), from one folder: ranks of several folders'
    bundles do not merge into one flat list without their files' scores."""
    chosen: list[tuple[Target, str]]
    if scope.startswith("file:"):
        if uri_to_path(scope) is None:
            raise invalid(f"{METHOD}: `scope` {scope!r} is not a file: URI")
        folder, folder_scope = ls.folder_for(scope, "scope")
        chosen = [(folder_target(folder), folder_scope)]
    else:
        chosen = [(target, scope) for target in targets(ls, folder_uri)]
    if prune and len(chosen) > 1:
        raise invalid(f"{METHOD}: `prune` answers from one folder; pass `folderUri` or a `scope` URI")
    convert = pruned_result if prune else search_result
    results = []
    for target, target_scope in chosen:
        await target.ready()
        bundle = await ls.engine(target.ws.search, query, scope=target_scope, mode=mode, limit=limit)
        results.append(convert(bundle, target.uris(bundle.revision)))
    return results[0] if len(results) == 1 else merge_results(results)


def merge_results(results: list[JSON]) -> JSON:
    """One result over several folders: every candidate kept, CORE before RELATED, each by score (the long tails
    of every folder after the rest of RELATED)."""
    core = sorted((f for r in results for f in r["core"]), key=lambda f: -f["score"])
    related = sorted((f for r in results for f in r["related"]), key=lambda f: (f["tail"], -f["score"]))
    for rank, file in enumerate([*core, *related], 1):
        file["rank"] = rank
    lanes: dict[str, JSON] = {}
    for result in results:
        for lane in result["lanes"]:
            seen = lanes.setdefault(lane["name"], dict(lane))
            seen["ready"] = seen["ready"] and lane["ready"]
            seen["coverage"] = min(seen["coverage"], lane["coverage"])
            if lane["note"] and lane["note"] not in seen["note"]:
                seen["note"] = "; ".join(n for n in (seen["note"], lane["note"]) if n)
    timing: dict[str, float] = {}
    for result in results:
        for key, ms in result["timingMs"].items():
            timing[key] = timing.get(key, 0.0) + ms
    first = results[0]
    notes = list(dict.fromkeys(note for result in results for note in result["notes"]))
    return {"query": first["query"], "issueMode": any(r["issueMode"] for r in results), "mode": first["mode"],
            "core": core, "related": related, "lanes": list(lanes.values()), "notes": notes, "timingMs": timing}
