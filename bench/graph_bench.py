"""Graph benchmark over the public golden corpora: edge counts per language and kind, timings, and spot
checks that known imports and calls were found.

    .venv/bin/python bench/graph_bench.py [--corpora /work/corpora] [--json]

Indexes each corpus into a throw-away cache (no embeddings: the structural lane is what is measured here).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from codeloupe.api import Workspace
from codeloupe.graph import graph_map, graph_path, update_edges
from codeloupe.graph.build import load_graph

# (corpus, source, target, kind): edges that must exist in each corpus.
SPOT_CHECKS = [
    ("express", "lib/router/index.js", "lib/router/layer.js", "import"),
    ("express", "lib/router/index.js", "lib/router/route.js", "import"),
    ("express", "lib/express.js", "lib/application.js", "import"),
    ("express", "lib/router/route.js", "lib/router/layer.js", "call"),
    ("click", "src/click/core.py", "src/click/parser.py", "import"),
    ("click", "src/click/decorators.py", "src/click/core.py", "import"),
    ("click", "src/click/__init__.py", "src/click/core.py", "import"),
    ("click", "src/click/termui.py", "src/click/_termui_impl.py", "import"),
    ("sinatra", "lib/sinatra/main.rb", "lib/sinatra/base.rb", "import"),
    ("sinatra", "lib/sinatra/base.rb", "lib/sinatra/indifferent_hash.rb", "import"),
    ("gin", "context.go", "render/render.go", "import"),
    ("gin", "context.go", "binding/binding.go", "import"),
    ("gin", "gin.go", "routergroup.go", "call"),
]


def bench(root: Path) -> dict:
    cache = tempfile.mkdtemp(prefix="codeloupe-graph-bench-")
    ws = Workspace(root, overrides={"cache_dir": cache, "embed_provider": "none"})
    try:
        started = time.perf_counter()
        report = ws.index()
        index_s = time.perf_counter() - started
        started = time.perf_counter()
        extracted = update_edges(ws)
        extract_s = time.perf_counter() - started
        fresh = Workspace(root, overrides={"cache_dir": cache, "embed_provider": "none"})
        started = time.perf_counter()
        update_edges(fresh, [])  # a new workspace object resolves everything: resolution alone, nothing to parse
        resolve_s = time.perf_counter() - started
        fresh.close()
        started = time.perf_counter()
        graph = load_graph(ws)
        gmap = graph_map(ws)
        build_s = time.perf_counter() - started
        language = dict(zip(graph.paths, graph.languages))
        counts: Counter[tuple[str, str]] = Counter((language[e.source], e.kind) for e in graph.edges)
        present = {(e.source, e.target, e.kind) for e in graph.edges}
        checks = [{"source": s, "target": t, "kind": k, "found": (s, t, k) in present}
                  for corpus, s, t, k in SPOT_CHECKS if corpus == root.parent.name]
        started = time.perf_counter()
        sample = [p for p in graph.paths if p.endswith((".py", ".js", ".rb", ".go"))]
        route = graph_path(ws, sample[0], sample[-1]).to_dict() if len(sample) > 1 else None
        path_s = time.perf_counter() - started
        return {
            "corpus": root.parent.name, "files": report.files_seen, "nodes": len(graph.paths),
            "facts_extracted": extracted,
            "edges": {f"{lang}/{kind}": n for (lang, kind), n in sorted(counts.items())},
            "communities": sum(1 for c in gmap.communities if c.size > 1),
            "god_nodes": [g.path for g in gmap.gods],
            "spot_checks": checks,
            "route_sample": {"from": route["from"], "to": route["to"], "hops": len(route["hops"]),
                             "note": route["note"]} if route else None,
            "seconds": {"index": round(index_s, 3), "extract_and_resolve": round(extract_s, 3),
                        "resolve_only": round(resolve_s, 3), "build_graph": round(build_s, 3),
                        "path": round(path_s, 3)},
        }
    finally:
        ws.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", default="/work/corpora", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    roots = [args.corpora / name / "repo" for name in ("click", "express", "sinatra", "gin")]
    results = [bench(root) for root in roots if root.is_dir()]
    if not results:
        print(f"no corpora under {args.corpora}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    failed = 0
    for r in results:
        print(f"{r['corpus']}: {r['nodes']} code files, {r['communities']} communities, "
              f"hubs: {', '.join(r['god_nodes']) or '-'}")
        print("  edges: " + ", ".join(f"{k} {v}" for k, v in r["edges"].items()))
        print("  seconds: " + ", ".join(f"{k} {v}" for k, v in r["seconds"].items()))
        for check in r["spot_checks"]:
            failed += not check["found"]
            print(f"  {'ok  ' if check['found'] else 'MISS'} {check['source']} -{check['kind']}-> {check['target']}")
        if r["route_sample"]:
            rs = r["route_sample"]
            print(f"  route {rs['from']} -> {rs['to']}: {rs['hops']} hops; {rs['note']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
