"""A bug report's frames in compiled JavaScript pin the source lines they were compiled from, through the maps
real tools wrote (tests/fixtures/source_maps: an esbuild bundle in `dist/`, tsc's modules in `build/`, both
folders that discovery leaves out)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from codeloupe.api import Workspace
from codeloupe.source_maps import MAPPINGS_MAX_CHARS, MAPS_KEPT, SourceMaps, decode

SHOP = Path(__file__).parent / "fixtures" / "source_maps" / "shop"

# What Node printed running the bundle and tsc's output, the package installed on another machine.
BUNDLE_TRACE = """RangeError: negative quantity for A-1
    at lineTotal (/srv/app/node_modules/shop/dist/shop.cjs.js:31:11)
    at /srv/app/node_modules/shop/dist/shop.cjs.js:46:56
    at Array.reduce (<anonymous>)
    at Cart.total (/srv/app/node_modules/shop/dist/shop.cjs.js:46:28)
    at Object.<anonymous> (/srv/app/checkout.js:2:74)
"""
# The same bundle minified (`--minify`): one line, so its frames differ only in their columns.
MINIFIED_TRACE = """RangeError: negative quantity for A-1
    at o (/srv/app/node_modules/shop/dist/shop.min.js:1:527)
    at /srv/app/node_modules/shop/dist/shop.min.js:1:742
    at Array.reduce (<anonymous>)
    at s.total (/srv/app/node_modules/shop/dist/shop.min.js:1:726)
    at Object.<anonymous> (/srv/app/checkout.js:3:68)
"""
TSC_TRACE = """RangeError: negative quantity for A-1
    at lineTotal (/srv/app/node_modules/shop/build/pricing.js:7:15)
    at /srv/app/node_modules/shop/build/cart.js:13:84
    at Array.reduce (<anonymous>)
    at Cart.total (/srv/app/node_modules/shop/build/cart.js:13:32)
    at Object.<anonymous> (/srv/app/checkout.js:2:74)
"""


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    shutil.copytree(SHOP, root)
    return root


@pytest.mark.parametrize(("frame", "line", "column", "expected"), [
    ("/srv/app/node_modules/shop/dist/shop.cjs.js", 31, 11, ("src/pricing.ts", 10)),  # the throw
    ("/srv/app/node_modules/shop/dist/shop.cjs.js", 46, 56, ("src/cart.ts", 11)),  # the reduce callback
    ("dist/shop.cjs.js", 31, 0, ("src/pricing.ts", 10)),  # no column: the line's first mapped segment
    ("C:\\app\\node_modules\\shop\\build\\pricing.js", 7, 15, ("src/pricing.ts", 10)),
    ("/srv/app/node_modules/shop/build/cart.js", 13, 32, ("src/cart.ts", 11)),
    ("/srv/app/node_modules/shop/dist/shop.min.js", 1, 527, ("src/pricing.ts", 10)),
    ("/srv/app/node_modules/shop/dist/shop.min.js", 1, 742, ("src/cart.ts", 11)),
])
def test_a_compiled_line_maps_to_the_source_line_it_came_from(shop: Path, frame: str, line: int, column: int,
                                                              expected: tuple[str, int]) -> None:
    maps = SourceMaps(shop)
    compiled = maps.compiled_file(frame)
    assert compiled is not None
    assert maps.original(compiled, line, column) == expected
    assert (shop / expected[0]).read_text().splitlines()[expected[1] - 1].strip().startswith(
        ("throw new RangeError", "const sum = this.lines.reduce"))


@pytest.mark.parametrize("trace", [BUNDLE_TRACE, MINIFIED_TRACE, TSC_TRACE])
def test_a_trace_through_compiled_files_pins_the_source(shop: Path, trace: str,
                                                        lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(shop)
    assert {Path(p).parts[0] for p in ws.store.file_rows()} == {"src"}  # dist/ and build/ are left out
    bundle = ws.search(trace)
    assert bundle.issue_mode
    top = bundle.files[0]
    assert top.path == "src/pricing.ts"
    assert "its source map: src/pricing.ts:10" in top.why
    # The frame's line gets the frame's bonus: the chunk shown first holds the throw.
    first = top.chunks[0]
    assert first.start_line <= 10 <= first.end_line
    assert any(h.path == "src/cart.ts" and "its source map: src/cart.ts:11" in h.why for h in bundle.files)


def test_a_map_that_is_a_link_or_behind_one_is_not_read(shop: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    shutil.copytree(shop / "build", outside)
    (shop / "build" / "pricing.js.map").unlink()
    (shop / "build" / "pricing.js.map").symlink_to(outside / "pricing.js.map")
    (shop / "linked").symlink_to(outside)
    maps = SourceMaps(shop)
    assert maps.compiled_file("/srv/app/build/pricing.js") is None
    assert maps.compiled_file("/srv/app/linked/cart.js") is None
    assert maps.compiled_file("/srv/app/build/cart.js") == "build/cart.js"


@pytest.mark.parametrize("text", [
    b"",
    b"not json",
    b"[" * 100_000,  # deeper than the JSON decoder recurses
    json.dumps({"version": 3, "sources": ["a.ts"], "mappings": "AAAA;!!!!"}).encode(),  # not base64 VLQ
    json.dumps({"version": 3, "sources": ["a.ts"], "mappings": "gggggggggggggggggA"}).encode(),  # a huge value
    json.dumps({"version": 3, "sources": "a.ts", "mappings": "AAAA"}).encode(),
    json.dumps({"version": 3, "sources": ["a.ts"], "mappings": "AA"}).encode(),  # two fields: no segment has two
])
def test_a_broken_map_maps_nothing(text: bytes) -> None:
    assert decode(text) is None


@pytest.mark.parametrize("sources", [["a.ts"], [None], [7]])
def test_a_segment_naming_a_source_the_map_lacks_or_does_not_name_maps_nothing(sources: list[object]) -> None:
    # A null source, read as "", became the compiled file's folder (`build`): an indexed file so named was pinned.
    mappings = "AEAA" if sources == ["a.ts"] else "AAAA"
    source_map = decode(json.dumps({"version": 3, "sources": sources, "mappings": mappings}).encode())
    assert source_map is not None and source_map.original(1) is None


def test_a_map_past_the_mappings_bound_maps_nothing_and_a_real_sized_one_maps() -> None:
    # A crafted map of 16 MB of `;` took 11 s and 380 MB to decode on the query path; a development bundle's
    # mappings are ~0.2 MB, this one's 0.5 MB (line n came from source line n).
    real = decode(json.dumps({"version": 3, "sources": ["a.ts"], "mappings": "AAAA" + ";AACA" * 99_999}).encode())
    assert real is not None and real.original(1) == ("a.ts", 1) and real.original(100_000) == ("a.ts", 100_000)
    crafted = json.dumps({"version": 3, "sources": ["a.ts"], "mappings": ";" * (MAPPINGS_MAX_CHARS + 1)})
    assert decode(crafted.encode()) is None


def test_a_segment_before_its_source_s_first_line_maps_nothing() -> None:
    source_map = decode(json.dumps({"version": 3, "sources": ["a.ts"], "mappings": "AAFA"}).encode())  # line -2
    assert source_map is not None and source_map.original(1) is None


def test_a_query_reads_no_more_maps_than_a_workspace_keeps(shop: Path,
                                                             lexical_workspace: Callable[[Path], Workspace]) -> None:
    # A report may name hundreds of compiled files, each with a map: each search read and decoded them all.
    for n in range(MAPS_KEPT + 2):
        for suffix in ("", ".map"):
            shutil.copy(shop / "build" / f"pricing.js{suffix}", shop / "build" / f"pricing{n}.js{suffix}")
    ws = lexical_workspace(shop)
    trace = "RangeError: negative quantity for A-1\n" + "".join(  # lines 6 to 11: each another source line
        f"    at lineTotal (/srv/app/node_modules/shop/build/pricing{n}.js:{6 + n}:5)\n" for n in range(MAPS_KEPT + 2))
    top = ws.search(trace).files[0]
    assert top.path == "src/pricing.ts"
    assert top.why.count("its source map: src/pricing.ts:") == MAPS_KEPT


@pytest.mark.parametrize("frame", [
    "/srv/app/node_modules/shop/dist/shop.cjs.js:31:" + "9" * 5000,  # past what Python's int() reads
    "/srv/app/node_modules/shop/src/pricing.ts:" + "9" * 20,  # past a 64-bit line
])
def test_a_frame_s_number_past_any_file_s_is_read_as_unknown(shop: Path, frame: str,
                                                              lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(shop)
    bundle = ws.search(f"RangeError: negative quantity for A-1\n    at lineTotal ({frame})\n"
                       "    at Cart.total (/srv/app/node_modules/shop/dist/shop.cjs.js:46:28)\n")
    assert {"src/pricing.ts", "src/cart.ts"} <= {h.path for h in bundle.files}


def test_a_map_replaced_keeping_its_size_and_mtime_is_read_again(shop: Path) -> None:
    # npm writes every file of a package with one fixed mtime: an upgrade can replace a map keeping both.
    maps, old = SourceMaps(shop), shop / "build" / "pricing.js.map"
    assert maps.original("build/pricing.js", 7, 15) == ("src/pricing.ts", 10)
    new, st = shop / "build" / "upgraded.map", old.stat()
    new.write_text(old.read_text().replace("pricing.ts", "tariffs.ts"))
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, old)
    assert old.stat().st_size == st.st_size and old.stat().st_mtime_ns == st.st_mtime_ns
    assert maps.original("build/pricing.js", 7, 15) == ("src/tariffs.ts", 10)


def test_a_dependency_s_map_pins_no_workspace_file_of_the_same_name(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    """A frame in a dependency's bundle (under `node_modules/`, which is not indexed) maps to the dependency's own
    `src/`; the workspace's `src/` file of the same name is another file and gets no pin from it."""
    root = tmp_path / "app"
    shutil.copytree(SHOP / "src", root / "src")  # the application's own modules, named as the dependency's are
    shutil.copytree(SHOP / "dist", root / "node_modules" / "shop" / "dist")
    ws = lexical_workspace(root)
    bundle = ws.search(BUNDLE_TRACE)
    assert not any("its source map" in h.why for h in bundle.files)
    maps = SourceMaps(root)
    assert maps.original("node_modules/shop/dist/shop.cjs.js", 31, 11) == ("node_modules/shop/src/pricing.ts", 10)
