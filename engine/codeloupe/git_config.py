"""The user's own git excludes file (`core.excludesFile`), found as git finds it, without running git.

git applies a per-user ignore file to every repository, below the repository's `.gitignore` files and its
`.git/info/exclude`: editor swap files, `.idea/`, a developer's scratch notes. Its path is `core.excludesFile` in
the system or the user's global config, else `$XDG_CONFIG_HOME/git/ignore` (`~/.config/git/ignore`).

Only the user's and the system's config files are read, never a repository's own `.git/config`: that one is
part of the workspace (an unpacked archive can carry it), and a workspace must not choose which of the user's
files are read. `include` and `includeIf` sections are not followed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from codeloupe.regular_file import read_head

CONFIG_MAX_BYTES = 1 << 20  # a config file longer than this is not read (git's own are a few KiB)
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}


def user_excludes_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """The path git would read as the user's excludes file (it may not exist), or None when there is none to
    read (no home directory, or a relative `core.excludesFile`, which git resolves against its working
    directory, not the repository)."""
    env = os.environ if environ is None else environ
    home = env.get("HOME", "")
    xdg = env.get("XDG_CONFIG_HOME", "") or (f"{home}/.config" if home else "")
    value = None
    for config in _config_files(env, home, xdg):
        found = excludes_file_setting(_config_text(config))
        if found is not None:
            value = found  # the last file that sets it wins, as in git
    if value is None:
        return Path(xdg, "git", "ignore") if xdg else None
    if value == "~" or value.startswith("~/"):
        if not home:
            return None
        value = home + value[1:]
    return Path(value) if os.path.isabs(value) else None


def _config_files(env: Mapping[str, str], home: str, xdg: str) -> list[Path]:
    """git's system and global config files, in the order it reads them."""
    files = []
    if not _truthy(env.get("GIT_CONFIG_NOSYSTEM", "")):
        files.append(Path(env.get("GIT_CONFIG_SYSTEM", "") or "/etc/gitconfig"))
    if "GIT_CONFIG_GLOBAL" in env:  # replaces both global files (tests and sandboxes set it)
        if env["GIT_CONFIG_GLOBAL"]:
            files.append(Path(env["GIT_CONFIG_GLOBAL"]))
        return files
    if xdg:
        files.append(Path(xdg, "git", "config"))
    if home:
        files.append(Path(home, ".gitconfig"))
    return files


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def _config_text(path: Path) -> str:
    """A config file's text; "" when it is absent, unreadable, not a regular file or too long. A link is followed:
    dotfile managers link these files, and they are the user's own, not the workspace's."""
    try:
        data = read_head(path, CONFIG_MAX_BYTES)
    except OSError:
        return ""
    return "" if len(data) > CONFIG_MAX_BYTES else data.decode("utf-8", errors="replace")


def excludes_file_setting(text: str) -> str | None:
    """The last `core.excludesFile` value a git config text sets, unquoted and unescaped; None when it sets
    none. Section and key names are matched without case, as git does."""
    value = None
    for section, key, rest in config_entries(text):
        if section == "core" and key == "excludesfile":
            value = _config_value(rest)
    return value


def include_paths(text: str) -> list[str]:
    """Every path a git config text includes (`include.path`, and `includeIf.<condition>.path` whatever its
    condition), unquoted and unescaped, as written (relative, `~/`, absolute)."""
    return [_config_value(rest) for section, key, rest in config_entries(text)
            if key == "path" and (section == "include" or section.startswith("includeif"))]


def config_entries(text: str) -> Iterator[tuple[str, str, str]]:
    """Each `key = value` of a git config text: its section header (`core`, `includeif "gitdir:x/"`) and key
    lowercased, and the raw text after `=`. A key with no `=` (a boolean) is passed over."""
    section = ""
    for raw in _logical_lines(text):
        line = raw.strip()
        if line.startswith("["):
            close, quote = line.find("]"), line.find('"')
            if 0 <= quote < close:  # a quoted subsection (`[includeIf "gitdir:a]b/"]`) may hold a `]`
                close = line.find("]", line.find('"', quote + 1) + 1)
            if close < 0:
                continue
            section = line[1:close].strip().lower()
            line = line[close + 1:].strip()  # git allows `[core] excludesFile = ...` on one line
        if "=" not in line:
            continue
        key, _, rest = line.partition("=")
        yield section, key.strip().lower(), rest


def _logical_lines(text: str) -> list[str]:
    """Lines with a trailing backslash joined to the next, as git reads them."""
    lines, pending = [], ""
    for line in text.splitlines():
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _config_value(raw: str) -> str:
    """A value as git reads it: quotes removed, escapes decoded, a comment (`#` or `;` outside quotes) cut, the
    unquoted ends trimmed."""
    out: list[str] = []
    quoted = False
    kept = 0  # length of `out` up to the last character that trimming must keep
    chars = iter(raw.strip())
    for char in chars:
        if char == '"':
            quoted = not quoted
            kept = len(out)
        elif char == "\\":
            escaped = next(chars, "")
            out.append(_ESCAPES.get(escaped, escaped))
            kept = len(out)
        elif char in "#;" and not quoted:
            break
        else:
            out.append(char)
            if quoted or not char.isspace():
                kept = len(out)
    return "".join(out[:kept])
