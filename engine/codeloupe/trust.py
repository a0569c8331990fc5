"""The user's trust store: which workspaces may use settings that reach beyond the workspace itself.

A workspace's own files (`pyproject.toml [tool.codeloupe]`, `.codeloupe.toml`) may always set the harmless
settings; everything that could send code or keys off the machine, load a model or exhaust the machine applies
only once the user trusts the workspace (`codeloupe trust PATH`). Trust is recorded per workspace (its real
path) together with the sha256 of the codeloupe settings its files hold, so an edited settings file needs trust
again, like Neovim's `vim.secure.trust`.

It also records forged chunk strategies (`.codeloupe/strategies/*.py`, see `codeloupe.chunk.strategies`): each
by its real path with the sha256 of the bytes the user accepted. A strategy is Python code, so it is imported
only while its bytes still hash to what was accepted; a strategy file a clone brings along runs nothing.

The store lives in the user config dir (`CODELOUPE_CONFIG_DIR`, else the platform's user config dir), which no
workspace setting can move. Writes replace the whole file atomically.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

log = logging.getLogger("codeloupe.trust")

STORE_NAME = "trusted-workspaces.json"
_FORMAT = 1

TRUSTED = "trusted"
UNTRUSTED = "untrusted"
CHANGED = "changed"  # trusted once, but its settings changed since


def user_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the user's own settings (`config.toml`) and the trust store live."""
    env = os.environ if environ is None else environ
    override = env.get("CODELOUPE_CONFIG_DIR", "")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir("codeloupe", appauthor=False))


def settings_digest(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """sha256 of a workspace's codeloupe settings, by file (canonical JSON, so formatting does not count)."""
    canonical = json.dumps(tables, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TrustEntry:
    root: str  # the workspace's (or strategy file's) real path
    sha256: str  # of its settings (or the strategy's bytes) when the user trusted it
    trusted_at: str  # ISO 8601, UTC


@dataclass
class _Records:
    workspaces: dict[str, TrustEntry]
    strategies: dict[str, TrustEntry]  # keyed by the strategy file's real path


class TrustStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def default(cls, environ: Mapping[str, str] | None = None) -> TrustStore:
        return cls(user_config_dir(environ) / STORE_NAME)

    def _read(self) -> _Records:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return _Records(_section(raw["workspaces"]), _section(raw.get("strategies", {})))
        except FileNotFoundError:
            return _Records({}, {})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # Unreadable trust is no trust: every workspace falls back to its harmless settings.
            log.warning("ignoring the unreadable trust store %s: %s", self.path, exc)
            return _Records({}, {})

    def _write(self, records: _Records) -> None:
        payload = {"version": _FORMAT,
                   "workspaces": _payload(records.workspaces), "strategies": _payload(records.strategies)}
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")  # mode 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(payload, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def entries(self) -> list[TrustEntry]:
        return self._entries("workspaces")

    def state(self, root: Path, digest: str) -> str:
        return self._state("workspaces", root, digest)

    def trust(self, root: Path, digest: str) -> None:
        self._put("workspaces", root, digest)

    def revoke(self, root: Path) -> bool:
        """Forget a workspace; False when it was not trusted."""
        return self._drop("workspaces", root)

    # ------------------------------------------------------------------ forged chunk strategies

    def strategy_entries(self) -> list[TrustEntry]:
        return self._entries("strategies")

    def strategy_state(self, path: Path, digest: str) -> str:
        """TRUSTED when the file at `path` was accepted with these bytes, CHANGED when with other bytes."""
        return self._state("strategies", path, digest)

    def trust_strategy(self, path: Path, digest: str) -> None:
        self._put("strategies", path, digest)

    def revoke_strategy(self, path: Path) -> bool:
        return self._drop("strategies", path)

    # ------------------------------------------------------------------ either section

    def _entries(self, section: str) -> list[TrustEntry]:
        return sorted(getattr(self._read(), section).values(), key=lambda e: e.root)

    def _state(self, section: str, path: Path, digest: str) -> str:
        entry = getattr(self._read(), section).get(_key(path))
        if entry is None:
            return UNTRUSTED
        return TRUSTED if entry.sha256 == digest else CHANGED

    def _put(self, section: str, path: Path, digest: str) -> None:
        records = self._read()
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        getattr(records, section)[_key(path)] = TrustEntry(_key(path), digest, now)
        self._write(records)

    def _drop(self, section: str, path: Path) -> bool:
        records = self._read()
        if getattr(records, section).pop(_key(path), None) is None:
            return False
        self._write(records)
        return True


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _section(raw: Mapping[str, Any]) -> dict[str, TrustEntry]:
    return {root: TrustEntry(root, str(item["sha256"]), str(item.get("trusted_at", ""))) for root, item in raw.items()}


def _payload(entries: dict[str, TrustEntry]) -> dict[str, dict[str, str]]:
    return {root: {"sha256": e.sha256, "trusted_at": e.trusted_at} for root, e in sorted(entries.items())}


def _key(root: Path) -> str:
    return str(Path(root).resolve())
