"""The engine's own array helpers agree with numpy's general forms they stand in for."""

import numpy as np
import pytest

from codeloupe.arrays import distinct


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
