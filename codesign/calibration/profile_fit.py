"""Fitting a device profile to microbenchmark records, through the model.

`fit` takes the records of `codesign.calibration.microbenchmarks.measure` (each
with its measured `seconds`) and returns a profile
(`codesign.calibration.device_profile` keys and units). The memory bandwidth is
measured directly (the streaming rate) and the sustained GEMM peaks start from
the fastest GEMMs (`measured_peaks`); the peaks and the efficiency fields are
then fitted by gradient descent with Optax THROUGH the cost model: each
benchmark is predicted (`predict`) by `terms.dense_times` or
`cost_model.evaluate` of its one-layer or one-table workload on a
one-device platform (`device_profile.local_platform`), and the loss is
the mean squared log error, averaged per benchmark kind.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from codesign.calibration import device_profile
from codesign.calibration import microbenchmarks as mb
from codesign.core.pytree import replace
from codesign.model import cost_model, terms
from codesign.spec import hardware
from codesign.spec import stack as stack_lib

# The device and stack fields `fit` sets (besides the peaks).
FIT_PATHS = (
  'gemm_efficiency',
  'gemm_half_size',
  'gather_efficiency',
  'update_efficiency',
  'kernel_overhead',
  'step_overhead',
)


def measured_peaks(records: list[dict]) -> dict:
  """The sustained GEMM peaks per precision (from the fastest GEMMs) and
  the streaming bandwidth, in profile keys: TFLOP/s and GB/s."""
  peaks = {}
  for prec in ('fp32', 'bf16'):
    rates = [
      2.0 * r['m'] * r['k'] * r['n'] / r['seconds']
      for r in records
      if r['kind'] == 'gemm' and r['precision'] == prec
    ]
    # The median of the three fastest: one glitched timing does not set
    # the peak.
    peaks[prec] = float(np.median(sorted(rates)[-3:])) if rates else None
  if peaks['bf16'] is None:
    peaks['bf16'] = peaks['fp32']
  streams = [
    r['bytes'] / r['seconds'] for r in records if r['kind'] == 'stream'
  ]
  return {
    'peak_flops_fp32_tflops': peaks['fp32'] / 1e12,
    'peak_flops_bf16_tflops': peaks['bf16'] / 1e12,
    'memory_bandwidth_gb_per_s': max(streams) / 1e9,
  }


def bench_plan(platform: hardware.Platform, rec: dict):
  """The plan of an interaction, gather or scatter record (built from
  concrete values, outside any trace); None for other kinds."""
  if rec['kind'] == 'interaction':
    w = mb.interaction_workload(rec['batch'], rec['features'], rec['dim'])
    return device_profile.local_plan(w, platform)
  if rec['kind'] not in ('gather', 'scatter'):
    return None
  w = mb.table_workload(rec['rows'], rec['dim'], rec['pooling'], rec['batch'])
  return device_profile.local_plan(w, platform)


def predict(
  platform: hardware.Platform, stack: stack_lib.Stack, rec: dict, plan=None
):
  """The cost model's seconds for one microbenchmark record (traceable in
  the platform and the stack; `plan` from `bench_plan` for gathers and
  scatters)."""
  p, s = platform, stack
  dev = p.cpu if p.trainer == 'cpu' else p.accelerator
  kind = rec['kind']
  # Every benchmark is one jitted call: the call's fixed cost is the
  # stack's per-step floor.
  if kind in ('gemm', 'layer', 'chain'):
    if kind == 'gemm':
      w = mb.gemm_workload(rec['m'], rec['k'], rec['n'], rec['precision'])
    elif kind == 'layer':
      w = mb.layer_workload(rec['m'], rec['k'], rec['n'], rec['precision'])
    else:
      w = mb.chain_workload(rec['layers'])
    fwd, bwd = terms.dense_times(p, w, s, terms.setup(p, w, s))
    if kind == 'gemm':
      return fwd[0] + s.step_floor
    if kind == 'layer':
      # A top-MLP layer (it has an input gradient): forward plus backward.
      return fwd[1] + bwd[1] + s.step_floor
    return jnp.sum(fwd[: rec['layers']]) + s.step_floor
  if kind == 'interaction':
    w = mb.interaction_workload(rec['batch'], rec['features'], rec['dim'])
    r = cost_model.evaluate(p, w, plan, s)
    return r.breakdown['dense_interaction'] + s.step_floor
  if kind in ('gather', 'scatter'):
    w = mb.table_workload(rec['rows'], rec['dim'], rec['pooling'], rec['batch'])
    r = cost_model.evaluate(p, w, plan, s)
    tier = 'ddr' if p.trainer == 'cpu' else 'hbm'
    name = 'gather' if kind == 'gather' else 'update'
    t = r.breakdown[f'embedding_{name}_{tier}']
    return t + dev.kernel_overhead + s.step_floor
  raise ValueError(f'no prediction for kind {kind!r}')


FIT_KINDS = ('gemm', 'layer', 'interaction', 'gather', 'scatter', 'chain')


def _with_fit(p: hardware.Platform, s: stack_lib.Stack, values: dict):
  """(platform, stack) with fitted values: device fields into the part
  that trains, the call overhead into the stack's floor."""
  part = 'cpu' if p.trainer == 'cpu' else 'accelerator'
  dev = replace(
    getattr(p, part),
    **{k: v for k, v in values.items() if k != 'step_overhead'},
  )
  return replace(p, **{part: dev}), replace(
    s, step_floor=values['step_overhead']
  )


def fit(
  records: list[dict],
  target: str | None = None,
  steps: int = 1500,
  learning_rate: float = 0.05,
) -> tuple[dict, dict]:
  """Fits the device's fields to the microbenchmarks.

  The memory bandwidth is measured (the streaming rate). A device's
  nominal peak is not known here, and only the product peak x
  gemm_efficiency enters the model, so the fit takes gemm_efficiency = 1
  and fits the sustained peaks (fp32 and, when there are 16-bit GEMM
  records, bf16) together with gemm_half_size, gather_efficiency (from the
  gathers), update_efficiency (from the scatters: row read-modify-write),
  kernel_overhead and step_overhead. Parameters move in log space (the
  efficiencies through a sigmoid, in (0, 1)) with Adam, from the
  fastest measured GEMM rates and generic starting values. The loss is,
  per kind of benchmark, the mean of (log predicted - log measured)^2,
  averaged over kinds.

  Returns:
    (profile dict in `codesign.calibration.device_profile` keys and units, fit
    report with per-kind errors, the loss and every record's predicted seconds).
  """
  target = target or ('cpu' if jax.default_backend() == 'cpu' else 'accel')
  target = 'cpu' if target == 'cpu' else 'accelerator'
  peaks = measured_peaks(records)
  fitted = [r for r in records if r['kind'] in FIT_KINDS]
  kinds = sorted({r['kind'] for r in fitted})
  kind_id = np.array([kinds.index(r['kind']) for r in fitted])
  loss_fn, preds = _loss(_seed_profile(target, peaks), fitted, kinds, kind_id)
  theta, losses, pred = _adam(
    loss_fn, preds, _theta0(peaks), learning_rate, steps
  )
  values = {k: float(v) for k, v in _unpack(theta, target).items()}
  pred = np.asarray(pred, np.float64)
  report = {
    'loss_initial': float(losses[0]),
    'loss_final': float(losses[-1]),
    'steps': steps,
    'per_kind': _per_kind(fitted, kinds, kind_id, pred),
    'predictions': [
      {**r, 'predicted': float(q)} for r, q in zip(fitted, pred, strict=True)
    ],
  }
  return _profile(target, peaks, values), report


def _seed_profile(target: str, peaks: dict) -> dict:
  """The profile the fit starts from: the measured peaks, generic
  efficiencies and overheads, gemm_efficiency 1."""
  return {
    'target': target,
    **peaks,
    'gemm_efficiency': 1.0,
    'gemm_half_size': 16.0,
    'gather_efficiency': 0.5,
    'update_efficiency': 0.5,
    'kernel_overhead_us': 10.0,
    'step_overhead_us': 50.0,
  }


def _unpack(theta, target: str) -> dict:
  """The fitted fields (SI) of parameter vector `theta` (log space; the
  efficiencies through a sigmoid); an accelerator's TF32 peak is its
  fp32 peak."""
  out = {
    'peak_flops_fp32': jnp.exp(theta[0]),
    'peak_flops_bf16': jnp.exp(theta[1]),
    'gemm_half_size': jnp.exp(theta[2]),
    'gather_efficiency': jax.nn.sigmoid(theta[3]),
    'kernel_overhead': jnp.exp(theta[4]),
    'step_overhead': jnp.exp(theta[5]),
    'update_efficiency': jax.nn.sigmoid(theta[6]),
  }
  if target == 'accelerator':
    out['peak_flops_tf32'] = out['peak_flops_fp32']
  return out


def _logit(x: float) -> float:
  """The inverse of the sigmoid."""
  return float(np.log(x / (1.0 - x)))


def _theta0(peaks: dict):
  """The starting parameter vector: the measured peaks and the seed
  profile's numbers, in `_unpack`'s order and spaces (float32)."""
  return jnp.array(
    [
      np.log(peaks['peak_flops_fp32_tflops'] * 1e12),
      np.log(peaks['peak_flops_bf16_tflops'] * 1e12),
      np.log(16.0),
      _logit(0.5),
      np.log(10e-6),
      np.log(50e-6),
      _logit(0.5),
    ],
    jnp.float32,
  )


def _loss(seed_profile: dict, fitted: list[dict], kinds, kind_id):
  """(loss_fn, preds) of parameter vectors: the predicted seconds of the
  `fitted` records (kind `kinds[kind_id[i]]`), and per kind of benchmark
  the mean squared log error, averaged over kinds."""
  target = seed_profile['target']
  base = hardware.as_arrays(
    device_profile.local_platform(seed_profile), jnp.float32
  )
  base_stack = device_profile.local_stack(seed_profile)
  log_meas = jnp.log(jnp.array([r['seconds'] for r in fitted], jnp.float32))
  weight = np.array(
    [1.0 / np.sum(kind_id == i) / len(kinds) for i in kind_id], np.float32
  )
  plans = [bench_plan(base, r) for r in fitted]

  def preds(theta):
    p, s = _with_fit(base, base_stack, _unpack(theta, target))
    return jnp.stack(
      [predict(p, s, r, pl) for r, pl in zip(fitted, plans, strict=True)]
    )

  def loss_fn(theta):
    err = jnp.log(preds(theta)) - log_meas
    return jnp.sum(weight * err * err)

  return loss_fn, preds


def _adam(loss_fn, preds, theta0, learning_rate: float, steps: int):
  """(theta, losses, predictions) after `steps` Adam steps on `loss_fn`
  from `theta0`, in one jitted scan."""
  tx = optax.adam(learning_rate)

  @jax.jit
  def run(theta):
    def body(carry, _):
      theta, st = carry
      loss, g = jax.value_and_grad(loss_fn)(theta)
      upd, st = tx.update(g, st, theta)
      return (optax.apply_updates(theta, upd), st), loss

    (theta, _), losses = jax.lax.scan(
      body, (theta, tx.init(theta)), None, length=steps
    )
    return theta, losses, preds(theta)

  return run(theta0)


def _per_kind(fitted, kinds, kind_id, pred) -> dict:
  """Per kind of benchmark: count, median and maximum |relative error| of
  the predictions `pred`."""
  rel = pred / np.array([r['seconds'] for r in fitted]) - 1.0
  return {
    k: {
      'count': int(np.sum(kind_id == i)),
      'median_abs_rel_error': float(np.median(np.abs(rel[kind_id == i]))),
      'max_abs_rel_error': float(np.max(np.abs(rel[kind_id == i]))),
    }
    for i, k in enumerate(kinds)
  }


def _profile(target: str, peaks: dict, values: dict) -> dict:
  """The fitted profile in `codesign.calibration.device_profile` keys and
  units."""
  return {
    'target': target,
    **peaks,
    'peak_flops_fp32_tflops': values['peak_flops_fp32'] / 1e12,
    'peak_flops_bf16_tflops': values['peak_flops_bf16'] / 1e12,
    'gemm_efficiency': 1.0,
    'gemm_half_size': values['gemm_half_size'],
    'gather_efficiency': values['gather_efficiency'],
    'update_efficiency': values['update_efficiency'],
    'kernel_overhead_us': values['kernel_overhead'] * 1e6,
    'step_overhead_us': values['step_overhead'] * 1e6,
  }
