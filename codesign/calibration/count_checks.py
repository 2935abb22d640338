"""The analytic counts of `codesign.spec.workload` checked against the real
Flax DLRM (`codesign.calibration.dlrm`) and XLA's cost analysis of its compiled
dense train step (forward, backward, Optax update): parameters, FLOPs
and bytes accessed. `codesign.studies.calibration` reports them as
`param_check` and `flops_check`.
"""

import jax
import jax.numpy as jnp
import numpy as np

from codesign.calibration import dlrm
from codesign.model import terms
from codesign.spec import workload as wl

FLOPS_NOTE = (
  'XLA counts every HLO op: besides the GEMMs and bias adds of the '
  'analytic count it adds the ReLUs and their masks, the loss, the '
  'dcnv2 Hadamard products and residual adds and the Optax update (a few '
  'FLOPs per parameter), which the analytic convention leaves out; so '
  'measured/analytic is slightly above 1.'
)
BYTES_NOTE = (
  'XLA bytes accessed sums operand and output bytes of every op after '
  'fusion: elementwise fusions (ReLU, bias, casts, loss), transposes and '
  'the optimizer pass each read and write whole activations or '
  'parameters, while the analytic count takes each GEMM input, output '
  'and weight once forward and twice backward; fused producers are not '
  'counted at all, so the ratio reflects op structure, not DRAM traffic.'
)


def _cost_analysis(compiled) -> dict:
  a = compiled.cost_analysis()
  if isinstance(a, list | tuple):
    a = a[0]
  return dict(a or {})


def analytic_dense_bytes(w: wl.Workload) -> float:
  """The cost model's dense bytes of one step: each GEMM's activations
  and weights once forward and twice backward, plus the optimizer pass
  (bytes)."""
  g = terms.gemm_table(w)
  elem = wl.PRECISION_BYTES[w.dense_precision]
  per_pass = elem * (
    w.global_batch * float(np.sum(g['per_sample_elems']))
    + float(np.sum(g['fixed_elems']))
  )
  state = wl.optimizer_state_elems_per_param(w.optimizer)
  opt = wl.dense_param_count(w) * (12.0 + 8.0 * state)
  return 3.0 * per_pass + opt


def check(workloads, seed: int = 0) -> tuple[list[dict], list[dict]]:
  """Each workload's parameter count, and XLA's FLOPs and bytes accessed
  of its compiled dense step, against the analytic counts.

  Nothing is allocated or run: the parameters are `jax.eval_shape`d and
  the step only compiled, so preset-sized tables cost no memory.

  Returns:
    (param_check, flops_check): one record per workload. param_check:
    name, analytic and measured parameter counts, rel_error. flops_check:
    name, batch (samples), analytic and measured FLOPs per step,
    rel_error, analytic_bytes and measured_bytes_accessed (bytes per
    step) and bytes_ratio (see `BYTES_NOTE`).
  """
  params_out, flops_out = [], []
  key = jax.random.PRNGKey(seed)
  for w in workloads:
    shapes = jax.eval_shape(lambda k, w=w: dlrm.init(w, k), key)
    measured = dlrm.count_params(shapes)
    analytic = wl.param_count(w)
    params_out.append(
      {
        'name': w.name,
        'analytic': analytic,
        'measured': measured,
        'rel_error': measured / analytic - 1.0,
      }
    )
    b = w.global_batch
    dense_shapes, table_shapes = dlrm.split_params(w, shapes)
    opt = dlrm.dense_optimizer(w.optimizer, 0.01)
    opt_shapes = jax.eval_shape(opt.init, dense_shapes)
    pooled = tuple(
      jax.ShapeDtypeStruct((b, t.dim), jnp.float32) for t in w.tables
    )
    args = (
      dense_shapes,
      table_shapes,
      opt_shapes,
      jax.ShapeDtypeStruct((b, w.num_dense), jnp.float32),
      pooled,
      jax.ShapeDtypeStruct((b,), jnp.float32),
    )
    step = jax.jit(dlrm.make_dense_step(w, 0.01))
    ca = _cost_analysis(step.lower(*args).compile())
    analytic_flops = wl.dense_flops_per_sample(w) * b
    analytic_bytes = analytic_dense_bytes(w)
    flops_out.append(
      {
        'name': w.name,
        'batch': b,
        'analytic': analytic_flops,
        'measured': float(ca.get('flops', float('nan'))),
        'rel_error': float(ca.get('flops', float('nan'))) / analytic_flops
        - 1.0,
        'analytic_bytes': analytic_bytes,
        'measured_bytes_accessed': float(ca.get('bytes accessed', 0.0)),
        'bytes_ratio': float(ca.get('bytes accessed', 0.0)) / analytic_bytes,
      }
    )
  return params_out, flops_out
