"""Editor settings (initializationOptions, didChangeConfiguration) -> overrides for `load_settings`.

The engine's `apply_settings` knows the field names and their camelCase spellings; every key is tried on its own so
one unknown key or bad value is reported and dropped while the rest still apply. Editor settings are the
user's own; `trusted` carries the client's workspace-trust decision (honoured from initializationOptions), and
`repositories` names the shared index's repositories to open beside the folders (`codeloupe_lsp.shared`), read
from the database `storeUrl` names. `settingNames` is the client's own name for each key it sends, which a
warning about the key's value says instead of the engine's: the client keeps its mapping, the server none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codeloupe.api import Settings, SettingsError, SettingValueError, apply_settings, did_you_mean
from codeloupe_lsp.params import shown

# Clients may nest the options under the extension's section name.
SECTION = "codeloupe"


# The client's trust decision for the workspace (initializationOptions only; not a setting).
TRUSTED = "trusted"
# Repositories of the shared index (`storeUrl`) to search with no checkout (`codeloupe_lsp.shared`).
REPOSITORIES = "repositories"
# The shared index those repositories are read from: theirs only, not the folders' (a folder opened on it would
# upload the local checkout, or clash with the organisation's repository of the same name). A folder's own index
# is in the shared index only when the user's config.toml says `store_url`.
SHARED_STORE_KEYS = ("storeUrl", "store_url")
# The client's name of each key it sends, as its user typed it (VS Code: `{"chunkBudget": "codeloupe.chunkBudget"}`),
# sent with every settings object; not a setting. A key it does not name is named as the engine names it.
SETTING_NAMES = "settingNames"


@dataclass
class EditorOptions:
    overrides: dict[str, Any] = field(default_factory=dict)
    trusted: bool = False  # the client established the user's trust in the workspace (VS Code, Neovim prompt)
    repositories: list[str] = field(default_factory=list)
    store_url: str = ""  # the shared index of `repositories` ("": the user's config.toml `store_url`)
    unknown: list[str] = field(default_factory=list)  # each with the known setting it is closest to, if any
    invalid: list[str] = field(default_factory=list)

    def problems(self) -> str:
        """One warning covering every key that was ignored, or ""."""
        parts = []
        if self.unknown:
            parts.append("unknown setting(s) ignored: " + ", ".join(sorted(self.unknown)))
        parts.extend(self.invalid)
        return "codeloupe: " + "; ".join(parts) if parts else ""


def read_options(raw: Any) -> EditorOptions:
    options = EditorOptions()
    if _empty(raw):
        return options
    if not isinstance(raw, Mapping):
        options.invalid.append(f"settings must be an object, got {type(raw).__name__}; ignored")
        return options
    if SECTION in raw and (isinstance(raw[SECTION], Mapping) or _empty(raw[SECTION])):
        raw = raw[SECTION] or {}
    if TRUSTED in raw:
        options.trusted = raw[TRUSTED] is True
        if not isinstance(raw[TRUSTED], bool):
            options.invalid.append(f"`trusted` must be true or false, got {shown(raw[TRUSTED])}; not trusted")
    names = _setting_names(raw.get(SETTING_NAMES), options)
    if REPOSITORIES in raw:
        options.repositories = _names(raw[REPOSITORIES], names.get(REPOSITORIES, REPOSITORIES), options)
    scratch = Settings()
    for key, value in raw.items():
        if key in (TRUSTED, REPOSITORIES, SETTING_NAMES):
            continue
        try:
            apply_settings(scratch, {key: value}, "the editor settings")
        except SettingValueError as exc:
            options.invalid.append(f"{exc.named(names.get(key, exc.name))}; ignored")
            continue
        except SettingsError:  # an unknown key
            options.unknown.append(f"{key}{did_you_mean(str(key))}")
            continue
        if key in SHARED_STORE_KEYS:
            options.store_url = value
            continue
        options.overrides[key] = value
    return options


def _names(raw: Any, setting: str, options: EditorOptions) -> list[str]:
    if isinstance(raw, list) and all(isinstance(name, str) and name.strip() for name in raw):
        return list(dict.fromkeys(raw))
    options.invalid.append(f"`{setting}` must be a list of repository names, got {shown(raw)}; ignored")
    return []


def _setting_names(raw: Any, options: EditorOptions) -> dict[str, str]:
    if _empty(raw):
        return {}
    if isinstance(raw, Mapping) and all(isinstance(name, str) for name in raw.values()):
        return dict(raw)
    options.invalid.append(f"`{SETTING_NAMES}` must map each key to the name it has in the editor, got {shown(raw)};"
                           " ignored")
    return {}


def _empty(raw: Any) -> bool:
    """No settings: null, `{}`, or `[]` (what a Lua client sends for an empty table)."""
    return raw is None or (isinstance(raw, (Mapping, list)) and not raw)
