"""What a repository of the shared index may be called: one rule for every command, worker and server.

A name is typed on command lines and in URLs, listed by `codeloupe admin repos`, joined with commas in
`--repo A,B` and `repos=a,b`, and shown in every answer's label: a blank name, a comma, a slash, a control
character or a newline would each break one of those. Names the shared index already holds that break the
rule (made by an older version) stay readable: `admin` lists and drops them and `serve` serves them."""

from __future__ import annotations

import re

MAX_LENGTH = 100
RULE = (f"a repository name is 1 to {MAX_LENGTH} letters, digits, '.', '_' or '-', starting with a letter or"
        " digit")
# `[^\W_]`: a letter or digit (of any script); `\w` adds the underscore.
_NAME = re.compile(rf"[^\W_][\w.-]{{0,{MAX_LENGTH - 1}}}")


def is_repository_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def repository_name_problem(name: str) -> str:
    """Why `name` cannot name a repository ("" when it can), for a usage error."""
    return "" if is_repository_name(name) else f"{name[:MAX_LENGTH + 20]!r} is not a repository name ({RULE})"


def shown_repository_name(name: str) -> str:
    """A repository's name for a line of output: as it is when it follows the rule, else quoted with its
    control characters escaped (a blank name, one holding a newline), so a list stays one line a name."""
    return name if is_repository_name(name) else repr(name)
