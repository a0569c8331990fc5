"""One settings object for every surface.

Sources, later ones win: built-in defaults, `[tool.codeloupe]` in the workspace's pyproject.toml,
`.codeloupe.toml` in the workspace, environment variables (`CODELOUPE_*`), then explicit overrides (CLI flags,
LSP initialization options / didChangeConfiguration). Every surface maps onto the same field names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import platformdirs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib


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
    embed_threads: int = 0  # onnxruntime intra-op threads; 0: all cores
    onnx_model_dir: str = ""  # for embed_provider = "onnx"
    # --- ask
    chat_base_url: str = ""
    chat_model: str = ""
    chat_api_key: str = ""
    chat_timeout_s: float = 60.0
    # --- storage
    cache_dir: str = ""  # "" -> $CODELOUPE_CACHE_DIR or the platform user cache dir

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

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
_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


def _coerce(name: str, value: Any, source: str) -> Any:
    kind = type(getattr(Settings(), name))
    try:
        if kind is bool:
            if isinstance(value, str):
                return value.strip().lower() in ("1", "true", "yes", "on")
            return bool(value)
        if kind is int:
            return int(value)
        if kind is float:
            return float(value)
        if kind is list:
            if isinstance(value, str):
                return [v.strip() for v in value.split(",") if v.strip()]
            return [str(v) for v in value]
        return str(value)
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"setting {name!r} from {source}: cannot use {value!r} ({exc})") from exc


def apply(settings: Settings, values: dict[str, Any], source: str) -> Settings:
    """Overlay `values` (field names; '-' and camelCase accepted) onto `settings`. Unknown keys are errors."""
    changes: dict[str, Any] = {}
    for raw_key, value in values.items():
        if value is None:
            continue
        key = _normalise_key(raw_key)
        if key not in _FIELDS:
            raise SettingsError(f"unknown setting {raw_key!r} in {source}")
        changes[key] = _coerce(key, value, source)
    return dataclasses.replace(settings, **changes)


def _normalise_key(key: str) -> str:
    out = []
    for ch in key.replace("-", "_").replace(".", "_"):
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch)
    return "".join(out).lstrip("_")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML ({exc})") from exc


def load_settings(root: Path | None = None, overrides: dict[str, Any] | None = None,
                  environ: dict[str, str] | None = None) -> Settings:
    settings = Settings()
    if root is not None:
        root = Path(root)
        pyproject = root / "pyproject.toml"
        if pyproject.is_file():
            table = _read_toml(pyproject).get("tool", {}).get("codeloupe", {})
            settings = apply(settings, table, f"{pyproject} [tool.codeloupe]")
        own = root / ".codeloupe.toml"
        if own.is_file():
            settings = apply(settings, _read_toml(own), str(own))
    env = os.environ if environ is None else environ
    from_env = {
        name[len(_ENV_PREFIX):].lower(): value
        for name, value in env.items()
        if name.startswith(_ENV_PREFIX) and name[len(_ENV_PREFIX):].lower() in _FIELDS
    }
    settings = apply(settings, from_env, "the environment")
    if overrides:
        settings = apply(settings, overrides, "overrides")
    return settings
