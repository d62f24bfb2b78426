"""causalpos.tril: the one packed order of lower triangles that the extraction, its tables and the analysis share."""

import numpy as np
import pytest

from causalpos.tril import packed_index, packed_pairs, packed_size, seq_len_of_packed

SIZES = [0, 1, 2, 3, 7, 130]  # 130: more than the recorder's block of 128 query rows


@pytest.mark.parametrize("seq_len", SIZES)
def test_pairs_are_the_lower_triangle_row_by_row(seq_len):
    query, key = packed_pairs(seq_len)
    assert len(query) == len(key) == packed_size(seq_len)
    assert query.dtype == key.dtype == np.int64
    # exactly the pairs key <= query, the diagonal included, each once
    lower = np.tril(np.ones((seq_len, seq_len), dtype=bool))
    seen = np.zeros((seq_len, seq_len), dtype=int)
    np.add.at(seen, (query, key), 1)
    np.testing.assert_array_equal(seen, lower.astype(int))
    # row-major: by query, then by key within a row
    order = np.lexsort((key, query))
    np.testing.assert_array_equal(order, np.arange(len(query)))
    for expected in (np.tril_indices(seq_len), np.nonzero(lower)):
        np.testing.assert_array_equal(query, expected[0])
        np.testing.assert_array_equal(key, expected[1])


@pytest.mark.parametrize("seq_len", SIZES)
def test_packed_index_inverts_the_pairs(seq_len):
    query, key = packed_pairs(seq_len)
    np.testing.assert_array_equal(packed_index(query, key), np.arange(packed_size(seq_len)))
    for q in range(seq_len):  # row q starts where the rows before it end
        assert packed_index(q, 0) == packed_size(q)
    assert seq_len_of_packed(packed_size(seq_len)) == seq_len


def test_cached_pairs_cannot_be_changed():
    query, _ = packed_pairs(4)
    with pytest.raises(ValueError, match="read-only"):
        query[0] = 3


@pytest.mark.parametrize("length", [2, 4, 5, 7, 8, 9, 11, 1000, -1])
def test_a_length_that_is_no_triangle_is_refused(length):
    with pytest.raises(ValueError, match=f"{length} is not the size of a lower triangle"):
        seq_len_of_packed(length)
