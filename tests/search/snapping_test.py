"""Snapping (codesign.search.snapping): the board table agrees with the
concrete board rule, an unsold board is moved to its nearest sold one
(the rest of the design kept), a sold one brings nothing, the roundings
carry those moves with their plans, and the concrete check rejects
unsold boards."""

import numpy as np

from codesign.search import buildability as bd
from codesign.search import design_space as ds
from codesign.search import snapping
from codesign.spec import platform_presets
from codesign.spec import workload_presets as wp

W = wp.get('criteo_kaggle')
ROME = platform_presets.ROME
SKYLAKE = platform_presets.SKYLAKE
GENOA = 'EPYC-9654 (Genoa)'
SAPPHIRE = platform_presets.SAPPHIRE


def _space():
  return ds.make_space(W, max_nodes=2)


def _row(space, acc, cpu, sockets, accels, nodes=1):
  """The index (H,) of a design: the named parts and counts, the rest at
  their first grid step."""
  grids = space.grids
  row = np.zeros(space.num_hw, dtype=np.int32)
  row[0] = space.accelerators.index(acc)
  row[1] = space.cpus.index(cpu)
  row[2] = list(grids[0]).index(nodes)
  row[3] = list(grids[1]).index(sockets)
  row[4] = list(grids[2]).index(accels)
  row[5] = len(grids[3]) - 1  # the most DDR, so that no DIMM rule bites
  return row


def test_board_table_agrees_with_the_concrete_board_rule():
  space = _space()
  rng = np.random.default_rng(0)
  index = np.stack([rng.integers(0, n, 400) for n in space.sizes], axis=1)
  ok = snapping.board_ok(space, index)
  for row, sold in zip(index, ok, strict=True):
    rules = {r for r, _ in bd.violations(ds.build(space, row))}
    sockets_ok = not rules & {'max_sockets', 'min_sockets'}
    assert sold == ('board' not in rules and sockets_ok), (row, rules)
  assert ok.any() and not ok.all()


def test_an_unsold_board_moves_to_its_nearest_sold_one():
  space = _space()
  cases = {
    # 4 MI300X on one Rome socket: the 8-OAM board, with two Genoa or
    # two Sapphire Rapids sockets (one CPU change, one socket step and
    # one accelerator step).
    'mi300x': (
      _row(space, 'MI300X-OAM', ROME, 1, 4),
      {(GENOA, 2, 8), (SAPPHIRE, 2, 8)},
    ),
    # 16 V100 on one Skylake socket: HGX-2 has two.
    'v100x16': (
      _row(space, 'V100-SXM2-32GB', SKYLAKE, 1, 16),
      {(SKYLAKE, 2, 16)},
    ),
    # 1 V100-SXM2 on one socket: every SXM2 board has 2 Xeon sockets;
    # the nearest is the 4-GPU board (one socket step, two count steps).
    'v100x1': (
      _row(space, 'V100-SXM2-32GB', SKYLAKE, 1, 1),
      {(SKYLAKE, 2, 4)},
    ),
  }
  for name, (row, want) in cases.items():
    assert not snapping.board_ok(space, row[None])[0], name
    out, source = snapping.with_boards(space, row[None])
    assert np.array_equal(out[0], row) and source[0] == 0
    moved = out[1:]
    assert len(moved) and (source[1:] == 0).all(), name
    assert snapping.board_ok(space, moved).all(), name
    got = {
      (space.cpus[r[1]], space.grids[1][r[3]], space.grids[2][r[4]])
      for r in moved
    }
    assert got == want, (name, got)
    # Only the board's axes move.
    keep = [a for a in range(space.num_hw) if a not in (1, 3, 4)]
    assert (moved[:, keep] == row[keep]).all(), name


def test_a_moved_board_also_keeps_the_accelerators_in_all():
  # 2 nodes of 4 MI300X: the 8-OAM board on 2 nodes, and on 1 node (8
  # MI300X in all, as before the move).
  space = _space()
  row = _row(space, 'MI300X-OAM', ROME, 1, 4, nodes=2)
  out, _ = snapping.with_boards(space, row[None])
  moved = out[1:]
  assert snapping.board_ok(space, moved).all()
  nodes = np.asarray(space.grids[0])[moved[:, 2]]
  per_node = np.asarray(space.grids[2])[moved[:, 4]]
  assert set(nodes) == {1.0, 2.0} and (per_node == 8).all()
  assert 8.0 in set(nodes * per_node)


def test_a_sold_board_brings_nothing_and_groups_keep_their_own_moves():
  space = _space()
  sold = _row(space, 'MI300X-OAM', GENOA, 2, 8)
  out, source = snapping.with_boards(space, sold[None])
  assert out.shape == (1, space.num_hw) and list(source) == [0]
  unsold = _row(space, 'MI300X-OAM', ROME, 1, 4)
  twice = np.stack([unsold, unsold])
  one, _ = snapping.with_boards(space, twice)
  two, src = snapping.with_boards(space, twice, group=np.array([0, 1]))
  assert len(one) == 2 + 2 and len(two) == 2 + 4
  assert sorted(src[2:].tolist()) == [0, 0, 1, 1]


def test_roundings_bring_sold_boards_and_the_check_rejects_unsold_ones():
  space = _space()
  hc = space.num_hw_coords
  z = np.full((1, space.dim), 0.5)
  z[0, :hc] = ds.grid_z(space, _row(space, 'MI300X-OAM', ROME, 1, 4))
  # Halfway between 2 and 4 accelerators: both roundings are unsold.
  z[0, len(space.accelerators) + len(space.cpus) + 2] -= 0.5 / 4
  index, plan_z = snapping.roundings(space, z)
  assert len(plan_z) == len(index)
  ok, rejected = snapping.buildable(space, index)
  assert rejected.get('board', 0) > 0
  sold = index[snapping.board_ok(space, index)]
  mi300x = sold[sold[:, 0] == space.accelerators.index('MI300X-OAM')]
  assert len(mi300x) and (np.asarray(space.grids[2])[mi300x[:, 4]] == 8).all()
  assert not (ok & ~snapping.board_ok(space, index)).any()


def test_first_rows_are_those_of_numpy_unique():
  rng = np.random.default_rng(5)
  base = np.concatenate(
    [rng.integers(0, 4, (300, 5)), rng.integers(0, 3, (300, 40)) / 2.0],
    axis=1,
  )
  base[::7, 6] = -0.0  # equal to 0.0 as a value, not as bytes
  keys = base[rng.integers(0, 300, 2000)]
  _, first = np.unique(keys, axis=0, return_index=True)
  np.testing.assert_array_equal(snapping.first_rows(keys), np.sort(first))
  assert len(snapping.first_rows(np.zeros((0, 3)))) == 0
