"""How MCP and the HTTP API word a refusal of what a client sent, alike: never echoing it whole (a URI or a
parameter's name may be 100 KB), on one line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from codeloupe.api import InvalidArgument
from codeloupe.types import elided

NAMES_SHOWN = 5  # unknown argument names said, the rest counted
# A call whose workspace closed under it (`IndexStopped`: the server stopping stops the graph build it waits for or
# runs), which is no fault of the engine's nor of the call's.
WORKSPACE_CLOSED = "the workspace closed while the call ran (the server is stopping): ask again once it is back"
NAME_CHARS = 40  # of each, the start (`elided`)


def not_taken(what: str, unknown: list[str], taken: list[str], noun: str = "argument") -> str:
    """The `noun`s (a tool's arguments, an HTTP endpoint's parameters) `what` does not take, named (their values
    never echoed; the first few, each cut, as a client may send thousands of any length), and those it does."""
    named = [f"`{elided(name, NAME_CHARS)}`" for name in unknown[:NAMES_SHOWN]]
    more = f" and {len(unknown) - NAMES_SHOWN:,} more" if len(unknown) > NAMES_SHOWN else ""
    verb = f"is not {'an' if noun[0] in 'aeiou' else 'a'} {noun}" if len(unknown) == 1 else f"are not {noun}s"
    takes = ", ".join(f"`{name}`" for name in taken) if taken else f"no {noun}"
    return f"{', '.join(named)}{more} {verb} of {what}, which takes {takes}"


_TYPES = {"string_type": "a string", "int_type": "a whole number", "int_parsing": "a whole number",
          "int_from_float": "a whole number", "bool_type": "true or false", "bool_parsing": "true or false",
          "list_type": "a list", "model_attributes_type": "a JSON object", "dict_type": "a JSON object"}
_BOUNDS = {"greater_than_equal": ("ge", "at least"), "less_than_equal": ("le", "at most"),
           "greater_than": ("gt", "more than"), "less_than": ("lt", "less than")}


def argument_problems(errors: Iterable[Mapping[str, Any]], whole: str) -> str:
    """What is wrong with a request's arguments (pydantic's errors, each `loc` the path of an argument: an MCP
    tool's, an HTTP parameter or body field), in one line: each argument named with the rule it breaks, no value
    echoed (a refused query may be 20,000 characters). `whole`: what an error of no argument is about (a tool's
    arguments, an HTTP request's body)."""
    return "; ".join(f"{'`' + '.'.join(str(part) for part in error['loc']) + '`' if error['loc'] else whole} "
                     f"{_problem(error)}" for error in errors)


def _problem(error: Mapping[str, Any]) -> str:
    try:
        return _rule_broken(error)
    except (KeyError, TypeError, ValueError):  # a shape of error not foreseen: pydantic's message names no value
        return error["msg"]


def _rule_broken(error: Mapping[str, Any]) -> str:
    kind, ctx = error["type"], error.get("ctx", {})
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {ctx[key]:,}"
    if kind in _TYPES:
        return f"must be {_TYPES[kind]}"
    if kind == "missing":
        return "is required"
    if kind == "string_too_short":
        return "must not be empty" if ctx["min_length"] == 1 else f"must be at least {ctx['min_length']:,} characters"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']:,} characters, got {len(error['input']):,}"
    if kind == "too_long":
        return f"must hold at most {ctx['max_length']:,} items"
    if kind == "literal_error":
        return f"must be one of {ctx['expected']}"
    if kind == "value_error" and isinstance(ctx["error"], InvalidArgument):  # a validator's `check_query`
        return ctx["error"].problem
    return error["msg"]
