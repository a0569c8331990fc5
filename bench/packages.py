"""Fetch the pinned source packages the robustness benchmark and the development sets are built from.

    python bench/packages.py fetch [--dir /work/corpora/pkgs] [--jobs 2] [ID ...]
    python bench/packages.py pin [ID ...]     # resolve unpinned entries of packages.json to today's version
    python bench/packages.py list

`packages.json` (beside this file) names each package: its registry (``pypi``: an sdist by
``pip download --no-binary :all:``; ``npm``: ``npm pack``; ``debian``: ``apt-get download``, a Debian package
that ships the sources, unpacked with ``dpkg-deb -x``), the pinned version, the archive's sha256 and the
directory inside the archive that is the package's source root. `fetch` downloads each archive into
``DIR/<id>/download``, refuses one whose sha256 differs, unpacks it into ``DIR/<id>/src`` and links
``DIR/<id>/repo`` to the source root -- the layout of the golden corpora, so ``codeloupe eval --corpora DIR``
finds them. `pin` downloads the registry's current version of every entry that has no version yet and writes
version, sha256 and root back into packages.json (run ``apt-get update`` once before fetching Debian packages).

A package's archive is untrusted input: tarballs are unpacked with tarfile's ``data`` filter (no links out of
the tree, no devices, no absolute paths).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

PACKAGES_JSON = Path(__file__).with_name("packages.json")
DEFAULT_DIR = Path(os.environ.get("CODELOUPE_PKGS", "/work/corpora/pkgs"))
# pip resolves an sdist's metadata by running its build backend; an environment that already holds the common
# backends lets it do so without building them from source for every package (minutes -> a second).
PIP = os.environ.get("CODELOUPE_PKGS_PIP", "/work/corpora/pipenv/bin/pip")
PIP_BACKENDS = ("flit_core", "hatchling", "hatch-vcs", "hatch-fancy-pypi-readme", "setuptools", "setuptools-scm",
                "poetry-core", "wheel", "pdm-backend")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".zip", ".deb")
# Where Debian's source-shipping packages put the sources, and how many single directories below that the root
# lies at most: a crate or gem is one directory (named with its version); a Go import path or a PHP namespace
# is as deep as it is.
DEBIAN_SOURCE_DIRS = {"usr/share/cargo/registry": 1, "usr/share/rubygems-integration/all/gems": 1,
                      "usr/share/gocode/src": 99, "usr/share/php": 99, "usr/lib/ruby/vendor_ruby": 0}

_APT_LOCK = threading.Lock()  # apt-get download shares apt's list and partial directories


@dataclass
class Package:
    id: str
    registry: str  # pypi | npm | debian
    name: str
    language: str  # the package's main language
    version: str = ""
    sha256: str = ""
    root: str = ""  # the source root inside the unpacked archive
    queries: bool = True  # False: robustness only (a repository the query sets must not use)
    note: str = ""


class FetchError(RuntimeError):
    pass


def load_packages(path: Path = PACKAGES_JSON) -> list[Package]:
    return [Package(**entry) for entry in json.loads(path.read_text(encoding="utf-8"))["packages"]]


def save_packages(packages: list[Package], path: Path = PACKAGES_JSON) -> None:
    rows = [{k: v for k, v in asdict(p).items() if v not in ("", True) or k in ("version", "sha256", "root")}
            for p in packages]
    path.write_text(json.dumps({"packages": rows}, indent=1) + "\n", encoding="utf-8")


def repo_path(package: Package, pkgs_dir: Path = DEFAULT_DIR) -> Path:
    return pkgs_dir / package.id / "repo"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _archive_in(directory: Path) -> Path | None:
    found = sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(ARCHIVE_SUFFIXES))
    return found[0] if found else None


def _run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise FetchError(f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()[-400:]}")
    return done.stdout


def _download(package: Package, into: Path) -> Path:
    """Download the package's archive (the pinned version, or the registry's current one) into `into`."""
    pinned = bool(package.version)
    if package.registry == "pypi":
        spec = f"{package.name}=={package.version}" if pinned else package.name
        _run([PIP, "download", "--quiet", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
              spec, "-d", str(into)], into)
    elif package.registry == "npm":
        _run(["npm", "pack", "--silent", f"{package.name}@{package.version or 'latest'}"], into)
    elif package.registry == "debian":
        with _APT_LOCK:
            _run(["apt-get", "download", f"{package.name}={package.version}" if pinned else package.name], into)
    else:
        raise FetchError(f"unknown registry {package.registry!r}")
    archive = _archive_in(into)
    if archive is None:
        raise FetchError("nothing was downloaded")
    return archive


def _version_of(package: Package, archive: Path) -> str:
    if package.registry == "debian":
        return _run(["dpkg-deb", "-f", str(archive), "Version"], archive.parent).strip()
    stem = archive.name
    for suffix in ARCHIVE_SUFFIXES:
        stem = stem.removesuffix(suffix)
    return stem.rsplit("-", 1)[1]


def _unpack(archive: Path, into: Path) -> None:
    if archive.name.endswith(".deb"):
        _run(["dpkg-deb", "-x", str(archive), str(into)], into)
    elif archive.name.endswith(".zip"):
        shutil.unpack_archive(archive, into)
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")


def _holds_files(entry: Path) -> bool:
    """A real file, or a directory with one somewhere below (Debian adds directories of compatibility links)."""
    if entry.is_symlink():
        return False
    if not entry.is_dir():
        return True
    return any(not Path(d, n).is_symlink() for d, _, names in os.walk(entry) for n in names)


def _source_root(package: Package, src: Path) -> str:
    base, depth = src, 99
    if package.registry == "debian":
        found = next((d for d in DEBIAN_SOURCE_DIRS if (src / d).is_dir()), None)
        if found is None:
            raise FetchError(f"no source directory ({', '.join(DEBIAN_SOURCE_DIRS)}) in the package")
        base, depth = src / found, DEBIAN_SOURCE_DIRS[found]
    for _ in range(depth):
        entries = [e for e in base.iterdir() if not e.name.startswith(".") and _holds_files(e)]
        if len(entries) != 1 or not entries[0].is_dir():
            break
        base = entries[0]
    return base.relative_to(src).as_posix() or "."


def fetch(package: Package, pkgs_dir: Path = DEFAULT_DIR) -> Path:
    """Download (unless cached), verify and unpack one pinned package; return its repo path."""
    if not (package.version and package.sha256 and package.root):
        raise FetchError("not pinned (run: packages.py pin)")
    base = pkgs_dir / package.id
    download, src, repo = base / "download", base / "src", base / "repo"
    download.mkdir(parents=True, exist_ok=True)
    archive = _archive_in(download)
    if archive is not None and sha256_of(archive) != package.sha256:
        archive.unlink()
        archive = None
    if archive is None:
        archive = _download(package, download)
    got = sha256_of(archive)
    if got != package.sha256:
        raise FetchError(f"sha256 mismatch for {archive.name}: expected {package.sha256}, got {got}")
    if package.registry == "debian" and _version_of(package, archive) != package.version:
        raise FetchError(f"{archive.name} is not version {package.version}")
    stamp = base / "unpacked.sha256"
    if not (repo.is_dir() and stamp.is_file() and stamp.read_text() == got):
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir()
        _unpack(archive, src)
        if not (src / package.root).is_dir():
            raise FetchError(f"root {package.root!r} not in the unpacked archive")
        if repo.is_symlink() or repo.exists():
            repo.unlink()
        repo.symlink_to(Path("src", package.root))
        stamp.write_text(got)
    return repo


def pin(package: Package, pkgs_dir: Path = DEFAULT_DIR) -> Package:
    """Download the registry's current version of an unpinned package and record version, sha256 and root."""
    download = pkgs_dir / package.id / "download"
    shutil.rmtree(download, ignore_errors=True)
    download.mkdir(parents=True)
    archive = _download(package, download)
    with tempfile.TemporaryDirectory() as scratch:
        _unpack(archive, Path(scratch))
        root = _source_root(package, Path(scratch))
    package.version, package.sha256, package.root = _version_of(package, archive), sha256_of(archive), root
    return package


def _parallel(action, packages: list[Package], jobs: int) -> list[tuple[Package, object]]:
    def attempt(package: Package) -> tuple[Package, object]:
        try:
            return package, action(package)
        except (FetchError, OSError, tarfile.TarError, subprocess.SubprocessError) as exc:
            return package, exc

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(attempt, packages))


def ensure_pip_env() -> None:
    if Path(PIP).is_file():
        return
    env = Path(PIP).parent.parent
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    subprocess.run([PIP, "install", "--quiet", "--upgrade", "pip", *PIP_BACKENDS], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("fetch", "pin", "list"))
    parser.add_argument("ids", nargs="*", help="only these package ids")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the package cache (default %(default)s)")
    parser.add_argument("--jobs", type=int, default=2, help="downloads at once (default %(default)s)")
    args = parser.parse_intermixed_args(argv)  # `fetch --dir D a b` as well as `fetch a b --dir D`

    packages = load_packages()
    known = {p.id for p in packages}
    unknown = sorted(set(args.ids) - known)
    if unknown:
        parser.error(f"unknown package id(s): {', '.join(unknown)}")
    selected = [p for p in packages if not args.ids or p.id in args.ids]
    if args.command == "list":
        for p in selected:
            print(f"{p.id}\t{p.registry}\t{p.name}\t{p.version or '-'}\t{p.language}")
        return 0
    if any(p.registry == "pypi" for p in selected):
        ensure_pip_env()
    failed = 0
    if args.command == "pin":
        todo = [p for p in selected if not (p.version and p.sha256 and p.root)]
        for package, result in _parallel(lambda p: pin(p, args.dir), todo, args.jobs):
            if isinstance(result, Exception):
                failed += 1
                print(f"[{package.id}] FAILED: {result}", file=sys.stderr)
            else:
                print(f"[{package.id}] pinned {package.version} root={package.root}", file=sys.stderr)
        save_packages(packages)
    else:
        for package, result in _parallel(lambda p: fetch(p, args.dir), selected, args.jobs):
            if isinstance(result, Exception):
                failed += 1
                print(f"[{package.id}] FAILED: {result}", file=sys.stderr)
            else:
                print(f"{package.id}\t{result}")
    print(f"{len(selected) - failed} of {len(selected)} ok", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
