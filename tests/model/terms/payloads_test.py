"""Known answers, worked by hand, for the model: pooled payloads.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

import numpy as np
import pytest

from codesign.model import cost_model
from codesign.model import terms as ct
from tests.model.fixtures import (
  ACC_KERNEL,
  DENSE_PARAMS,
  DIM,
  EAGER,
  HBM_BW,
  LINK,
  LINK_LAT,
  NIC,
  REL,
  STREAM,
  TINY_GAPS,
  B,
  allreduce_by_hand,
  arrays,
  close,
  counts,
  ids_terms,
  make_plan,
  plan_static,
  run,
  switch,
  tiny_platform,
  tiny_stack,
  tiny_workload,
)

# ---- pooled payloads -------------------------------------------------------


@pytest.mark.parametrize(
  'dense, stack_payload, comm, want',
  [
    ('fp32', 'dense', 'fp32', 4),  # dense follows the dense precision
    ('tf32', 'dense', 'fp32', 4),
    ('bf16', 'dense', 'fp32', 2),
    ('fp32', 'fp16', 'fp32', 2),  # the stack narrows
    ('fp32', 'fp32', 'bf16', 2),  # the plan narrows (quantized comms)
    ('bf16', 'fp32', 'fp32', 4),  # a wider stack payload is kept
    ('fp32', 'fp8', 'bf16', 1),  # the plan cannot widen it
  ],
)
def test_payload_precision(dense, stack_payload, comm, want):
  # The pooled all-to-all of table-wise W0 (each rank sends B x 3 x 16
  # elements / 8, 3/8 of them to its node's 3 other ranks) moves `want`
  # bytes per element; ids and the allreduce are unaffected by the stack's
  # payload (the allreduce follows the plan's comm_precision).
  w = tiny_workload(dense_precision=dense)
  s = tiny_stack(payload_precision=stack_payload)
  bd = run(tiny_platform(), w, make_plan(comm_precision=comm), s)['breakdown']
  ids_intra, _ = ids_terms(8, 4, switch, LINK_LAT, NIC)
  v_intra = B * 3 * DIM * want / 8 * 3 / 8
  close(bd['alltoall_intra'], ids_intra + 2 * (v_intra / LINK + 3 * LINK_LAT))
  cb = 4 if comm == 'fp32' else 2
  grad = DENSE_PARAMS * cb
  intra_ar, _ = allreduce_by_hand(grad, 4, 2, LINK, NIC, LINK_LAT)
  close(bd['allreduce_intra'], intra_ar)


@pytest.mark.parametrize('dense', ['bf16', 'fp32'])
def test_pooled_cast(dense):
  # A separate cast of the pooled vectors (fp32 tables) to the payload
  # precision: per table B vectors of 16 elements read at 4 B and written
  # at 2 B (bf16 payload), streamed at 80% of HBM bandwidth, forward and
  # again backward; spread over 8 ranks row-wise. fp32 payload: no cast.
  w = tiny_workload(dense_precision=dense)
  plan = make_plan(sharding='row_wise')
  off = run(tiny_platform(), w, plan)['breakdown']
  on = run(tiny_platform(), w, plan, tiny_stack(pooled_cast=True))['breakdown']
  payload = 2 if dense == 'bf16' else 4
  moved = 3 * B * 16 * (4 + payload) / 8 if payload != 4 else 0.0
  cast = moved / (STREAM * HBM_BW)
  for k in ('embedding_gather_hbm', 'embedding_update_hbm'):
    close(on[k] - off[k], cast, rel=1e-9 if cast else REL)
  # The cast's two kernels (one each way) as gaps, where bytes move.
  gaps = 2 * ACC_KERNEL if dense == 'bf16' else 0.0
  close(on['overhead'] - off['overhead'], gaps)
  # The term itself: bytes per table, None without a cast.
  p = arrays(tiny_platform())
  s = tiny_stack(pooled_cast=True)
  t = ct.table_arrays(w, plan_static(plan), (64, 64))
  got = ct.pooled_cast_bytes(s, t, ct.setup(p, w, s), payload)
  if payload == 4:
    assert got is None
  else:
    np.testing.assert_allclose(np.asarray(got), [B * 16 * 6] * 3, rtol=REL)
  # Without a setup: bytes per sample (whether any move at all).
  got = ct.pooled_cast_bytes(s, t, None, payload)
  if payload == 4:
    assert got is None
  else:
    np.testing.assert_allclose(np.asarray(got), [16 * 6] * 3, rtol=REL)
  assert ct.pooled_cast_bytes(tiny_stack(), t, ct.setup(p, w, s), 2) is None


def test_pooled_cast_to_the_same_precision_costs_nothing():
  w, plan = tiny_workload(), make_plan()  # fp32 tables, fp32 payload
  off = run(tiny_platform(), w, plan)
  on = run(tiny_platform(), w, plan, tiny_stack(pooled_cast=True))
  close(on['step'], off['step'])
  for k in cost_model.COMPONENTS:
    close(on['breakdown'][k], off['breakdown'][k])
  # A cast to the same precision launches nothing (PyTorch .half() of a
  # half tensor), in the graph or eagerly.
  assert counts(tiny_stack(pooled_cast=True)).device_kernels == TINY_GAPS
  eager = tiny_stack(pooled_cast=True, graph_scope='none')
  assert counts(eager).host_ops == EAGER
