"""The arguments the subcommands' parsers share. Standard library only: building the parser (`codeloupe --help`,
a mistyped command) imports no part of the engine."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def add_workspace_args(parser: argparse.ArgumentParser, remote: bool = False) -> None:
    parser.add_argument("path", help="the workspace folder, or a folder inside it (the workspace root is found above it)"
                        + (", or a remote repository: an http(s) URL of a .tar.gz or owner/repo@ref" if remote else ""))
    group = parser.add_argument_group("settings (override .codeloupe.toml and CODELOUPE_* variables)")
    group.add_argument("--embed-provider", choices=["local", "openai", "onnx", "none"])
    group.add_argument("--embed-model")
    group.add_argument("--embed-base-url")
    group.add_argument("--chunk-budget", type=int)
    group.add_argument("--max-file-bytes", type=int)
    group.add_argument("--ignore", action="append", help="an extra gitignore-style glob (repeatable)")
    add_store_args(group)


# Where a chat model is set, said by every command that needs one and has none: the reason alone ("no chat model
# configured") left a new user to find the settings.
SET_A_MODEL = ("set chat_base_url and chat_model in your config.toml, or CODELOUPE_CHAT_BASE_URL and "
               "CODELOUPE_CHAT_MODEL, or pass --chat-base-url and --chat-model: README, Settings")


def add_chat_args(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """`--chat-base-url` and `--chat-model`, for the commands that call the chat model (the group, for more)."""
    group = parser.add_argument_group("chat model (override chat_* settings and CODELOUPE_CHAT_* variables)")
    group.add_argument("--chat-base-url")
    group.add_argument("--chat-model")
    return group


# Where a command left without `--store` takes the shared index from, as its help says.
STORE_SETTING = "the store_url setting: CODELOUPE_STORE_URL or your config.toml"


def add_store_args(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    add_store_url(group, "the shared index of many repositories: postgresql://... (default: "
                         f"{STORE_SETTING}; else this machine's index)")
    group.add_argument("--repo", dest="store_repository", metavar="NAME",
                       help="the repository's id in the shared index (default: the workspace folder's name)")


def add_store_url(group: argparse._ArgumentGroup | argparse.ArgumentParser,
                  help: str = f"the shared index: postgresql://... (default: {STORE_SETTING})") -> None:
    """`--store URL`, as every command that takes it names it; where it is left out the command reads the
    `store_url` setting (settings.py for a workspace's, `common.shared_store_url` for the shared index alone)."""
    group.add_argument("--store", dest="store_url", metavar="URL", help=help)


def repository_list(value: str) -> list[str]:
    """An argparse type: repositories of the shared index as `--repo A,B` names them (empty names left out)."""
    return [name.strip() for name in value.split(",") if name.strip()]


def _whole_number(value: str) -> int:
    """`value` as an int, 0 (refused by every count) where it is not one."""
    try:
        return int(value)
    except ValueError:
        return 0


def positive_count(value: str) -> int:
    """An argparse type: a whole number of at least 1 (a --limit of 0 or below was taken as 1 without a word)."""
    number = _whole_number(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value!r}")
    return number


def number_of(unit: str, *, zero: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number of `unit` above 0, or from 0 where `zero` (serve's --rate of 0 was read as
    the default and a negative one refused every request; a worker's --lease-s of 0 was taken for the default without
    a word, and a negative one made every claim expire at once)."""
    def read(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0 or (number == 0 and not zero):
            raise argparse.ArgumentTypeError(f"expected a number of {unit} {'of at least 0' if zero else 'above 0'},"
                                             f" got {value!r}")
        return number
    return read


def count_up_to(most: int) -> Callable[[str], int]:
    """An argparse type: a whole number from 1 to `most`, the bound the servers keep for the same count; either
    side refused names the whole range (a 0 said "at least 1", and the next try, past `most`, was refused again)."""
    def count(value: str) -> int:
        number = _whole_number(value)
        if not 1 <= number <= most:
            raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {most}, got {value!r}")
        return number
    return count
