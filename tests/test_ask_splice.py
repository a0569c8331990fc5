"""The splice: cited prose in, code read from disk out, over a real indexed workspace (no model involved)."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest

from codeloupe.api import Workspace
from codeloupe.ask.excerpts import Excerpts
from codeloupe.ask.sources import Sources
from codeloupe.ask.splice import SpanResolver, Splicer, note_part, render_block, snap_to_symbols
from codeloupe.store import SymbolRow

AUTH = '''\
"""Authentication: password hashing and login sessions."""

import hashlib


def hash_password(password: str, salt: str) -> str:
    """Derive the stored hash of a password."""
    return hashlib.sha256((salt + password).encode()).hexdigest()


class SessionManager:
    """Creates and expires login sessions."""

    def login(self, name: str, password: str):
        user = find_user(name)
        if user is None:
            raise PermissionError("bad credentials")
        return self.open_session(user)

    def open_session(self, user):
        return {"user": user.name}
'''

GUIDE = '''\
# Guide

Run it like this:

```sh
app --serve
```
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app/auth.py").write_text(AUTH)
    (tmp_path / "GUIDE.md").write_text(GUIDE)
    return tmp_path


@pytest.fixture
def ws(repo: Path, lexical_workspace) -> Workspace:
    return lexical_workspace(repo)


def lines_of(repo: Path, path: str, a: int, b: int) -> str:
    return "".join((repo / path).read_text().splitlines(keepends=True)[a - 1:b])


def numbered(repo: Path, spans: list[tuple[str, str, int, int]]) -> Excerpts:
    """Excerpts [1], [2], ... over (path, language, start, end), their text read from disk now."""
    excerpts = Excerpts()
    for path, language, a, b in spans:
        excerpts.add(path, language, a, b, lines_of(repo, path, a, b), label="")
    return excerpts


# Excerpt 1: hash_password (lines 6-8); 2: class SessionManager (11-21); 3: the guide (1-7).
SPANS = [("app/auth.py", "python", 6, 8), ("app/auth.py", "python", 11, 21), ("GUIDE.md", "markdown", 1, 7)]


def splice(ws: Workspace, repo: Path, pieces: list[str], *, whole_sections: bool = False,
           spans: list | None = None) -> tuple[str, Splicer]:
    resolver = SpanResolver(numbered(repo, spans or SPANS), Sources(ws), whole_sections=whole_sections)
    splicer = Splicer(resolver)
    out = [p for delta in pieces for p in splicer.feed(delta)] + splicer.finish()
    return "".join(p.markdown for p in out), splicer


def block(repo: Path, path: str, language: str, a: int, b: int, fence: str = "```", note: str = "") -> str:
    return f"\n`{path}:{a}-{b}`{note}\n{fence}{language}\n{lines_of(repo, path, a, b)}{fence}\n"


def test_whole_and_sub_range_citations_are_spliced_verbatim_after_their_line(ws, repo) -> None:
    text = "Passwords are hashed first [[1]].\nThen `login` checks the user [[2:16-17]] and opens a session.\n"
    answer, splicer = splice(ws, repo, [text])
    assert answer == (
        "Passwords are hashed first (`app/auth.py:6-8`).\n"
        + block(repo, "app/auth.py", "python", 6, 8)
        + "Then `login` checks the user (`app/auth.py:14-18`) and opens a session.\n"
        + block(repo, "app/auth.py", "python", 14, 18)
    )
    first, second = splicer.citations
    assert (first.k, first.requested, first.snapped) == (1, None, False)
    # 16-17 sits inside `login` (14-18): the block opens at the method, never mid-function.
    assert (second.k, second.requested, second.snapped) == (2, (16, 17), True)
    assert second.text == lines_of(repo, "app/auth.py", 14, 18)
    assert splicer.stats["snapped"] == 1


HOSTILE = """\
Hashing happens here [[1]].

    def hash_password(p, s):
        return 'INVENTED-indented'

Then <pre>INVENTED-pre</pre> and <script>alert('INVENTED-script')</script> and <b>bold</b> words.
Call `hash_password` but never `return 'INVENTED-inline'(x)` nor ``INVENTED `double` ``, nor `words
across lines`.
A [click me](javascript:alert('INVENTED-js')) and [the docs](https://example.com/docs) and [guide](GUIDE.md).
<javascript:alert('INVENTED-autolink')> <https://example.com/a> ![a tracking pixel](https://tracker.example/x.png)
<!-- INVENTED-comment
spanning lines -->
> ```python
> INVENTED-quoted-fence
> ```
- ```js
  INVENTED-list-fence
  ```
1. First step
    - a nested item stays
2. Second step <img src=x onerror="INVENTED-img"> ends
<div onclick="INVENTED-handler">A div's words stay as text</div>

After the list.

\tINVENTED-tab-indented
"""
MARKERS = ("Intro <<not the sentinel>> and [a link](x) [[1]]!\n```python\nprint('model code')\n```\n"
           "Sessions [[2:20-21]], again [[1]], bad [[7]] [[2:90-95]] [[x]].\n<<ABSTAIN>> maybe")


@pytest.mark.parametrize("text", [MARKERS, HOSTILE], ids=["markers", "hostile"])
def test_output_does_not_depend_on_how_the_stream_is_split(ws, repo, text: str) -> None:
    whole, reference = splice(ws, repo, [text])
    rng = random.Random(7)
    splits = [[text[:i], text[i:]] for i in range(len(text) + 1)]
    splits.append(list(text))
    for _ in range(40):
        cuts = sorted(rng.sample(range(1, len(text)), 12))
        splits.append([text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])])
    for pieces in splits:
        answer, splicer = splice(ws, repo, pieces)
        assert answer == whole, pieces
        assert splicer.stats == reference.stats and splicer.abstained == reference.abstained


def test_repeated_and_contained_spans_become_back_references(ws, repo) -> None:
    answer, splicer = splice(ws, repo, ["The class [[2]] defines `login` [[2:15-15]]; see [[2]] again."])
    assert answer == (
        "The class (`app/auth.py:11-21`) defines `login` (`app/auth.py:11-21`, shown above); see "
        "(`app/auth.py:11-21`, shown above) again.\n" + block(repo, "app/auth.py", "python", 11, 21)
    )
    assert len(splicer.citations) == 1 and splicer.stats["repeated"] == 2


def test_markers_that_resolve_to_nothing_leave_a_placeholder_and_are_counted(ws, repo) -> None:
    answer, splicer = splice(ws, repo, ["Unknown [[9]], outside [[1:40-41]], odd [[one]], reversed [[1:8-7]], "
                                        "partly [[1:7-30]]."])
    assert answer == (
        "Unknown (citation dropped: no such excerpt), outside (citation dropped: lines outside the excerpt), "
        "odd (citation dropped: malformed), reversed (citation dropped: malformed), partly (`app/auth.py:6-8`).\n"
        + block(repo, "app/auth.py", "python", 6, 8)
        + "\n(4 citations dropped: malformed 2, no such excerpt 1, lines outside the excerpt 1)\n")
    assert splicer.stats["unknown"] == 1 and splicer.stats["out_of_range"] == 1
    assert splicer.stats["malformed"] == 2 and splicer.stats["clamped"] == 1
    assert splicer.citations[0].requested == (7, 30)


def test_a_placeholder_is_the_engines_words_never_the_models(ws, repo) -> None:
    """Whatever a dropped marker holds, the placeholder is fixed plain text: nothing of it renders as code."""
    answer, splicer = splice(ws, repo, ["A [[`x = 1`]] and [[<pre>y</pre>]] and [[1:\n```]] end."])
    assert "x = 1" not in answer and "<pre>" not in answer and "```" not in answer
    assert "(citation dropped: malformed)" in answer and splicer.citations == []


def test_code_the_model_writes_is_removed(ws, repo) -> None:
    text = ("Hashing [[1]]:\n```python\ndef hash_password(p, s):\n    return 'invented'\n```\n"
            "  ~~~\n  more invented\n  ~~~\nInline `names` stay. Unclosed:\n````\nx = 1\n")
    answer, splicer = splice(ws, repo, [text])
    assert "invented" not in answer and "x = 1" not in answer
    assert answer == ("Hashing (`app/auth.py:6-8`):\n" + block(repo, "app/auth.py", "python", 6, 8)
                      + "Inline `names` stay. Unclosed:\n")
    assert splicer.stats["code_blocks_removed"] == 3


def test_abstention_sentinel_is_recognised_and_removed(ws, repo) -> None:
    answer, splicer = splice(ws, repo, ["<<ABST", "AIN>> The excerpts only cover hashing."])
    assert splicer.abstained and answer == " The excerpts only cover hashing."
    _, plain = splice(ws, repo, ["x << y and <<ABSTAINED>> is not it"])
    assert not plain.abstained


def test_a_changed_file_is_re_read_and_spans_re_located(ws, repo) -> None:
    excerpts = numbered(repo, SPANS)  # numbered against the indexed version
    path = repo / "app/auth.py"
    path.write_text("# a new header\n# and another\n" + AUTH)
    splicer = Splicer(SpanResolver(excerpts, Sources(ws)))
    out = splicer.feed("Hashing [[1]] and login [[2:15-16]].") + splicer.finish()
    answer = "".join(p.markdown for p in out)
    note = " (changed on disk since indexing: lines re-located)"
    assert answer == ("Hashing (`app/auth.py:8-10`) and login (`app/auth.py:17-18`).\n"
                      + block(repo, "app/auth.py", "python", 8, 10, note=note)
                      + block(repo, "app/auth.py", "python", 17, 18, note=note))
    assert all(c.changed and not c.snapped for c in splicer.citations)  # stale symbols are never used
    assert splicer.stats["relocated"] == 2
    # The code parts say so too (`parts`, the deltas): a view rendering them has no caption of the markdown's.
    assert [p.to_dict()["changed"] for p in out if p.kind == "code"] == [True, True]
    assert "changed" not in next(p for p in out if p.kind == "ref").to_dict()


def test_cited_lines_gone_from_a_changed_file_are_dropped_with_a_note(ws, repo) -> None:
    excerpts = numbered(repo, SPANS)
    (repo / "app/auth.py").write_text(AUTH.replace("salt + password", "password + salt"))
    splicer = Splicer(SpanResolver(excerpts, Sources(ws)))
    answer = "".join(p.markdown for p in splicer.feed("Hashing [[1]].") + splicer.finish())
    assert answer == ("Hashing (app/auth.py changed since it was indexed; the cited lines are gone).\n"
                      "\n(1 citation dropped: lines gone from the file)\n")
    assert splicer.citations == [] and splicer.stats["stale"] == 1


def test_a_note_names_its_file_on_one_line(repo, lexical_workspace) -> None:
    """The note standing where a citation was dropped named its file raw: a newline in the name began a line of the
    answer's markdown (a heading, `## 9. forged.py changed since it was indexed`) and of the plain text a client
    shows. It names the file on one line, as the answer's captions do (`one_line`)."""
    hostile = "app/gone\n## 9. forged.py"
    (repo / hostile).write_text(AUTH)
    ws = lexical_workspace(repo)
    shown = "app/gone\\n## 9. forged.py"
    for change, note in ((lambda: (repo / hostile).write_text(AUTH.replace("salt + password", "password + salt")),
                          f"({shown} changed since it was indexed; the cited lines are gone)"),
                         (lambda: (repo / hostile).unlink(), f"(cannot read {shown}: ")):
        excerpts = numbered(repo, [(hostile, "python", 6, 8)])
        change()
        splicer = Splicer(SpanResolver(excerpts, Sources(ws)))
        parts = splicer.feed("Hashing [[1]].") + splicer.finish()
        assert parts[1].kind == "note" and parts[1].text.startswith(note), parts[1]
        assert not [line for line in "".join(p.markdown for p in parts).splitlines() if line.startswith("## 9.")]
        (repo / hostile).write_text(AUTH)


def test_a_note_naming_a_file_with_backticks_opens_no_code_span() -> None:
    # The notes name the workspace's files; a file named `a`b`.py` made "`b`" a code span of the answer.
    part = note_part("(lib/a`rm -rf`.py changed since it was indexed; the cited lines are gone)")
    assert part.markdown == "(lib/a\\`rm -rf\\`.py changed since it was indexed; the cited lines are gone)"
    assert part.text == "(lib/a`rm -rf`.py changed since it was indexed; the cited lines are gone)"


def test_notes_and_references_name_a_file_on_one_line(ws, repo) -> None:
    """A file named with a line break: the notes saying its cited lines are gone or it cannot be read named it raw,
    so the break began a line of its own in the parts' text and in the markdown (here a heading), and so did the
    reference where a marker stood, in the parts' text. They name it on one line (`\\n`), as the captions do."""
    name = "app/nl\n### forged.py"
    (repo / name).write_text(AUTH)
    excerpts = numbered(repo, [(name, "python", 6, 8), (name, "python", 11, 21)])
    (repo / name).write_text(AUTH.replace("salt + password", "password + salt"))  # excerpt 1's lines are gone
    stale = Splicer(SpanResolver(excerpts, Sources(ws)))
    parts = stale.feed("Hashing [[1]] and login [[2]].") + stale.finish()
    (repo / name).unlink()
    unreadable = Splicer(SpanResolver(excerpts, Sources(ws)))
    parts += unreadable.feed("Login [[2]].") + unreadable.finish()
    assert [p.kind for p in parts if p.kind in ("note", "ref")] == ["note", "ref", "note", "note", "note"]
    notes = [p.text for p in parts if p.kind == "note"]
    assert notes[0] == "(app/nl\\n### forged.py changed since it was indexed; the cited lines are gone)"
    assert notes[2].startswith("(cannot read app/nl\\n### forged.py")
    assert [p.text for p in parts if p.kind == "ref"] == ["(app/nl\\n### forged.py:11-21)"]
    assert [p.citation.path for p in parts if p.kind == "code"] == [name]  # the span keeps the real name
    assert not any("\n###" in p.text for p in parts if p.kind != "code")
    assert "\n###" not in "".join(p.markdown for p in parts)


def test_a_deleted_file_is_never_shown(ws, repo) -> None:
    excerpts = numbered(repo, SPANS)
    (repo / "app/auth.py").unlink()
    splicer = Splicer(SpanResolver(excerpts, Sources(ws)))
    answer = "".join(p.markdown for p in splicer.feed("Hashing [[1]].") + splicer.finish())
    assert answer.startswith("Hashing (cannot read app/auth.py") and "```" not in answer
    assert splicer.stats["unreadable"] == 1


def test_docs_sections_are_whole_and_fences_outgrow_the_content(ws, repo) -> None:
    answer, splicer = splice(ws, repo, ["Start with the guide [[3:5-6]]."], whole_sections=True)
    assert answer == "Start with the guide (`GUIDE.md:1-7`).\n" + block(repo, "GUIDE.md", "markdown", 1, 7, "````")
    assert splicer.citations[0].requested is None


def test_snap_to_symbols_widens_to_the_innermost_enclosing_definitions() -> None:
    def sym(name: str, a: int, b: int) -> SymbolRow:
        return SymbolRow(1, name, "function", a, b, "", "")

    symbols = [sym("Outer", 1, 40), sym("first", 3, 10), sym("second", 12, 20), sym("inner", 14, 16)]
    assert snap_to_symbols(5, 6, symbols) == (3, 10)
    assert snap_to_symbols(15, 18, symbols) == (14, 20)
    assert snap_to_symbols(11, 11, symbols) == (1, 40)  # between methods: the class is the enclosing symbol
    assert snap_to_symbols(3, 20, symbols) == (3, 20)
    assert snap_to_symbols(45, 50, symbols) == (45, 50)
    # Bounded by the excerpt shown (lines 2-22): definitions inside it still snap; lines inside a definition
    # that outgrows it keep a little context instead of the whole definition.
    assert snap_to_symbols(15, 15, symbols, within=(2, 22)) == (14, 16)
    assert snap_to_symbols(11, 11, symbols, within=(2, 22)) == (9, 13)
    assert snap_to_symbols(2, 3, symbols, within=(2, 22)) == (2, 10)
    assert snap_to_symbols(21, 22, symbols, within=(2, 22)) == (19, 22)


def test_a_citation_inside_a_huge_docstring_stays_within_the_excerpt_shown(repo, lexical_workspace) -> None:
    """[[1:274-275]] inside a class docstring once snapped to a 745-line block far past the excerpt (211-338)."""
    docstring = "".join(f"    Line {i} of a very long explanation of the widget.\n" for i in range(740))
    (repo / "app/widget.py").write_text(
        f'class Widget:\n    """\n{docstring}    """\n\n    def draw(self):\n        return 1\n')
    ws = lexical_workspace(repo)
    spans = [("app/widget.py", "python", 211, 338), ("app/widget.py", "python", 740, 746)]
    _, splicer = splice(ws, repo, ["The widget explains itself [[1:274-275]] and draws [[2:746-746]]."],
                             spans=spans)
    docs, draw = splicer.citations
    assert (docs.start_line, docs.end_line, docs.requested) == (272, 277, (274, 275))
    assert (draw.start_line, draw.end_line) == (745, 746)  # `draw` fits the excerpt: snapped to the method
    assert docs.text == lines_of(repo, "app/widget.py", 272, 277)


def test_block_rendering_uses_real_locations(ws, repo) -> None:
    _, splicer = splice(ws, repo, ["[[1]]"])
    rendered = render_block(splicer.citations[0])
    assert rendered == block(repo, "app/auth.py", "python", 6, 8)
    assert textwrap.dedent(rendered).count("```") == 2




def rendered_tokens(markdown: str) -> list:
    """The answer through a CommonMark renderer with raw HTML allowed: the most permissive surface."""
    from markdown_it import MarkdownIt

    def walk(tokens: list) -> list:
        return [t for token in tokens for t in [token, *walk(token.children or [])]]

    return walk(MarkdownIt("commonmark", {"html": True}).parse(markdown))


def test_code_html_and_links_the_model_writes_never_render(ws, repo) -> None:
    answer, splicer = splice(ws, repo, [HOSTILE])
    parts = splicer_parts(ws, repo, HOSTILE)
    assert "INVENTED" not in answer and all("INVENTED" not in p.text for p in parts if p.kind != "code")
    assert [p.text for p in parts if p.kind == "code"] == [lines_of(repo, "app/auth.py", 6, 8)]
    for phrase in ("`hash_password`", "the docs (https://example.com/docs)", "guide (GUIDE.md)", "click me",
                   "https://example.com/a", "1. First step", "   - a nested item stays", "A div's words stay"):
        assert phrase in answer, phrase
    assert "javascript" not in answer.lower() and "tracker" not in answer
    tokens = rendered_tokens(answer)
    kinds = {t.type for t in tokens}
    assert not kinds & {"code_block", "html_block", "html_inline", "link_open", "image"}, kinds
    assert [t.content for t in tokens if t.type == "fence"] == [lines_of(repo, "app/auth.py", 6, 8)]
    inline = [t.content for t in tokens if t.type == "code_inline"]
    assert inline == ["app/auth.py:6-8", "app/auth.py:6-8", "hash_password"]  # a reference, a caption, a name
    stats = splicer.stats
    assert (stats["code_blocks_removed"], stats["indented_code_removed"], stats["inline_code_removed"]) == (2, 2, 2)
    assert (stats["links_removed"], stats["images_removed"], stats["backticks_removed"]) == (2, 1, 2)
    assert stats["html_removed"] == 8  # pre, script, b, /b, the comment, img, div, /div


def splicer_parts(ws, repo, text: str) -> list:
    splicer = Splicer(SpanResolver(numbered(repo, SPANS), Sources(ws)))
    return splicer.feed(text) + splicer.finish()
