"""The `re` a chunk strategy imports (`codeloupe.chunk.strategy_re`): RE2 underneath, Python's answers on the
patterns chunkers write."""

from __future__ import annotations

import re

import pytest

from codeloupe.chunk import strategy_re

CASES = [
    (r"rule (\w+) \{$", "rule alpha {\n", 0), (r"^---$", "---\n", 0), (r"^---$", "---", 0),
    (r"^\s*$", "   \n", 0), (r"^(\w+)\s*=\s*(.*)$", "kéy = välue\n", 0), (r"\d+", "a12b\u0663 4", 0),
    (r"^\[(?P<name>[^\]]+)\]", "[section one]\n", 0), (r"^\S", "x\n", 0), (r"[\s,]+", "a, b\u2003c", 0),
    (r"(?i)^rule", "RULE x", 0), (r"^rule", "x\nrule a\nrule b\n", re.M), (r"\}$", "a {\n}\n", re.M),
    (r"\}\Z", "a {\n}", 0), (r"[^\w]", "é-", 0), (r"\bfoo\b", "a foo b", 0), (r"(a)|(b)", "b", 0),
    (r"\x41\u00e9\N{BULLET}", "Aé•", 0), (r"[]a]+", "]a", 0), (r"(?s:.)+", "a\nb", 0), (r".+", "a\nb", re.S),
    (r"\.\*\-\#", ".*-#", 0), (r"é+", "xééy", 0), (r"\s+", "a\x0bb\x1cc", 0),
]


@pytest.mark.parametrize(("pattern", "text", "flags"), CASES)
def test_a_strategy_pattern_answers_as_python_does(pattern: str, text: str, flags: int) -> None:
    def spans(matches):
        return [(m.span(), m.groups(), m.groupdict()) for m in matches]

    for name in ("search", "match", "fullmatch"):
        want, got = getattr(re, name)(pattern, text, flags), getattr(strategy_re, name)(pattern, text, flags)
        assert spans([want] if want else []) == spans([got] if got else []), name
    assert spans(re.finditer(pattern, text, flags)) == spans(strategy_re.finditer(pattern, text, flags))
    assert re.findall(pattern, text, flags) == strategy_re.findall(pattern, text, flags)
    assert re.split(pattern, text, flags=flags) == strategy_re.split(pattern, text, flags=flags)
    assert re.sub(pattern, r"<\g<0>>", text, flags=flags) == strategy_re.sub(pattern, r"<\g<0>>", text, flags=flags)


def test_matching_from_many_positions_of_a_text_reads_from_each_position() -> None:
    text = "héllo wörld " * 3
    pattern = strategy_re.compile(r"\w+")
    assert [pattern.match(text, pos).span() for pos in (0, 6, 12)] == [(0, 5), (6, 11), (12, 17)]
    assert pattern.search(text, 1, 4).group() == "éll"


@pytest.mark.parametrize(("pattern", "why"), [
    (r"(a)\1", "backreferences"), (r"(?P<x>a)(?P=x)", "backreferences"), (r"a(?=b)", "lookahead"),
    (r"(?<!a)b", "lookbehind"), (r"(?>a)", "atomic groups"), (r"a++", "bad repetition operator"),
    (r"(?x) a", "VERBOSE"), (r"(?(1)a|b)", "conditional groups"), (r"[\W]", "inside a character set"),
])
def test_a_pattern_re2_cannot_run_is_refused_with_the_reason(pattern: str, why: str) -> None:
    with pytest.raises(strategy_re.error, match="RE2 \\(linear time\\) cannot run") as raised:
        strategy_re.compile(pattern)
    assert why in str(raised.value)
