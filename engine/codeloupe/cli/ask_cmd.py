"""`codeloupe ask PATH "question"`: a walkthrough whose code is spliced from disk (indexing first if needed).

On a terminal the prose streams as it arrives and every cited span is shown highlighted under its real path
and line numbers; piped, the answer is printed once it is judged, so an answer that falls back never reaches
stdout. `--json` prints one event per line instead (the last is `done`). Without a configured chat model, when
the model fails, or when its answer cites nothing, the answer is the plain retrieval bundle and the reason is
printed (on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from . import CliError
from .arguments import SET_A_MODEL, add_chat_args, add_workspace_args
from .common import index_workspace, markup_safe, named, open_workspace, print_code, visible
from .search_cmd import map_line
from .search_cmd import render as render_bundle

if TYPE_CHECKING:  # the ask package pulls in the openai client (seconds): imported only when `ask` runs
    from codeloupe.ask import AskEvent, AskResult


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("ask", help="a walkthrough: model prose citing spans, code spliced from disk")
    add_workspace_args(parser, remote=True)
    parser.add_argument("question", help="a question or a pasted bug report ('-' reads stdin)")
    parser.add_argument("--docs", action="store_const", const="docs", dest="mode", default="code",
                        help="docs-only walkthrough: whole sections in reading order")
    agents = parser.add_mutually_exclusive_group()
    agents.add_argument("--agents", action="store_true", dest="agents", default=None,
                        help="fan out to parallel agents even for a narrow question")
    agents.add_argument("--no-agents", action="store_false", dest="agents", help="one narrator, never agents")
    parser.add_argument("--best", action="store_true", help="let the model rerank the candidates first")
    parser.add_argument("--no-embed", action="store_true", help="do not compute missing vectors first")
    parser.add_argument("--json", action="store_true", help="print one JSON event per line")
    add_chat_args(parser).add_argument("--chat-timeout-s", type=float)
    parser.set_defaults(remote_refresh=False, func=run)


def run(args: argparse.Namespace) -> int:
    from codeloupe.ask import AskError
    from codeloupe.types import is_blank

    question = sys.stdin.read() if args.question == "-" else args.question
    if is_blank(question):
        raise CliError("the question is empty")
    chat_flags = {key: getattr(args, key) for key in ("chat_base_url", "chat_model", "chat_timeout_s")}
    ws = open_workspace(args, **chat_flags)
    try:
        index_workspace(ws, embed=not args.no_embed, quiet=args.json, answer_stale=True)
        try:
            events = ws.ask(question, mode=args.mode, agents=args.agents, best=args.best)
        except AskError as exc:
            raise CliError(str(exc)) from exc
        if args.json:
            for event in events:
                print(json.dumps(event.to_dict(), default=str), flush=True)
        else:
            show(events)
    finally:
        ws.close()
    return 0


def show(events: Iterable[AskEvent]) -> None:
    from codeloupe.ask.chat import NOT_CONFIGURED
    from codeloupe.ask.events import Citation

    from .console import CommandConsole

    out = CommandConsole(highlight=False, soft_wrap=True)
    status = CommandConsole(stderr=True, highlight=False)
    if not out.is_terminal:
        events = _judged(events)
    shown = ""  # the answer's end as printed so far (a terminal streams it before it is judged)
    for event in events:
        data = event.data
        if event.type == "retrieval":
            status.print(f"[dim]{len(data['core'])} core, {len(data['related'])} related files[/dim]")
        elif event.type == "flow":
            how = ("answered from the walkthrough cached for" if data["action"] == "served"
                   else "an earlier answer went to the model as context:")
            status.print(f"[dim]{how} {markup_safe(named(data['question']))} (similarity {data['similarity']:.2f}; "
                         "codeloupe flows lists them)[/dim]")
        elif event.type == "plan" and data["agents"]:
            status.print(f"[dim]{len(data['agents'])} agents ({data['source']}): {', '.join(data['reasons'])}[/dim]")
        elif event.type == "agent" and data["phase"] in ("tool", "failed"):
            detail = data.get("tool") or data.get("error", "")
            status.print(f"[dim]agent {data['agent']} {data['phase']}: {markup_safe(str(detail))}[/dim]")
        elif event.type == "citation":
            cited = Citation(**{**data, "requested": tuple(data["requested"]) if data["requested"] else None})
            out.print(f"[cyan]{markup_safe(cited.path)}:{cited.start_line}-{cited.end_line}[/cyan]"
                      + (f"  [dim]@ {markup_safe(cited.revision)}[/dim]" if cited.revision else "")
                      + ("  [yellow](changed on disk since indexing)[/yellow]" if cited.changed else ""))
            print_code(out, cited.text, cited.language or "text", cited.start_line)
            shown = "\n"
        elif event.type == "delta" and data["kind"] != "code":
            # The model's prose as the plain text it is: the markdown's escapes are for a renderer (a `\*` it wrote
            # read `\\*`).
            out.print(visible(data["plain"]), end="", markup=False)
            shown = (shown + data["plain"])[-1:]
        elif event.type == "fallback":
            withdrawn = ""
            if shown:  # streamed to a terminal, then rejected: it ends on its own line and is said to be void
                if shown != "\n":
                    out.print()
                withdrawn = " (the answer above is withdrawn)"
            status.print(f"\n[yellow]no walkthrough: {markup_safe(data['reason'])}{withdrawn}"
                         f"{f' ({SET_A_MODEL})' if data['reason'] == NOT_CONFIGURED else ''}; the retrieved files:[/yellow]")
        elif event.type == "done" and event.result is not None:
            _finish(event.result, out)


def _judged(events: Iterable[AskEvent]) -> Iterator[AskEvent]:
    """The events with the answer's `delta` and `citation` events held back until the ask ends: released before
    `done`, dropped at a `fallback` (an answer that cites nothing, or a model that fails part way, is replaced
    by the bundle, and its words must not reach a pipe glued to it)."""
    held: list[AskEvent] = []
    for event in events:
        if event.type in ("delta", "citation"):
            held.append(event)
            continue
        if event.type == "fallback":
            held.clear()
        elif event.type == "done":
            yield from held
        yield event


def _finish(result: AskResult, out) -> None:
    if result.fallback is not None or result.abstained:
        if result.abstained:
            out.print("\n[yellow]The retrieved code does not answer this question.[/yellow]")
        render_bundle(result.bundle)
        return
    if result.uncited:
        out.rule("also retrieved, not cited")
        for hit in result.uncited:
            out.print(map_line(hit))
