"""How MCP and the HTTP API word a refusal of what a client sent, alike: never echoing it whole (a URI or a
parameter's name may be 100 KB), on one line."""

from __future__ import annotations

from codeloupe.types import elided

NAMES_SHOWN = 5  # unknown argument names said, the rest counted
NAME_CHARS = 40  # of each, the start (`elided`)


def not_taken(what: str, unknown: list[str], taken: list[str], noun: str = "argument") -> str:
    """The `noun`s (a tool's arguments, an HTTP endpoint's parameters) `what` does not take, named (their values
    never echoed; the first few, each cut, as a client may send thousands of any length), and those it does."""
    named = [f"`{elided(name, NAME_CHARS)}`" for name in unknown[:NAMES_SHOWN]]
    more = f" and {len(unknown) - NAMES_SHOWN:,} more" if len(unknown) > NAMES_SHOWN else ""
    verb = f"is not {'an' if noun[0] in 'aeiou' else 'a'} {noun}" if len(unknown) == 1 else f"are not {noun}s"
    takes = ", ".join(f"`{name}`" for name in taken) if taken else f"no {noun}"
    return f"{', '.join(named)}{more} {verb} of {what}, which takes {takes}"
