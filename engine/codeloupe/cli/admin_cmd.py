"""`codeloupe admin --store URL ...`: look after the shared index (repositories, the work queue)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from . import CliError
from .arguments import add_store_url


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "admin", help="the shared index's repositories, work queue and global vector graph",
        description="repos: every repository with its files, chunks, vectors, commit and when it was last indexed."
                    " drop REPO: remove a repository (every row and its HNSW indexes). queue: the work queue's"
                    " batches by state. queue prune: delete finished batches and those no worker could write."
                    " global-index: one HNSW graph over every repository's vectors, so a search across very many"
                    " repositories takes its nearest chunks from it instead of scanning every vector (minutes at"
                    " millions of vectors; writes go on meanwhile). global-index drop: remove it. global-index status:"
                    " each dimension's graph (ready, invalid, absent) and whether workers build it.")
    _add_options(parser)
    # Each ACTION takes them too, as every other command takes its options anywhere (`admin repos --json` was
    # refused as unrecognized); left out there, they keep what was given before the ACTION.
    options = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    _add_options(options)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("repos", parents=[options], help="list the repositories")
    drop = actions.add_parser("drop", parents=[options],
                              help="remove a repository and everything indexed of it (any name `repos` lists, one"
                                   " an older version accepted included)")
    drop.add_argument("repository")
    drop.add_argument("--wait", action="store_true",
                      help="wait for an indexer or worker holding the repository, or a process migrating the"
                           " database, however long it takes (without it, the drop gives up after the store's lock"
                           " wait, 60 s, naming who holds it)")
    queue = actions.add_parser("queue", parents=[options],
                               help="the work queue's status (`queue prune`: delete finished batches)")
    queue.add_argument("prune", nargs="?", choices=["prune"], help="delete finished and given-up batches")
    graph = actions.add_parser("global-index", parents=[options],
                               help="build (or drop) the HNSW graph over every repository; `status`: each"
                                    " dimension's graph and who builds it")
    graph.add_argument("what", nargs="?", choices=["drop", "status"],
                       help="drop: remove the graph (workers leave it dropped); status: look, change nothing")
    parser.set_defaults(func=run)


def _add_options(parser: argparse.ArgumentParser) -> None:
    add_store_url(parser)
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def run(args: argparse.Namespace) -> int:
    from codeloupe import api
    from codeloupe.repository_names import shown_repository_name
    from codeloupe.store import StoreError
    from codeloupe.types import one_line, short_revision
    from codeloupe.wording import amount

    from .common import shared_store_url

    def count(number: int, noun: str, plural: str = "") -> str:
        # Counts here run to millions (vectors, chunks): with their thousands separated, in words as in the README.
        return amount(number, noun, plural, grouped=True)

    url = shared_store_url(args)
    try:
        if args.action == "repos":
            answer: Any = api.shared_repositories(url)
            lines = []
            for r in answer:  # its warning on a line of its own: one_line below would show a newline as `\n`
                lines.append(f"{shown_repository_name(r.name)}  {count(r.files, 'file')}, {count(r.chunks, 'chunk')},"
                             f" {count(r.vectors, 'vector')}  @ {short_revision(r.commit)}"
                             f"  indexed {r.indexed_at or 'never'}"
                             + (f"  {count(r.open_batches, 'batch', 'batches')} queued" if r.open_batches else "")
                             + f"  from {r.root}")
                lines += [f"  WARNING {r.indexing}"] if r.indexing else []
            lines = lines or ["no repository"]
        elif args.action == "drop":
            answer = api.drop_shared_repository(url, args.repository, wait=args.wait)
            lines = [f"dropped {shown_repository_name(answer.name)}: {count(answer.files, 'file')},"
                     f" {count(answer.chunks, 'chunk')}"
                     + (f", HNSW {', '.join(answer.vector_indexes)}" if answer.vector_indexes else "")]
        elif args.action == "global-index" and args.what == "status":
            answer = api.global_vector_index_status(url)
            lines = [f"{g.name}: {g.state}, {count(g.vectors, 'vector')} of {count(g.dim, 'dimension')}"
                     + (f", {g.size_bytes / 2**20:,.1f} MB" if g.state != "absent" else "")
                     for g in answer.graphs] or ["no vectors"]
            lines.append("dropped by hand: workers leave it absent until `global-index` builds it"
                         if answer.dropped_by_hand else
                         "a worker whose queue drains builds one for a dimension with"
                         f" {count(answer.workers_build_from, 'vector')} or more (unless started with"
                         " --no-global-index)")
        elif args.action == "global-index" and args.what == "drop":
            answer = api.drop_global_vector_indexes(url)
            lines = [f"dropped {name}" for name in answer] or ["no global index"]
        elif args.action == "global-index":
            answer = api.build_global_vector_indexes(url)
            lines = [f"{g.name}: {count(g.vectors, 'vector')} of {count(g.dim, 'dimension')},"
                     f" {g.size_bytes / 2**20:,.1f} MB,"
                     + (f" built in {g.seconds:,} s" if g.built else " already built")
                     for g in answer] or ["no vectors to index"]
        elif args.prune:
            answer = api.prune_work_queue(url)
            lines = [f"deleted {answer.done:,} finished and {answer.stuck:,} given-up batches"]
        else:
            answer = api.work_queue_status(url)
            lines = [f"{answer.waiting:,} waiting, {answer.claimed:,} claimed, {answer.expired:,} with an expired"
                     f" lease, {answer.stuck:,} stuck, {answer.done:,} done"]
            lines += [f"  {name}: {n:,} open" for name, n in answer.open_by_repository.items()]
            lines += [f"  claimed by {worker}" for worker in answer.workers]
    except StoreError as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        print(json.dumps([dataclasses.asdict(a) if dataclasses.is_dataclass(a) else a for a in answer]
                         if isinstance(answer, list) else dataclasses.asdict(answer), indent=2))
    else:  # each line one, its names and paths (a folder indexed from, a queued repository, a worker) escaped
        print("\n".join(map(one_line, lines)))
    return 0
