"""The engine's own array helpers agree with numpy's general forms they stand in for."""

from itertools import count

import numpy as np
import pytest

from codeloupe.arrays import absent_from, distinct, find_sorted, made_consecutive


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.float64])
def test_distinct_is_numpy_unique(dtype: type) -> None:
    rng = np.random.default_rng(7)
    values = rng.integers(0, 200, 5_000).astype(dtype)
    got = distinct(values)
    assert got.dtype == np.unique(values).dtype
    assert np.array_equal(got, np.unique(values))


def test_distinct_of_edge_cases() -> None:
    assert distinct(np.zeros(0, np.int64)).tolist() == []
    assert distinct(np.array([5], np.int64)).tolist() == [5]
    assert distinct(np.array([3, 3, 3], np.int64)).tolist() == [3]
    assert distinct(np.array([[4, 1], [1, 9]], np.int64)).tolist() == [1, 4, 9]  # flattened, as np.unique does
    big = np.array([2**62, -(2**62), 2**62, 0], np.int64)  # 64-bit keys: node pairs times kinds
    assert distinct(big).tolist() == [-(2**62), 0, 2**62]


def test_absent_from_is_numpy_setdiff1d_for_ids() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        values = np.sort(rng.choice(3_000, rng.integers(0, 400), replace=False)).astype(np.int64)
        others = rng.integers(0, 4_000, rng.integers(0, 400)).astype(np.int64)  # repeats, beyond values' range
        assert np.array_equal(absent_from(values, others), np.setdiff1d(values, others))
    empty = np.zeros(0, np.int64)
    assert absent_from(empty, np.array([1], np.int64)).tolist() == []
    assert absent_from(np.array([0, 5], np.int64), empty).tolist() == [0, 5]


def test_find_sorted_is_membership_with_positions() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        ascending = distinct(rng.integers(-2**40, 2**40, rng.integers(0, 300)))  # sparse 64-bit keys
        values = np.concatenate([rng.choice(ascending, min(len(ascending), 50)) if len(ascending) else
                                 np.zeros(0, np.int64), rng.integers(-2**40, 2**40, 50)])
        positions, found = find_sorted(ascending, values)
        assert found.tolist() == np.isin(values, ascending).tolist()
        assert np.array_equal(ascending[positions[found]], values[found])
    positions, found = find_sorted(np.zeros(0, np.int64), np.array([1, 2], np.int64))
    assert found.tolist() == [False, False] and len(positions) == 2


def test_provisional_numbers_are_made_consecutive_in_the_keys_order() -> None:
    numbered: dict[str, int] = {}
    numbers = count()
    given = [numbered.setdefault(key, n) for key, n in zip(["b", "a", "b", "c", "a", "d"], numbers)]
    assert given == [0, 1, 0, 3, 1, 5]  # a repeat keeps its number, and the counter moves on
    lookup, consecutive = made_consecutive(numbered, next(numbers))
    assert consecutive == {"b": 0, "a": 1, "c": 2, "d": 3}
    assert lookup[given].tolist() == [0, 1, 0, 2, 1, 3]
    assert made_consecutive({"x": 0, "y": 1}, 2) is None
