"""`codeloupe worker --store URL`: claim queued file batches from the shared index and index them."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING

from . import CliError
from .arguments import add_store_url, number_of
from .stopping import StopBySignal

if TYPE_CHECKING:
    from codeloupe.shared_index import WorkerReport
    from codeloupe.store.postgres import WorkItem


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "worker", help="index batches queued in the shared index (`index --store URL --queue`)",
        description="Claims queued (repository, file batch) items with SELECT ... FOR UPDATE SKIP LOCKED, reads "
                    "and chunks the files from the path the batch was queued from, embeds what the shared "
                    "vector cache does not hold, and writes each batch in one transaction. A claim is a lease: "
                    "the batch of a worker that dies is claimed again when the lease runs out; a batch the database "
                    "cut off (a restart mid-write) has its claim given up at once and is tried again, as is the "
                    "batch a worker holds when Ctrl-C or SIGTERM stops it (exit status 130 or 143).")
    add_store_url(parser)
    parser.add_argument("--embed-provider", choices=["local", "openai", "onnx", "none"])
    parser.add_argument("--embed-model")
    parser.add_argument("--embed-base-url")
    parser.add_argument("--lease-s", type=number_of("seconds"), help="seconds a claim lasts (default 120)")
    parser.add_argument("--exit-when-idle", type=number_of("seconds", zero=True), metavar="S",
                        help="stop once the queue has been empty for S seconds (a batch under a claim's"
                             " lease is waited for, then taken), or the database unreachable for S seconds"
                             " (default: run until stopped, reconnecting)")
    parser.add_argument("--no-global-index", action="store_true",
                        help="never build the vector graph over every repository (by default a worker whose queue"
                             " drains builds it once a dimension holds 300,000 vectors and none exists;"
                             " `codeloupe admin global-index` builds or drops it by hand)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.repository_names import shown_repository_name
    from codeloupe.settings import SettingsError
    from codeloupe.shared_index import GLOBAL_INDEX_MIN_VECTORS, LEASE_S, WorkerStopped, run_worker
    from codeloupe.store import StoreError
    from codeloupe.store.postgres import MAX_ATTEMPTS
    from codeloupe.wording import amount

    from .common import shared_store_url

    url = shared_store_url(args)
    flags = {key: value for key in ("embed_provider", "embed_model", "embed_base_url")
             if (value := getattr(args, key)) is not None}
    stopped_by = signal.SIGINT

    def terminated() -> KeyboardInterrupt:
        # SIGTERM (a service manager, `kill`) stops the worker as Ctrl-C does, where it is (but not inside an import:
        # `StopBySignal`): it gives back the batch it holds, which the default action left claimed until its lease
        # ran out (120 s no other worker took it).
        nonlocal stopped_by
        stopped_by = signal.SIGTERM
        return KeyboardInterrupt()

    def taking(item: WorkItem) -> None:
        # A worker is a service: its log says what it is doing, a line a batch, where it printed nothing until it
        # stopped (and then only how it stopped).
        print(f"worker: indexing batch {item.id} of {shown_repository_name(item.repository)}"
              f" ({amount(len(item.paths), 'file')}, claim {item.attempts} of {MAX_ATTEMPTS})", file=sys.stderr,
              flush=True)

    previous = signal.signal(signal.SIGTERM, StopBySignal(terminated))
    print("worker: taking the batches queued in the shared index"
          + ("" if args.exit_when_idle is not None else " until stopped (Ctrl-C)"), file=sys.stderr, flush=True)
    try:
        report = run_worker(url, flags, lease_s=LEASE_S if args.lease_s is None else args.lease_s, idle_exit_s=args.exit_when_idle,
                            on_batch=taking,
                            global_index_min_vectors=None if args.no_global_index else GLOBAL_INDEX_MIN_VECTORS)
    except (SettingsError, StoreError) as exc:
        raise CliError(str(exc)) from exc
    except KeyboardInterrupt as stop:  # WorkerStopped once it claims; before, nothing was held
        given_back = stop.given_back if isinstance(stop, WorkerStopped) else []
        if isinstance(stop, WorkerStopped):
            _print_totals(stop.report)
        batches = ", ".join(f"batch {batch} of {shown_repository_name(name)}" for batch, name in given_back)
        raise CliError(f"worker stopped by {stopped_by.name}" + (f": {batches} given back to the queue, for a worker"
                                                                  " to take now" if given_back else ""),
                       128 + stopped_by) from stop
    finally:
        signal.signal(signal.SIGTERM, previous)
    _print_totals(report)
    return 0


def _print_totals(report: WorkerReport) -> None:
    """What the worker did, in a line: as it ends, or as a signal stops it."""
    from codeloupe.store.postgres import MAX_ATTEMPTS
    from codeloupe.wording import amount

    print(f"worker: {amount(report.batches, 'batch', 'batches')}, {amount(report.files, 'file')},"
          f" {amount(report.embedded, 'text')} embedded"
          + (f", graph edges of {amount(report.graphs, 'repository', 'repositories')} resolved"
             if report.graphs else "")
          + "".join(f", the vector graph over every repository built ({index.dim}-dimensional,"
                    f" {amount(index.vectors, 'vector')}, {index.seconds:.0f} s)" for index in report.global_indexes)
          + (f", {amount(report.lost_claims, 'claim')} lost to an expired lease" if report.lost_claims else "")
          + (f", {amount(report.replaced, 'batch', 'batches')} of a folder since replaced as its repository's"
             " source left unwritten" if report.replaced else "")
          + (f", {amount(report.moved, 'batch', 'batches')} left unwritten: its folder left the commit it was queued"
             " at (run `codeloupe index --queue` there again)" if report.moved else "")
          + (f", {amount(report.superseded, 'batch', 'batches')} of an index run superseded by a later index (or given"
             " up) left unwritten" if report.superseded else "")
          + (f", {report.failed} failed (tried again: at once when the database cut them off, else after their lease)" if report.failed else "")
          + (f"; {amount(report.stuck, 'batch', 'batches')} failed {MAX_ATTEMPTS} times and"
             f" {'is' if report.stuck == 1 else 'are'} left queued" if report.stuck else ""),
          file=sys.stderr, flush=True)
