"""A learned linear adapter on the query side of the embedded model (issue 13): q' = normalise(q + U V^T q).

The chunk and skeleton vectors (and so every index and cache) stay as they are; only the query's vector is mapped
before the dense lane scores it. Fitted in numpy on the dev sets' own pairs, chosen by cross-validation across
dev packages, reported on each set separately.

    # 1. dump every sampled corpus's vectors (the store's int8 rows, as the dense lane reads them) and each query's
    #    vector as the engine embeds it (Searcher._embed_queries, the texts the engine picks for the dense lane)
    CODELOUPE_CACHE_DIR=/work/corpora/cache PYTHONPATH=$PWD/engine:$PWD/bench .venv/bin/python \
        bench/query_adapter.py dump DIR SET.json=TREES [...] [--corpora-per-set N] [--queries-per-corpus N] [--max-files N]
    # 2. fit with cross-validation grouped by package (the dense lane alone, offline), keep each fold's adapter
    PYTHONPATH=$PWD/engine .venv/bin/python bench/query_adapter.py fit --dev DIR [...] --out FITS.npz \
        [--grid "rank=16,32,64,0" --grid "l2=..."] [--test DIR ...]
    # 3. the real engine with the adapted query, the dense lane alone and every lane, before and after in one run;
    #    on dev each package gets the adapter of the fold that did not see it
    CODELOUPE_CACHE_DIR=/work/corpora/cache PYTHONPATH=$PWD/engine:$PWD/bench .venv/bin/python \
        bench/query_adapter.py eval FITS.npz SET.json=TREES [...] [--cv] [sampling options as in dump]

The loss: per query, a softmax over its repository's files (every file the mode's mask keeps: the in-repository
negatives, the dense lane's own top list among them; other repositories' files never compete in a search, so no
in-batch negatives from them) of a file's dense score, the best of its chunks' (cosine + SKELETON_WEIGHT x its
skeleton's cosine, `lanes.dense`), smoothed by a log-sum-exp; the gold files are the targets; plus l2 x (|U|^2 +
|V|^2) (a nuclear-norm penalty on U V^T), or l2 x |A|^2 for the full map (`--grid rank=0`), which pull the map
toward the identity. By default the engine's kind factors (`ranking.FILE_KIND_PENALTY`: tests, examples,
declarations, ... demoted) take part: a file of a demoted kind that is not gold is no rival in the softmax, and
the offline ranking puts each file's factor on 1 / (60 + its dense rank) as the engine does for one lane (the
offline dense-alone figures then match the engine's: docpairs dev R@1 .583 both). `--no-kinds` trains and scores
without them: its offline gains were the adapter learning to bury tests, which the engine does already.
Offline metrics: R@1, Acc@5 (every gold file in the top 5), gold in the lane's first 200, MRR; `eval` prints
`codeloupe eval`'s (bundle recall in place of the 200).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

SKELETON_WEIGHT = 0.5  # ranking.SKELETON_WEIGHT, read from the engine where it is imported
TEMPERATURE = 20.0  # the file softmax's scale: cosines differ by hundredths among a query's first files
SMOOTH_MAX = 50.0  # log-sum-exp sharpness standing in for the best chunk of a file
KINDS = True  # train and score with the engine's kind factors (tests, examples, ... demoted); --no-kinds: without


# ------------------------------------------------------------------------------------------------ dump

def _corpora(spec: str, args: argparse.Namespace) -> list[tuple[str, str, Path, list[dict]]]:
    """(set name, corpus id, its tree, its queries) of one SET.json=TREES argument, sampled as baseline.py does."""
    from codeloupe.eval.golden import load_golden
    from devsets.baseline import sample

    set_name, _, trees = spec.partition("=")
    path = Path(set_name)
    golden = sample(load_golden(path), Path(trees), args.corpora_per_set, args.queries_per_corpus, args.max_files)
    name = path.name.split(".json")[0]
    return [(name, c.id, Path(trees) / c.id / "repo",
             [{"id": q.id, "kind": q.kind, "query": q.query, "gold": list(q.gold_files),
               "mode": "docs" if q.kind == "docs" else "code"} for q in c.queries]) for c in golden.corpora]


def _tree_key(tree: Path) -> str:
    return hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:16]


def dump(args: argparse.Namespace) -> int:
    from codeloupe.api import Workspace
    from codeloupe.embed import describe_provider
    from codeloupe.issue import is_issue
    from codeloupe.search import Searcher

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    captured: list[np.ndarray] = []
    original = Searcher._embed_queries

    def embed_queries(self: Searcher, texts: list[str]) -> np.ndarray | None:
        vectors = original(self, texts)
        if vectors is not None:
            captured.append(np.array(vectors, np.float32))
        return vectors

    Searcher._embed_queries = embed_queries
    records = []
    for spec in args.sets:
        for set_name, corpus_id, tree, queries in _corpora(spec, args):
            key = _tree_key(tree)
            ws = Workspace(tree)
            try:
                ws.index()
                ws.embed()
                searcher = ws.searcher()
                snap = searcher.snapshot()
                if not (out / f"{key}.npz").exists():
                    _, model = describe_provider(ws.settings)
                    chunks, skeletons = (ws.store.vector_matrix(t, model) for t in ("chunk", "skeleton"))
                    ids = snap.table.ids
                    pos = np.searchsorted(ids, chunks.ids)
                    assert (ids[pos] == chunks.ids).all()
                    file_ids = snap.table.file_ids[pos]
                    files = sorted(set(file_ids.tolist()))
                    file_index = {f: i for i, f in enumerate(files)}
                    skeleton_of = {int(f): i for i, f in enumerate(skeletons.ids)}
                    np.savez_compressed(
                        out / f"{key}.npz", chunk_q=chunks.q, chunk_scales=chunks.scales,
                        chunk_file=np.array([file_index[f] for f in file_ids.tolist()], np.int32),
                        chunk_is_doc=snap.chunk_is_doc[pos],
                        file_skeleton=np.array([skeleton_of.get(f, -1) for f in files], np.int32),
                        skeleton_q=skeletons.q, skeleton_scales=skeletons.scales,
                        file_paths=np.array([snap.file_paths[f] for f in files]),
                        file_kinds=np.array([snap.file_kind.get(f, 0) for f in files], np.int8))
                for q in queries:
                    captured.clear()
                    ws.search(q["query"], mode=q["mode"])
                    if not captured:
                        continue
                    records.append({**q, "set": set_name, "corpus": corpus_id, "tree": key,
                                    "issue": q["mode"] == "code" and is_issue(q["query"]),
                                    "vectors": captured[0].round(6).tolist()})
            finally:
                ws.close()
            print(f"[dump] {set_name} {corpus_id}: {len(queries)} queries", file=sys.stderr, flush=True)
    (out / "queries.json").write_text(json.dumps(records) + "\n", encoding="utf-8")
    print(f"{len(records)} queries -> {out}")
    return 0


# ------------------------------------------------------------------------------------------------ data

class Corpus:
    """One tree's chunk vectors grouped by file, as the dense lane scores them: e = chunk + w x skeleton."""

    def __init__(self, path: Path) -> None:
        z = np.load(path)
        chunks = z["chunk_q"].astype(np.float32) * z["chunk_scales"][:, None]
        skeletons = z["skeleton_q"].astype(np.float32) * z["skeleton_scales"][:, None]
        file_skeleton = z["file_skeleton"]
        chunk_file = z["chunk_file"]
        skel = np.zeros_like(chunks)
        has = file_skeleton[chunk_file] >= 0
        skel[has] = skeletons[file_skeleton[chunk_file][has]]
        self.paths = [str(p) for p in z["file_paths"]]
        self.kinds = z["file_kinds"] if "file_kinds" in z else np.zeros(len(self.paths), np.int8)
        self.by_mode: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for mode, keep in (("code", ~z["chunk_is_doc"]), ("docs", z["chunk_is_doc"])):
            rows = np.flatnonzero(keep)
            rows = rows[np.argsort(chunk_file[rows], kind="stable")]
            files = chunk_file[rows]
            starts = np.flatnonzero(np.r_[True, files[1:] != files[:-1]]) if len(files) else np.zeros(0, np.int64)
            # (e [m, d] grouped by file, run starts [k], file index of each run [k])
            self.by_mode[mode] = ((chunks[rows] + SKELETON_WEIGHT * skel[rows]).astype(np.float32), starts,
                                  files[starts] if len(files) else np.zeros(0, np.int64))


def load(dirs: list[str]) -> tuple[list[dict], dict[str, Corpus]]:
    records, corpora = [], {}
    for d in dirs:
        for r in json.loads((Path(d) / "queries.json").read_text()):
            if r["tree"] not in corpora:
                corpora[r["tree"]] = Corpus(Path(d) / f"{r['tree']}.npz")
            records.append(r)
    return records, corpora


def repository(record: dict) -> str:
    """The package a query is about, the same across sets (docs and docswords share trees)."""
    return record["corpus"].rsplit("-fix-", 1)[0]


def fold_of(record: dict, folds: int) -> int:
    return int(hashlib.sha256(repository(record).encode()).hexdigest(), 16) % folds


class Groups:
    """Queries grouped by (tree, mode): one product per group. Gold files as file indices; queries whose gold
    file has no chunk under the mode's mask are scored (a miss) but teach nothing."""

    def __init__(self, records: list[dict], corpora: dict[str, Corpus]) -> None:
        by: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, r in enumerate(records):
            by[(r["tree"], r["mode"])].append(i)
        self.items = []
        for (tree, mode), members in by.items():
            e, starts, files = corpora[tree].by_mode[mode]
            if not len(files):
                continue
            index = {corpora[tree].paths[f]: k for k, f in enumerate(files)}
            q = np.array([records[i]["vectors"][0] for i in members], np.float32)
            gold = np.zeros((len(members), len(files)), bool)
            for row, i in enumerate(members):
                for g in records[i]["gold"]:
                    if g in index:
                        gold[row, index[g]] = True
            kinds = corpora[tree].kinds[files]
            penalty = np.array([_penalties(records[i]["issue"])[kinds] for i in members], np.float32)
            self.items.append((members, q, e, starts, gold, penalty))
        self.n = sum(len(m) for m, *_ in self.items)


def _penalties(issue: bool) -> np.ndarray:
    """The engine's soft factor of each file kind (`Searcher._adjust`), by `search.FILE_KINDS` index."""
    from codeloupe import ranking as R
    from codeloupe.search import FILE_KINDS

    table = R.FILE_KIND_PENALTY_ISSUE if issue else R.FILE_KIND_PENALTY
    return np.array([table.get(kind, 1.0) for kind in FILE_KINDS], np.float32)


def adapt(q: np.ndarray, params: tuple[np.ndarray, np.ndarray] | np.ndarray | None) -> np.ndarray:
    """normalise(q + U V^T q) (a pair) or normalise(q + A q) (a matrix); None: q."""
    if params is None:
        return q
    m = q + ((q @ params[1]) @ params[0].T if isinstance(params, tuple) else q @ params.T)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def file_scores(qa: np.ndarray, e: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each file's dense score: its best chunk's (exact max, as the lane ranks files)."""
    return np.maximum.reduceat(qa @ e.T, starts, axis=1)


def evaluate(groups: Groups, params, total: int) -> np.ndarray:
    """(hit@1, all gold in top 5, all gold in the lane's 200, reciprocal rank) per record index (NaN: not scored)."""
    rows = np.full((total, 4), np.nan)
    for members, q, e, starts, gold, penalty in groups.items:
        s = file_scores(adapt(q, params), e, starts)
        if KINDS:  # as the engine ranks one lane: the kind factor on 1 / (k + the lane's rank)
            ranks = np.empty_like(s)
            np.put_along_axis(ranks, np.argsort(-s, axis=1, kind="stable"), np.arange(1, s.shape[1] + 1)[None, :]
                              .repeat(len(s), 0).astype(s.dtype), axis=1)
            s = penalty / (60.0 + ranks)
        order = np.argsort(-s, axis=1, kind="stable")
        ranked_gold = np.take_along_axis(gold, order, axis=1)
        for row, i in enumerate(members):
            g = np.flatnonzero(ranked_gold[row]) + 1
            n_gold = int(gold[row].sum())
            first = g[0] if len(g) else None
            rows[i] = (float(first == 1), float(n_gold > 0 and len(g) == n_gold and g[-1] <= 5),
                       float(n_gold > 0 and g[-1] <= 200), 1.0 / first if first else 0.0)
    return rows


def _loss(flat: np.ndarray, groups: Groups, rank: int, d: int, l2: float) -> tuple[float, np.ndarray]:
    if rank:
        u, v = flat[:d * rank].reshape(d, rank), flat[d * rank:].reshape(d, rank)
    else:
        a = flat.reshape(d, d)
    total, n = 0.0, 0
    grad_m = []  # per group: dL/d(unnormalised m) [nq, d] with its q
    for _, q, e, starts, gold, penalty in groups.items:
        teach = gold.any(axis=1)
        if not teach.any():
            continue
        q, gold, penalty = q[teach], gold[teach], penalty[teach]
        m = q + ((q @ v) @ u.T if rank else q @ a.T)
        norm = np.linalg.norm(m, axis=1, keepdims=True)
        qa = m / norm
        s = qa @ e.T  # [nq, m]
        # smooth max per file: f = log sum exp(b s) / b over the file's run
        run_max = np.maximum.reduceat(s, starts, axis=1)
        lengths = np.diff(np.r_[starts, s.shape[1]])
        ex = np.exp(SMOOTH_MAX * (s - np.repeat(run_max, lengths, axis=1)))
        sums = np.add.reduceat(ex, starts, axis=1)
        f = run_max + np.log(sums) / SMOOTH_MAX
        within = ex / np.repeat(sums, lengths, axis=1)  # d f / d s
        z = TEMPERATURE * f
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        if KINDS:  # a file the engine demotes by its kind is no rival the query must be moved away from
            p = np.where(gold | (penalty >= 1.0), p, 0.0)
        p /= p.sum(axis=1, keepdims=True)
        pg = np.where(gold, p, 0.0)
        pg_sum = pg.sum(axis=1, keepdims=True)
        total -= float(np.log(pg_sum).sum())
        n += len(q)
        dz = p - pg / pg_sum  # d loss / d z
        ds = np.repeat(TEMPERATURE * dz, lengths, axis=1) * within
        dqa = ds @ e
        # through the normalisation
        dm = (dqa - qa * (dqa * qa).sum(axis=1, keepdims=True)) / norm
        grad_m.append((q, dm))
    n = max(n, 1)
    if rank:
        gu, gv = np.zeros_like(u), np.zeros_like(v)
        for q, dm in grad_m:
            qv = q @ v  # [nq, r]
            gu += dm.T @ qv
            gv += q.T @ (dm @ u)
        loss = total / n + l2 * float((u * u).sum() + (v * v).sum())
        grad = np.concatenate([(gu / n + 2 * l2 * u).ravel(), (gv / n + 2 * l2 * v).ravel()])
    else:
        ga = np.zeros_like(a)
        for q, dm in grad_m:
            ga += dm.T @ q
        loss = total / n + l2 * float((a * a).sum())
        grad = (ga / n + 2 * l2 * a).ravel()
    return loss, grad


def fit(groups: Groups, rank: int, l2: float, d: int, iterations: int, seed: int = 0):
    """The adapter minimising the loss (L-BFGS from a small deterministic start; U V^T = 0 is a saddle)."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    start = (rng.standard_normal(2 * d * rank) * 1e-3) if rank else np.zeros(d * d)
    result = minimize(_loss, start, args=(groups, rank, d, l2), jac=True, method="L-BFGS-B",
                      options={"maxiter": iterations})
    flat = result.x.astype(np.float32)
    if rank:
        return flat[:d * rank].reshape(d, rank), flat[d * rank:].reshape(d, rank)
    return flat.reshape(d, d)


def summary(rows: np.ndarray) -> str:
    rows = rows[~np.isnan(rows[:, 0])]
    if not len(rows):
        return "(none)"
    m = rows.mean(0)
    return f"R@1 {m[0]:.3f}  Acc@5 {m[1]:.3f}  in 200 {m[2]:.3f}  MRR {m[3]:.3f}  (n={len(rows)})"


def _grid(items: list[str]) -> list[tuple[int, float]]:
    axes = {"rank": [32], "l2": [0.01]}
    for item in items:
        name, values = item.split("=", 1)
        axes[name] = [int(v) if name == "rank" else float(v) for v in values.split(",")]
    return [(r, c) for r in axes["rank"] for c in axes["l2"]]


def fit_command(args: argparse.Namespace) -> int:
    dev, corpora = load(args.dev)
    d = len(dev[0]["vectors"][0])
    sets = list(dict.fromkeys(r["set"] for r in dev))
    grid = _grid(args.grid)
    base = evaluate(Groups(dev, corpora), None, len(dev))
    print(f"dev: {len(dev)} queries, {len({repository(r) for r in dev})} packages; dense lane alone, offline")
    for s in sets:
        print(f"  {s:16s} today  {summary(base[[r['set'] == s for r in dev]])}")
    print(f"  {'all dev':16s} today  {summary(base)}", flush=True)
    # cv[k][fold] = the rows of the fold's queries under grid point k fitted on the other folds
    cv = [np.full((len(dev), 4), np.nan) for _ in grid]
    inner = [[np.full((len(dev), 4), np.nan) for _ in range(args.folds)] for _ in grid]
    saved: dict[str, np.ndarray] = {}
    for fold in range(args.folds):
        inside = [i for i, r in enumerate(dev) if fold_of(r, args.folds) == fold]
        outside = [i for i, r in enumerate(dev) if fold_of(r, args.folds) != fold]
        train = Groups([dev[i] for i in outside], corpora)
        held = Groups([dev[i] for i in inside], corpora)
        for k, (rank, l2) in enumerate(grid):
            params = fit(train, rank, l2, d, args.iterations)
            rows = evaluate(held, params, len(inside))
            cv[k][inside] = rows
            # scored on the training folds too, to choose per fold without looking at the fold itself
            inner[k][fold][outside] = evaluate(train, params, len(outside))
            for name, value in _named(params, f"fold{fold}_r{rank}_l{l2}").items():
                saved[name] = value
            print(f"  fold {fold} rank {rank} l2 {l2}: held {summary(rows)}", flush=True)
    for k, (rank, l2) in enumerate(grid):
        print(f"rank {rank} l2 {l2}: CV {summary(cv[k])}")
        for s in sets:
            print(f"    {s:16s} {summary(cv[k][[r['set'] == s for r in dev]])}")
    # nested choice: each fold takes the grid point that scored best across the *other* folds' CV rows
    chosen = np.full((len(dev), 4), np.nan)
    for fold in range(args.folds):
        inside = [i for i, r in enumerate(dev) if fold_of(r, args.folds) == fold]
        outside = [i for i, r in enumerate(dev) if fold_of(r, args.folds) != fold]
        best = max(range(len(grid)), key=lambda k: (np.nanmean(cv[k][outside, 0]), np.nanmean(cv[k][outside, 3]), -k))
        chosen[inside] = cv[best][inside]
        saved[f"choice_fold{fold}"] = np.array(grid[best])
        print(f"  fold {fold}: chose rank {grid[best][0]} l2 {grid[best][1]}")
    print(f"chosen by CV: {summary(chosen)}")
    for s in sets:
        print(f"    {s:16s} {summary(chosen[[r['set'] == s for r in dev]])}")
    if args.final:  # the adapter on every dev query, at the given grid point
        rank, l2 = _grid([f"rank={args.final.split(',')[0]}", f"l2={args.final.split(',')[1]}"])[0]
        params = fit(Groups(dev, corpora), rank, l2, d, args.iterations)
        saved.update(_named(params, "final"))
        saved["final_choice"] = np.array([rank, l2])
        for path in args.test:
            test, test_corpora = load([path])
            g = Groups(test, test_corpora)
            for s in dict.fromkeys(r["set"] for r in test):
                keep = [r["set"] == s for r in test]
                print(f"  test {s:16s} today  {summary(evaluate(g, None, len(test))[keep])}")
                print(f"  test {s:16s} fitted {summary(evaluate(g, params, len(test))[keep])}")
    np.savez(args.out, folds=np.array(args.folds), **saved)
    print(f"-> {args.out}")
    return 0


def _named(params, prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}_U": params[0], f"{prefix}_V": params[1]} if isinstance(params, tuple) else {f"{prefix}_A": params}


def _params(z, prefix: str):
    return (z[f"{prefix}_U"], z[f"{prefix}_V"]) if f"{prefix}_U" in z else z[f"{prefix}_A"]


# ------------------------------------------------------------------------------------------------ engine

def eval_command(args: argparse.Namespace) -> int:
    """Every query through the real engine, the query vector as the engine makes it (`Searcher._embed_queries`)
    then mapped, the dense lane alone and every lane, today's and the adapted in one run."""
    from codeloupe.api import Workspace
    from codeloupe.eval import metrics
    from codeloupe.search import Searcher

    z = np.load(args.fits)
    folds = int(z["folds"])
    current: list = [None]
    original = Searcher._embed_queries

    def embed_queries(self: Searcher, texts: list[str]) -> np.ndarray | None:
        vectors = original(self, texts)
        return None if vectors is None else adapt(np.asarray(vectors, np.float32), current[0])

    Searcher._embed_queries = embed_queries
    results: dict[tuple[str, str, str], list[tuple[float, ...]]] = defaultdict(list)
    for spec in args.sets:
        for set_name, corpus_id, tree, queries in _corpora(spec, args):
            record = {"corpus": corpus_id}
            if args.cv:
                fold = fold_of(record, folds)
                rank, l2 = z[f"choice_fold{fold}"] if args.point is None else args.point.split(",")
                params = _params(z, f"fold{fold}_r{int(float(rank))}_l{float(l2)}")
            else:
                params = _params(z, args.name)
            ws = Workspace(tree)
            try:
                ws.index()
                ws.embed()
                searcher = ws.searcher()
                for label, p in (("today", None), ("adapted", params)):
                    current[0] = p
                    for q in queries:
                        for lanes in ("all", "dense"):
                            if lanes == "all":
                                bundle = ws.search(q["query"], mode=q["mode"])
                            else:
                                bundle = searcher.search(q["query"], mode=q["mode"], lanes=("dense",))
                            ranked, gold = [h.path for h in bundle.files], q["gold"]
                            results[(set_name, lanes, label)].append(
                                (float(metrics.hit_at_1(ranked, gold)), float(metrics.all_in_top_k(ranked, gold, 5)),
                                 float(metrics.all_in_bundle(ranked, gold)), metrics.reciprocal_rank(ranked, gold)))
            finally:
                ws.close()
            print(f"[eval] {set_name} {corpus_id}: {len(queries)} queries", file=sys.stderr, flush=True)
    for (set_name, lanes, label), rows in sorted(results.items()):
        m = np.array(rows).mean(0)
        print(f"{set_name:16s} {lanes:6s} {label:8s} R@1 {m[0]:.3f}  Acc@5 {m[1]:.3f}  bundle {m[2]:.3f}  "
              f"MRR {m[3]:.3f}  (n={len(rows)})")
    return 0


# ------------------------------------------------------------------------------------------------ main

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("dump", "eval"):
        p = sub.add_parser(name)
        if name == "dump":
            p.add_argument("out")
        else:
            p.add_argument("fits")
            p.add_argument("--cv", action="store_true", help="each package gets its fold's adapter (dev sets)")
            p.add_argument("--point", help="RANK,L2: that grid point's fold adapters rather than the folds' choice")
            p.add_argument("--name", default="final", help="the adapter of FITS to use without --cv")
        p.add_argument("sets", nargs="+", metavar="SET.json=TREES")
        p.add_argument("--corpora-per-set", type=int, default=0)
        p.add_argument("--queries-per-corpus", type=int, default=0)
        p.add_argument("--max-files", type=int, default=0)
    f = sub.add_parser("fit")
    f.add_argument("--dev", nargs="+", required=True)
    f.add_argument("--test", nargs="*", default=[])
    f.add_argument("--out", required=True)
    f.add_argument("--grid", action="append", default=[], metavar="rank=16,32|l2=.01,.1")
    f.add_argument("--folds", type=int, default=5)
    f.add_argument("--iterations", type=int, default=150)
    f.add_argument("--final", help="RANK,L2: also fit on all of dev and score --test offline")
    f.add_argument("--no-kinds", action="store_true", help="train and score without the engine's kind factors")
    args = parser.parse_args()
    try:
        from codeloupe import ranking

        globals()["SKELETON_WEIGHT"] = ranking.SKELETON_WEIGHT
    except ImportError:
        pass
    if getattr(args, "no_kinds", False):
        globals()["KINDS"] = False
    return {"dump": dump, "fit": fit_command, "eval": eval_command}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
