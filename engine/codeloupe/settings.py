"""One settings object for every surface, each value remembering who set it.

Sources, later ones win: built-in defaults; the user's own `config.toml` in the user config dir
(`CODELOUPE_CONFIG_DIR`, else the platform's); the workspace's files, `[tool.codeloupe]` in pyproject.toml then
`.codeloupe.toml`; environment variables (`CODELOUPE_*`); explicit overrides (CLI flags, LSP initialization
options / didChangeConfiguration). Every surface maps onto the same field names.

A workspace is untrusted input. Its files may set only `WORKSPACE_SAFE` settings (nothing there can send data
off the machine, load code or a model, or exhaust the machine); every other key they set is ignored, and named
in `Settings.ignored`, until the user trusts the workspace (`codeloupe trust`, or the editor's own trust).
Nor can its files stop the tool: a file that is not settings, an unknown key (a typo, or a setting of a newer
codeloupe) and a value the engine cannot use are left out, each named in `Settings.warnings`, and the rest of
the file applies. The user's own file, the environment and the overrides stay strict: the user typed them.
An API key is only ever sent to an endpoint set by the same party as the key (`Settings.api_key`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import platformdirs

from codeloupe.regular_file import read_head
from codeloupe.repository_names import repository_name_problem
from codeloupe.trust import CHANGED, TRUSTED, TrustStore, settings_digest, user_config_dir
from codeloupe.types import one_line
from codeloupe.url_secrets import redact

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

USER_CONFIG_NAME = "config.toml"

# What a workspace's own files may set without the user's trust.
# (`flows` can only keep answers on this machine or turn the cache off.)
WORKSPACE_SAFE = frozenset({"chunk_budget", "ignore", "max_line_chars", "max_file_bytes", "flows"})
# What only the user sets, never a workspace's files, trusted or not: where remote repositories are fetched
# from and how much of them the machine unpacks (they apply before any workspace exists).
# Nor where the index lives: a workspace that named a shared database (or the repository id in it) would choose
# where its code is sent, or overwrite another repository's rows.
USER_ONLY = frozenset({"remote_tarball_url", "remote_commit_url", "remote_max_download_bytes",
                       "remote_max_unpacked_bytes", "remote_max_ratio", "remote_timeout_s",
                       "remote_deadline_s", "store_url",
                       "store_repository"})
# ... and `max_file_bytes` only up to this (4x the default): more is a resource knob for the user to turn.
WORKSPACE_MAX_FILE_BYTES = 4_000_000

# The most `max_file_bytes` may be, whoever sets it.
MAX_FILE_BYTES_CEILING = 64 * 2**20

# Every number's accepted range, whoever sets it; anything outside is a SettingsError naming the source (from a
# workspace's file, a warning, and the value is left out).
# The upper ends are far past any useful value and only stop a typo or a hostile file from hanging the machine.
BOUNDS: dict[str, tuple[float, float]] = {
    "max_file_bytes": (1, MAX_FILE_BYTES_CEILING),
    "max_line_chars": (100, 1_000_000),
    "chunk_budget": (100, 100_000),
    "embed_dimensions": (0, 65_536),
    "embed_batch_size": (1, 2048),  # OpenAI's per-request input limit
    "embed_concurrency": (1, 32),
    "embed_timeout_s": (0.01, 3600),
    "embed_threads": (0, 1024),  # more than the machine has cores is clamped where the threads start
    "chat_timeout_s": (0.01, 3600),
    "remote_max_download_bytes": (1, 4 * 2**30),
    "remote_max_unpacked_bytes": (1, 16 * 2**30),
    "remote_max_ratio": (1, 100_000),
    "remote_timeout_s": (0.01, 3600),
    "remote_deadline_s": (0.01, 86_400),
}
# The embedding providers (codeloupe.embed names the same ones); any other is an error naming its source, not a
# failure of the first search that needs the dense lane.
EMBED_PROVIDERS = ("local", "onnx", "openai", "none")
_URL_KEYS = ("embed_base_url", "chat_base_url", "remote_tarball_url", "remote_commit_url")
# Where embed_provider = "openai" sends the workspace's code when no embed_base_url is set.
OPENAI_BASE_URL = "https://api.openai.com/v1"
# A host a workspace's file names is quoted in a notice cut to this many characters.
_SHOWN_HOST_CHARS = 80
_PATH_KEYS = ("cache_dir", "onnx_model_dir")  # relative paths are relative to the file that sets them

USER = "user"
WORKSPACE = "workspace"


def is_loopback_url(url: str) -> bool:
    """True for an endpoint on this machine (no API key is needed to talk to it)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SettingsError(ValueError):
    """A setting has a value the engine cannot use; the message names the setting and its source."""


class SettingValueError(SettingsError):
    """A value the engine cannot use for the setting `name` (its field name), `problem` saying why. An editor
    names the setting as its user typed it (`codeloupe.chunkBudget`) with `named`."""

    def __init__(self, name: str, source: str, problem: str) -> None:
        self.name, self.source, self.problem = name, source, problem
        super().__init__(self.named(name))

    def named(self, name: str) -> str:
        return f"setting {name!r} from {self.source}: {self.problem}"

    def __reduce__(self) -> tuple[type[SettingValueError], tuple[str, str, str]]:
        # Rebuilt from its parts, not its message, should it cross to another process.
        return SettingValueError, (self.name, self.source, self.problem)


@dataclass(frozen=True)
class Origin:
    """Where a value came from: a file, "the environment", "overrides", ...; `workspace` marks the workspace's
    own files (applied only because the user trusted the workspace)."""

    where: str
    workspace: bool = False

    @property
    def party(self) -> str:
        return WORKSPACE if self.workspace else USER


@dataclass(frozen=True)
class IgnoredSettings:
    """Keys an untrusted workspace's files asked for and did not get."""

    root: str
    by_file: tuple[tuple[str, tuple[str, ...]], ...]  # (settings file, its ignored keys)
    changed: bool  # the workspace was trusted, but its settings changed since
    # The user's editor trusted the workspace's settings files as they were when it opened them (an LSP client's
    # trust covers only those), and they changed since.
    editor_changed: bool = False

    @property
    def keys(self) -> list[str]:
        return sorted({key for _, keys in self.by_file for key in keys})

    def message(self) -> str:
        listed = "; ".join(f"{where}: {', '.join(keys)}" for where, keys in self.by_file)
        if self.editor_changed:
            why = "its settings files changed since your editor trusted them"
            how = (f"If you trust the new settings, restart your editor (Neovim asks again) or run "
                   f"`codeloupe trust {self.root}`")
        else:
            why = "its settings changed since you trusted it" if self.changed else "the workspace is not trusted"
            how = (f"If you trust this repository, run `codeloupe trust {self.root}` (or trust the workspace in "
                   "your editor)")
        return (f"codeloupe: ignoring settings from {self.root} because {why} ({listed}). A repository's own "
                f"files may set only {', '.join(sorted(WORKSPACE_SAFE - {'max_file_bytes'}))} and max_file_bytes "
                f"(up to {WORKSPACE_MAX_FILE_BYTES}). {how}; or set them in your own settings.")


@dataclass
class Settings:
    # --- discovery
    max_file_bytes: int = 1_000_000
    max_line_chars: int = 1_000  # a line longer than this marks a minified bundle / generated blob
    ignore: list[str] = field(default_factory=list)  # extra gitignore-style globs
    # --- chunking
    chunk_budget: int = 4000  # non-whitespace characters per chunk
    # --- embeddings
    embed_provider: str = "local"  # local | openai | onnx | none
    embed_model: str = ""  # provider-specific; "" means the provider's default
    embed_base_url: str = ""
    embed_api_key: str = ""
    embed_dimensions: int = 0  # 0: the model's own
    embed_batch_size: int = 32
    embed_concurrency: int = 2
    embed_timeout_s: float = 30.0
    embed_threads: int = 0  # cores for local embedding (a worker process each in bulk); 0: all cores
    onnx_model_dir: str = ""  # for embed_provider = "onnx"
    # --- ask
    chat_base_url: str = ""
    chat_model: str = ""
    chat_api_key: str = ""
    chat_timeout_s: float = 60.0
    # --- remote repositories (`codeloupe index owner/repo@ref`); {owner} {repo} {ref} are filled in
    remote_tarball_url: str = "https://codeload.github.com/{owner}/{repo}/tar.gz/{ref}"
    remote_commit_url: str = "https://api.github.com/repos/{owner}/{repo}/commits/{ref}"  # "" : do not ask
    remote_max_download_bytes: int = 200 * 2**20  # the compressed tarball
    remote_max_unpacked_bytes: int = 2**30  # every byte the tarball decompresses to
    remote_max_ratio: int = 100  # decompressed / compressed, past the first 32 MiB
    remote_timeout_s: float = 60.0  # a connection silent this long fails
    remote_deadline_s: float = 900.0  # one request, first byte to last (a body trickled slowly ends here)
    flows: bool = True  # keep successful walkthroughs in the index and answer repeated questions from them
    # --- storage
    cache_dir: str = ""  # "" -> $CODELOUPE_CACHE_DIR or the platform user cache dir
    store_url: str = ""  # "postgresql://...": the shared index of many repositories; "" -> the workspace's SQLite
    store_repository: str = ""  # the repository's id in the shared index; "" -> the workspace folder's name
    # --- not settings: who set each value (absent: the default or the program), what a workspace did not get
    origins: dict[str, Origin] = field(default_factory=dict, repr=False)
    ignored: IgnoredSettings | None = field(default=None, repr=False)
    # What the workspace's files hold that is not used whatever the trust (one line each, naming file and key).
    warnings: tuple[str, ...] = field(default=(), repr=False)

    @property
    def notices(self) -> list[str]:
        """What every surface that may send the workspace's code tells the user about its settings files, one
        message each: what they hold that is not used, and the endpoints a trusted workspace's files chose
        (`endpoint_notice`)."""
        return [*self.unused_notices, *filter(None, [self.endpoint_notice])]

    @property
    def unused_notices(self) -> list[str]:
        """What the workspace's settings files hold that is not used (`warnings`, and an untrusted workspace's
        settings `ignored`): all a command that sends nothing says (`chunks`), where the endpoint notice read as
        though it had just sent the file."""
        return [*self.warnings, *([self.ignored.message()] if self.ignored is not None else [])]

    @property
    def endpoint_notice(self) -> str | None:
        """What a trusted workspace's own settings files chose as the network endpoints its code is sent to (its
        chunks to embed, its code and questions to chat): which setting, which host, from which file; None when
        every endpoint in use is the user's (or there is none). Trust applies them silently otherwise, and users
        trust a folder just to turn its extensions on. An untrusted workspace's endpoints are ignored (`ignored`)."""
        uses = []
        if self.embed_provider.strip().lower() == "openai":
            uses.append(("embeddings", self.embed_base_url or OPENAI_BASE_URL, ("embed_provider", "embed_base_url")))
        if self.chat_base_url.strip():
            uses.append(("chat", self.chat_base_url.strip(), ("chat_base_url",)))
        chosen = []
        # The host and the files are the workspace's text: shown escaped (`one_line`), as the CLI shows a file name,
        # so a bidi override in them cannot make the notice name another host or file than it does.
        for use, url, names in uses:
            set_here = [f"{name} in {one_line(self.where(name))}" for name in names if self.party(name) == WORKSPACE]
            if set_here:
                host = urlsplit(url).netloc.rpartition("@")[2]  # never a user:password written in the URL
                host = host if len(host) <= _SHOWN_HOST_CHARS else f"{host[:_SHOWN_HOST_CHARS]}..."
                chosen.append(f"{use} to {one_line(host)} ({', '.join(set_here)})")
        if not chosen:
            return None
        return (f"codeloupe: this workspace's own settings send its code to endpoints they chose: {'; '.join(chosen)}. "
                "They apply because the workspace is trusted; if you did not mean to send it there, set the endpoints "
                "yourself where they win over the workspace's files (your editor's codeloupe settings, or "
                "CODELOUPE_* variables and flags on the command line) or stop trusting it.")

    def effective(self) -> dict[str, Any]:
        """What these settings decide: every setting's value, and who set each (`origins`: an API key goes only to
        an endpoint its own party set). Two loads that differ only in what they tell the user (`warnings`,
        `ignored`) decide the same, so a folder opened on one need not be reopened on the other."""
        return {**{name: getattr(self, name) for name in _FIELDS}, "origins": self.origins}

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes` set by the caller (the program, for its user)."""
        origins = {key: origin for key, origin in self.origins.items() if key not in changes}
        return dataclasses.replace(self, **changes, origins=origins)

    def party(self, name: str) -> str:
        """USER or WORKSPACE: who chose this setting's value (defaults count as the user's)."""
        origin = self.origins.get(name)
        return origin.party if origin else USER

    def where(self, name: str) -> str:
        origin = self.origins.get(name)
        return origin.where if origin else "the defaults"

    def api_key(self, url_name: str, key_name: str, environ_key: str = "") -> tuple[str, str]:
        """(the API key that may go to the endpoint in setting `url_name`, why a configured key is held back).

        A key travels only with an endpoint set by the same party: the user's keys (their settings, the
        environment, `environ_key`) never go to an endpoint a workspace chose, even a trusted one, and a
        workspace's key never goes to the user's endpoint."""
        party = self.party(url_name)
        key = getattr(self, key_name)
        if key and self.party(key_name) == party:
            return key, ""
        from_env = os.environ.get(environ_key, "") if environ_key else ""
        if from_env and party == USER:
            return from_env, ""
        held = [f"{key_name} (from {self.where(key_name)})"] if key else []
        held += [f"${environ_key}"] if from_env else []
        if not held:
            return "", ""
        return "", (f"{' and '.join(held)} is not sent to {url_name} {getattr(self, url_name) or '(default)'}, "
                    f"which comes from {self.where(url_name)}: a key only goes to an endpoint set by the same "
                    "party, you or the workspace's files (set the endpoint in your own settings to use your key)")

    @property
    def cache_root(self) -> Path:
        if self.cache_dir:
            return Path(self.cache_dir).expanduser()
        return Path(platformdirs.user_cache_dir("codeloupe", appauthor=False))

    def index_path(self, root: Path) -> Path:
        """The workspace's SQLite file: outside the workspace, keyed by the workspace's real path."""
        real = str(Path(root).resolve())
        key = hashlib.sha256(real.encode("utf-8")).hexdigest()[:16]
        return self.cache_root / "indexes" / f"{Path(real).name or 'root'}-{key}.sqlite"

    @property
    def embed_cache_path(self) -> Path:
        """The content-addressed vector cache, shared by every workspace and checkout."""
        return self.cache_root / "embeddings.sqlite"


_ENV_PREFIX = "CODELOUPE_"
_FIELDS = {f.name: f for f in dataclasses.fields(Settings) if f.name not in ("origins", "ignored", "warnings")}


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _number(kind: type[int] | type[float], value: Any, expected: str) -> int | float:
    """`value` as `kind`, or a ValueError saying what was expected (not Python's "invalid literal for int()")."""
    if not isinstance(value, int | float | str):
        raise ValueError(expected)
    try:
        return kind(value)
    except ValueError:
        raise ValueError(expected) from None


def _shown(bound: float) -> str:
    """A bound as a person writes it: 1000000 rather than %g's 1e+06."""
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _word(text: str) -> str:
    """One of the accepted spellings as a message lists it: the empty one as '' (not a bare ", )")."""
    return text or "''"


def _coerce(name: str, value: Any, source: str) -> Any:
    kind = type(getattr(Settings(), name))
    try:
        if kind is bool:
            if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
                return value.strip().lower() in _TRUE
            if isinstance(value, bool) or value in (0, 1):  # a TOML or JSON boolean (or 0 / 1)
                return bool(value)
            raise ValueError(f"expected true or false ({', '.join(_TRUE)} / {', '.join(map(_word, _FALSE))})")
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError("expected a whole number")
            return _number(int, value, "expected a whole number")
        if kind is float:
            if isinstance(value, bool):
                raise ValueError("expected a number")
            return _number(float, value, "expected a number")
        if kind is list:
            if isinstance(value, str):
                return [v.strip() for v in value.split(",") if v.strip()]
            if isinstance(value, Mapping) and not value:  # what a Lua client sends for an empty table
                return []
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise ValueError("expected a list of strings")
            return list(value)
        if not isinstance(value, str):  # a number, list or table where a name, path or URL belongs
            raise ValueError("expected a string")
        return value
    except (TypeError, ValueError, OverflowError) as exc:
        raise SettingValueError(name, source, f"cannot use {value!r} ({exc})") from exc


def _check(name: str, value: Any, source: str) -> None:
    if name in BOUNDS:
        low, high = BOUNDS[name]
        # Compared first: a whole number past any float (TOML's are unbounded) is out of range, where isfinite
        # raised OverflowError on it.
        if not (low <= value <= high and math.isfinite(value)):
            raise SettingValueError(name, source, f"{value!r} is outside {_shown(low)}..{_shown(high)}")
    if name == "embed_provider" and value.strip().lower() not in EMBED_PROVIDERS:
        raise SettingValueError(name, source, f"{value!r} is not one of {', '.join(EMBED_PROVIDERS)}")
    if name in _URL_KEYS and value and _scheme(name, value, source) not in ("http", "https"):
        raise SettingValueError(name, source, f"{redact(value)!r} is not an http(s) URL")
    if name == "store_url" and value and _scheme(name, value, source) not in ("postgresql", "postgres"):
        raise SettingValueError(name, source, "only a postgresql:// URL names a shared index")
    if name == "store_repository" and value and (problem := repository_name_problem(value)):
        raise SettingValueError(name, source, problem)


def _scheme(name: str, value: str, source: str) -> str:
    """The scheme of a URL setting; one Python cannot split (a host `[::1` missing its `]`) is refused in words,
    its password left out, where it stopped the command with a traceback."""
    try:
        return urlsplit(value).scheme
    except ValueError as exc:
        raise SettingValueError(name, source, f"{redact(value)!r} is not a URL ({exc})") from None


def _path_value(value: str, base_dir: Path | None) -> str:
    if not value:
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (base_dir or Path.cwd()) / path)


def apply(settings: Settings, values: Mapping[str, Any], source: str, *, workspace: bool = False,
          base_dir: Path | None = None, unusable: list[str] | None = None) -> Settings:
    """Overlay `values` (field names; '-' and camelCase accepted) onto `settings`, checking each value.

    Unknown keys and unusable values are SettingsErrors; given `unusable` (a workspace's file, which must not
    stop the tool), each is a warning appended to it instead, and left out. `source` names where the values come
    from (in messages and in `origins`); `base_dir` anchors relative paths (default: the current directory)."""
    changes: dict[str, Any] = {}
    origin = Origin(source, workspace)
    for raw_key, value in values.items():
        if value is None:
            continue
        key = _normalise_key(raw_key)
        try:
            if key not in _FIELDS:
                raise SettingsError(f"unknown setting {raw_key!r} in {source}{did_you_mean(key, workspace=workspace)}")
            coerced = _coerce(key, value, source)
            _check(key, coerced, source)
        except SettingsError as exc:
            if unusable is None:
                raise
            unusable.append(f"codeloupe: {exc}; ignored")
            continue
        changes[key] = _path_value(coerced, base_dir) if key in _PATH_KEYS else coerced
    if not changes:
        return settings
    return dataclasses.replace(settings, **changes, origins={**settings.origins, **dict.fromkeys(changes, origin)})


def did_you_mean(key: str, *, workspace: bool = False) -> str:
    """' (did you mean 'chunk_budget'?)' for the known setting closest to an unknown `key` ('-' and camelCase
    accepted), if any; for a workspace's file, only among those it may set (never a `USER_ONLY` one, which it
    would be refused)."""
    import difflib

    close = difflib.get_close_matches(_normalise_key(key),
                                      [name for name in _FIELDS if not (workspace and name in USER_ONLY)], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _normalise_key(key: str) -> str:
    out = []
    for ch in key.replace("-", "_").replace(".", "_"):
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch)
    return "".join(out).lstrip("_")


# A settings file (pyproject.toml, .codeloupe.toml) larger than this is refused, not read: a workspace's file could
# otherwise fill the memory of every process that opens it. Real ones are a few KB.
SETTINGS_FILE_MAX_BYTES = 1024 * 1024
# The files at a workspace's root that its settings are read from, in the order they apply (`workspace_settings`).
PYPROJECT, OWN_SETTINGS = WORKSPACE_SETTINGS_FILES = ("pyproject.toml", ".codeloupe.toml")
PYPROJECT_TABLE = f"{PYPROJECT} [tool.codeloupe]"


def _read_toml(path: Path, *, follow_links: bool = False) -> dict[str, Any]:
    """A settings file, never waited on (a FIFO is refused). A workspace's may be anything: it is read only
    when it is no link (`follow_links` for the user's own, which dotfiles often link)."""
    try:
        data = read_head(path, SETTINGS_FILE_MAX_BYTES, follow_links=follow_links)
        if len(data) > SETTINGS_FILE_MAX_BYTES:
            raise SettingsError(f"{path}: larger than {SETTINGS_FILE_MAX_BYTES // 1024} KiB; not read for settings")
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML (not UTF-8: {exc.reason} at byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML ({exc})") from exc
    except RecursionError:  # arrays nested thousands deep
        raise SettingsError(f"{path}: not valid TOML (nested too deeply)") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it ({exc.strerror or exc})") from exc


def workspace_settings(root: Path, unread: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """The codeloupe settings a workspace's own files hold, by file (named relative to the root), in the order
    they apply. A file that cannot be read for settings (a link, not TOML, too large) is left out, never the end
    of the command, and named in `unread` when given."""
    found: dict[str, dict[str, Any]] = {}
    notes: list[str] = [] if unread is None else unread
    pyproject = root / PYPROJECT
    tool = (_own_table(pyproject, notes) or {}).get("tool")
    table = tool.get("codeloupe") if isinstance(tool, dict) else None  # `tool = 5` holds no codeloupe settings
    if table is not None:
        if isinstance(table, dict):
            found[PYPROJECT_TABLE] = table
        else:
            notes.append(f"codeloupe: {pyproject}: [tool.codeloupe] must be a table; not read for settings")
    if (table := _own_table(root / OWN_SETTINGS, notes)) is not None:
        found[OWN_SETTINGS] = table
    return found


def workspace_settings_files(root: Path) -> list[str]:
    """The workspace's own files that hold codeloupe settings, named relative to the root, in the order they apply:
    what trusting it is about, so the editors say "no workspace settings" from the same reading the server applies.
    A file with none (a comment-only .codeloupe.toml, a pyproject.toml without `[tool.codeloupe]`) or that cannot
    be read for settings is not one."""
    return [PYPROJECT if where == PYPROJECT_TABLE else where
            for where, table in workspace_settings(root).items() if table]


def _own_table(path: Path, unread: list[str]) -> dict[str, Any] | None:
    """The TOML of a settings file the workspace holds at `path` itself (a regular file, not a link: one to
    /proc/kmsg blocked every command for good; one elsewhere would read a file outside the workspace); None when
    there is none, or it cannot be read (said in `unread`)."""
    if path.is_symlink():
        unread.append(f"codeloupe: {path} is a link: not read for settings")
        return None
    if not path.is_file():
        return None
    try:
        return _read_toml(path)
    except SettingsError as exc:
        unread.append(f"codeloupe: {exc}; not read for settings")
        return None


def workspace_digest(root: Path) -> str:
    """What trusting the workspace is keyed by, besides its real path (see `codeloupe.trust`)."""
    return settings_digest(workspace_settings(Path(root).resolve()))


def _needs_trust(key: str, value: Any, where: str) -> bool:
    """Whether an untrusted workspace's file may not set `key` to `value`. An unknown key or an unusable value
    is not trust's to decide: `apply` names it."""
    name = _normalise_key(key)
    if name not in _FIELDS:
        return False
    if name not in WORKSPACE_SAFE:
        return True
    try:
        return name == "max_file_bytes" and _coerce(name, value, where) > WORKSPACE_MAX_FILE_BYTES
    except SettingsError:
        return False


def _apply_workspace(settings: Settings, root: Path, trusted: bool, trusted_digest: str | None,
                     environ: Mapping[str, str]) -> Settings:
    warnings: list[str] = []
    files = workspace_settings(root, warnings)
    # Trust is keyed by the files' whole tables, the keys left out below included (no file: nothing to trust).
    # `trusted_digest` is compared with the tables read here, once: a file rewritten between a caller's own read
    # and this one is never applied on the strength of what the caller read.
    digest = settings_digest(files) if files else ""
    state = TRUSTED if trusted or not files or digest == trusted_digest else \
        TrustStore.default(environ).state(root, digest)
    ignored: list[tuple[str, tuple[str, ...]]] = []
    for label, table in files.items():
        where = str(root / label)
        user_only = sorted(key for key in table if _normalise_key(key) in USER_ONLY)
        if user_only:
            warnings.append(f"codeloupe: ignoring {', '.join(user_only)} in {where}: only your own settings may "
                            "set them")
            table = {key: value for key, value in table.items() if key not in user_only}
        if state != TRUSTED:
            unsafe = tuple(key for key, value in table.items()
                           if value is not None and _needs_trust(key, value, where))
            table = {key: value for key, value in table.items() if key not in unsafe}
            if unsafe:
                ignored.append((where, unsafe))
        settings = apply(settings, table, where, workspace=True, base_dir=root, unusable=warnings)
    if ignored:
        settings = dataclasses.replace(settings, ignored=IgnoredSettings(str(root), tuple(ignored), state == CHANGED))
    return dataclasses.replace(settings, warnings=tuple(warnings)) if warnings else settings


def load_settings(root: Path | None = None, overrides: dict[str, Any] | None = None,
                  environ: Mapping[str, str] | None = None, *, trusted: bool = False,
                  trusted_digest: str | None = None, overrides_from: str = "overrides") -> Settings:
    """The settings for a workspace (or none). `trusted`: the caller's client already established the user's
    trust in the workspace (an editor's workspace trust); `trusted_digest`: the client trusted the settings
    files whose tables have this digest (`workspace_digest`), and only those; otherwise the user's trust store
    decides.
    `overrides_from`: where the overrides came from, as an error about one of them names it ("the command
    line")."""
    env = os.environ if environ is None else environ
    settings = Settings()
    user_file = user_config_dir(env) / USER_CONFIG_NAME
    if user_file.is_file():
        settings = apply(settings, _read_toml(user_file, follow_links=True), str(user_file), base_dir=user_file.parent)
    if root is not None:
        settings = _apply_workspace(settings, Path(root).resolve(), trusted, trusted_digest, env)
    from_env = {
        name[len(_ENV_PREFIX):].lower(): value
        for name, value in env.items()
        if name.startswith(_ENV_PREFIX) and name[len(_ENV_PREFIX):].lower() in _FIELDS
    }
    settings = apply(settings, from_env, "the environment")
    if overrides:
        settings = apply(settings, overrides, overrides_from)
    return settings
