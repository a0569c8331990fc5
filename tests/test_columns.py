"""The views a save's delta view stands on read exactly as the list and dict they stand for."""

from __future__ import annotations

import random

import pytest

from codeloupe.columns import Joined, Overlay


def test_a_joined_column_reads_as_the_list_it_stands_for() -> None:
    rng = random.Random(7)
    for _ in range(200):
        head = [f"h{i}" for i in range(rng.randrange(0, 6))]
        tail = [f"t{i}" for i in range(rng.randrange(0, 6))]
        whole = head + tail
        replaced = {r: f"r{r}" for r in range(len(whole)) if rng.random() < 0.3}
        expected = [replaced.get(r, item) for r, item in enumerate(whole)]
        joined = Joined(head, tail, replaced)
        assert len(joined) == len(expected) and list(joined) == expected
        assert [joined[r] for r in range(-len(expected), len(expected))] == expected[-len(expected):] + expected
        for s in (slice(None), slice(1, None), slice(None, -1), slice(None, None, 2), slice(3, 1, -1)):
            assert joined[s] == expected[s]
        for r in (len(expected), -len(expected) - 1):
            with pytest.raises(IndexError):
                joined[r]
    assert list(Joined(Joined([1], [2]), [3])) == [1, 2, 3]


def test_an_overlay_reads_as_the_dict_it_stands_for() -> None:
    rng = random.Random(11)
    for _ in range(200):
        base = {k: f"b{k}" for k in rng.sample(range(20), rng.randrange(0, 10))}
        put = {k: f"p{k}" for k in rng.sample(range(20), rng.randrange(0, 5))}
        gone = set(rng.sample(range(25), rng.randrange(0, 6)))
        expected = {k: v for k, v in base.items() if k not in gone or k in put} | put
        view = Overlay(base, put, gone)
        assert view == expected and dict(view) == expected and len(view) == len(expected)
        assert sorted(view) == sorted(expected) and sorted(view.items()) == sorted(expected.items())
        for k in range(26):
            assert (k in view) == (k in expected) and view.get(k) == expected.get(k)
            assert view.get(k, "none") == expected.get(k, "none")
            if k not in expected:
                with pytest.raises(KeyError):
                    view[k]
