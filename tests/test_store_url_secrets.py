"""A shared index URL's password is never shown (docs/shared-index.md): not when libpq cannot parse the URL and
its own error text quotes the password or the whole URL, not from the user's config.toml, not in `codeloupe
trust`'s listing of a workspace's settings. Real CLI processes; no database is needed (a URL libpq refuses, or
a unix socket that does not exist)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

NO_SOCKET = "host=/nonexistent/codeloupe-socket"
# (URL, its secret, what the message must still say of it)
MALFORMED = [
    ("postgresql://postgres:hun%ZZter2@/review?" + NO_SOCKET, "hun%ZZter2", "invalid percent-encoded token"),
    (f"postgresql://postgres@/review?{NO_SOCKET}&password=hun%ZZter3", "hun%ZZter3", "invalid percent-encoded token"),
    ("postgresql://postgres:hunter4@[::1/review", "hunter4", "postgresql://postgres@[::1/review"),
    (f"postgresql://postgres:hun%41ter5@/review?{NO_SOCKET}&sslpassword=ssl%ZZ6", "ssl%ZZ6",
     "invalid percent-encoded token"),
    (f"postgresql://postgres:hunter7@/review?{NO_SOCKET}", "hunter7", "/nonexistent/codeloupe-socket"),
    (f"postgresql://postgres@/review?{NO_SOCKET}&password=hunter8", "hunter8", "/nonexistent/codeloupe-socket"),
]


def _codeloupe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codeloupe", *args], env=dict(os.environ), cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("def ledger_total():\n    return 1\n", encoding="utf-8")
    return repo


@pytest.mark.parametrize(("url", "secret", "said"), MALFORMED)
def test_admin_and_index_never_show_the_store_password(tmp_path: Path, url: str, secret: str, said: str) -> None:
    """`admin --store URL` printed libpq's `invalid percent-encoded token: "hun%ZZter2"` (or, for a host it
    could not parse, the whole URL) after the redacted URL: the password is now left out of libpq's text too,
    which still says what was wrong."""
    repo = _repo(tmp_path)
    for args in (["admin", "--store", url, "repos"], ["index", "--store", url, str(repo)]):
        done = _codeloupe(*args, cwd=tmp_path)
        shown = done.stdout + done.stderr
        assert done.returncode != 0 and "Traceback" not in shown, shown
        assert secret not in shown and secret.replace("%41", "A") not in shown, shown
        assert said in shown, shown


@pytest.mark.parametrize(("url", "secret", "said"), MALFORMED)
def test_the_store_url_of_config_toml_never_shows_its_password(tmp_path: Path, url: str, secret: str,
                                                               said: str) -> None:
    """`store_url` in the user's config.toml: the same messages; a host Python cannot split (`[::1`) stopped
    `index` with a ValueError traceback, and is now refused in words."""
    (Path(os.environ["CODELOUPE_CONFIG_DIR"]) / "config.toml").write_text(f"store_url = {url!r}\n", encoding="utf-8")
    done = _codeloupe("index", str(_repo(tmp_path)), cwd=tmp_path)
    shown = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in shown, shown
    assert secret not in shown and said in shown, shown


def test_trust_lists_a_workspace_url_without_its_password(tmp_path: Path) -> None:
    """`codeloupe trust` listed `store_url = 'postgresql://evil:pw@...'` (a setting no workspace may apply, but
    shown) and an endpoint's `https://user:password@host` as written."""
    repo = _repo(tmp_path)
    (repo / ".codeloupe.toml").write_text("store_url = 'postgresql://evil:trustpw1@db.example/x?password=trustpw2'\n"
                                          "embed_base_url = 'https://me:trustpw3@embed.example/v1'\n",
                                          encoding="utf-8")
    done = _codeloupe("trust", str(repo), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "trustpw" not in done.stdout + done.stderr, done.stdout
    assert "store_url = 'postgresql://evil@db.example/x'" in done.stdout
    assert "embed_base_url = 'https://me@embed.example/v1'" in done.stdout
