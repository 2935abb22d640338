"""Tests of codesign.search.batching's grouping of rows by key."""

import numpy as np

from codesign.search import batching


def test_groups_hold_every_row_once_with_its_key():
  rng = np.random.default_rng(0)
  keys = rng.integers(0, 5, (200, 2)).astype(np.float64)
  first, of_group, members, real = batching.groups(keys, 8)
  assert sorted(members[real]) == list(range(200))
  # Every member (padding included) has its group's key; padding is the
  # key's first row, and the first row is the earliest of its key.
  lead = keys[first[of_group]][:, None]
  assert np.all(keys[members] == lead)
  np.testing.assert_array_equal(
    members[~real], first[of_group][np.where(~real)[0]]
  )
  for k, row in enumerate(first):
    same = np.flatnonzero(np.all(keys == keys[row], axis=1))
    assert row == same[0]
    assert np.sum(of_group == k) == -(-len(same) // 8)
  # Within a key, rows keep their order.
  kept = members[real]
  by_key = [kept[keys[kept, 0] * 5 + keys[kept, 1] == v] for v in range(25)]
  assert all(np.all(np.diff(x) > 0) for x in by_key)


def test_distinct_keys_are_groups_of_one():
  keys = np.repeat(np.arange(10.0), 30)[:, None]  # 30 rows per key
  assert batching.groups(keys, 32)[2].shape == (10, 32)
  assert batching.groups(keys, 8)[2].shape == (40, 8)
  distinct = np.arange(7.0)[:, None]
  assert batching.groups(distinct, 32)[2].shape == (7, 1)
  assert batching.groups(np.zeros((3, 1)), 32)[2].shape == (1, 32)


def test_unique_rows_is_numpys_unique_along_rows():
  rng = np.random.default_rng(1)
  ints = rng.integers(-3, 4, (500, 3)).astype(np.float64)
  fracs = rng.choice([0.0, 0.25, 0.5, 1.0], (500, 2))
  for keys in (ints, np.concatenate([ints, fracs], axis=1), ints[:, :1]):
    _, first, inverse = np.unique(
      keys, axis=0, return_index=True, return_inverse=True
    )
    got_first, got_inverse = batching.unique_rows(keys)
    np.testing.assert_array_equal(got_first, first)
    np.testing.assert_array_equal(got_inverse, inverse.reshape(-1))
  # No columns: one key shared by every row.
  first, inverse = batching.unique_rows(np.zeros((4, 0)))
  np.testing.assert_array_equal(first, [0])
  np.testing.assert_array_equal(inverse, [0, 0, 0, 0])
