"""Values and gradients of the cost model: finite everywhere inside the
bounds (float64 and float32), and `jax.grad` equal to finite differences.

Outputs checked: log step time, feasibility margin, log capex, log power.
Inputs: every platform leaf, every continuous leaf of the software stack
(`stack.BOUNDS`) and the plan's continuous leaves (hbm_fraction,
cpu_lookup_fraction, overlap). Per configuration one jit-compiled, vmapped
value-and-Jacobian over 1,000 designs.

The configurations run every stack preset, and between them every static
choice family of the stack: graph_scope none (torchrec, ipex_cpu),
forward_backward (nvidia_pytorch), step (hugectr, jax_xla); update_path
fused, sparse_grad, scatter; mlp_fusion none, elementwise, epilogue; UVM
caching (torchrec); the bottom MLP on one device (nvidia_pytorch).

float32 runs in a subprocess with x64 off (the way `--x64=false` runs),
because the test session enables x64 for everything else.
"""

import functools
import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.designs import (
  PATHS,
  STACK_PATHS,
  configure,
  design,
  evaluator,
  stack_design,
  stack_leaves,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
N = 1000  # designs per batch
CORNERS = 100  # of them with every value at a bound

# name -> (workload, platform preset, topology override, sharding, stack)
CONFIGS = {
  'kaggle_cube_mesh_mixed': (  # bottom MLP alone on GPU 0 of 8
    'criteo_kaggle',
    'big_basin',
    None,
    'mixed',
    'nvidia_pytorch',
  ),
  'zion_scale_fully_connected': (  # UVM caching, eager, bf16 autocast
    'zion_scale',
    'zion',
    None,
    'auto',
    'torchrec',
  ),
  'dcnv2_ring': (
    'mlperf_dlrm_dcnv2',
    'dgx_a100_80gb',
    'ring',
    'auto',
    'hugectr',
  ),
  'benchmark_pcie_only_2tier': (  # 16 nodes: table-row-wise across them
    'dlrm_benchmark',
    'zionex',
    'pcie_only',
    'table_row_wise',
    'jax_xla',
  ),
  'kaggle_cpu_trainer': ('criteo_kaggle', 'cpu_2s', None, 'auto', 'ipex_cpu'),
}
# float32 runs these, in two subprocesses of two compiles each (so that
# pytest-xdist can run them side by side): the largest numbers
# (zion_scale), every sharding, DCN-v2, and the CPU trainer.
F32_GROUPS = (
  ('kaggle_cube_mesh_mixed', 'kaggle_cpu_trainer'),
  ('zion_scale_fully_connected', 'dcnv2_ring'),
)
OUTPUTS = ('log_step_time', 'feasibility_margin', 'log_capex', 'log_power')


@functools.cache
def setup(name):
  """(preset leaves, stack leaves, plan template, jitted vmapped
  value-and-Jacobian)."""
  w, p, s, template = configure(*CONFIGS[name])
  report = evaluator(w, p, s, template)

  def outputs(*args):
    r = report(*args)
    return jnp.stack(
      [
        jnp.log(r.step_time),
        r.feasibility_margin,
        jnp.log(r.capex),
        jnp.log(r.power),
      ]
    )

  def value_and_jacobian(*args):
    out, vjp = jax.vjp(outputs, *args)
    return out, jax.vmap(vjp)(jnp.eye(len(OUTPUTS), dtype=out.dtype))

  leaves = np.array([float(v) for v in jax.tree.leaves(p)])
  return (
    leaves,
    stack_leaves(s),
    template,
    jax.jit(jax.vmap(value_and_jacobian)),
  )


def random_points(name, seed):
  """N designs inside the bounds; the first CORNERS at random corners."""
  template = setup(name)[2]
  t = len(template.sharding)
  rng = np.random.default_rng(seed)
  u = rng.uniform(size=(N, len(PATHS)))
  u[:CORNERS] = rng.integers(0, 2, size=(CORNERS, len(PATHS)))
  su = rng.uniform(size=(N, len(STACK_PATHS)))
  su[:CORNERS] = rng.integers(0, 2, size=(CORNERS, len(STACK_PATHS)))
  plan_u = rng.uniform(size=(N, t + 2))
  plan_u[:CORNERS] = rng.integers(0, 2, size=(CORNERS, t + 2))
  return (
    design(u),
    stack_design(su),
    plan_u[:, :t],
    plan_u[:, t],
    plan_u[:, t + 1],
  )


def evaluate_batch(name, leaves, sleaves, frac, c, o, dtype):
  fn = setup(name)[3]
  cast = lambda x: jnp.asarray(x, dtype=dtype)  # noqa: E731
  values, jacobians = fn(
    cast(leaves), cast(sleaves), cast(frac), cast(c), cast(o)
  )
  return tuple(np.asarray(x, dtype=np.float64) for x in (values, *jacobians))


def nonfinite_counts(name, dtype, seed=0):
  """How many of the N designs give a non-finite value or gradient."""
  out = evaluate_batch(name, *random_points(name, seed), dtype)
  values, grads = out[0], out[1:]
  bad_grad = np.zeros(N, dtype=bool)
  for g in grads:
    bad_grad |= ~np.all(np.isfinite(g.reshape(N, -1)), axis=1)
  return {
    'points': N,
    'nonfinite_values': int(np.sum(~np.all(np.isfinite(values), axis=1))),
    'nonfinite_grads': int(np.sum(bad_grad)),
  }


@pytest.mark.heavy
@pytest.mark.parametrize('group', F32_GROUPS, ids=lambda g: '+'.join(g))
def test_finite_values_and_gradients_float32(group):
  # Lower LLVM optimization: a third less compile time; these checks are
  # about finiteness, not speed.
  flags = os.environ.get('XLA_FLAGS', '') + (
    ' --xla_backend_optimization_level=0'
    ' --xla_llvm_disable_expensive_passes=true'
  )
  env = dict(
    os.environ, JAX_ENABLE_X64='0', PYTHONPATH=str(ROOT), XLA_FLAGS=flags
  )
  proc = subprocess.run(
    [sys.executable, __file__, *group],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  counts = json.loads(proc.stdout.strip().splitlines()[-1])
  assert counts.pop('dtype') == 'float32'
  assert set(counts) == set(group)
  for name, c in counts.items():
    assert c['points'] == N
    assert c['nonfinite_values'] == 0, (name, c)
    # Strict: designs with one rank per node (no intra-node volume) and
    # tables with no rows in HBM (no load) put both arguments of a smooth
    # max at its floor, which must still give finite gradients.
    assert c['nonfinite_grads'] == 0, (name, c)


@pytest.mark.parametrize('x', [0.0, 1e-30, 1e-25, 1e-19, 1.0, 1e30])
def test_smooth_max_of_two_small_or_large_numbers_float32(x):
  # The two-argument smooth max scales both arguments by the
  # gradient-stopped reciprocal of the larger: where both sit at or below
  # the TINY = 1e-30 floor (a quotient rule there has lo / hi^2 = 1e30,
  # beyond float32) and where they are huge, value and gradient stay
  # finite. Ties: 2^(1/8) x, gradient 2^(1/8) (each argument half).
  from codesign.core.smooth import smooth_max

  x32 = jnp.float32(x)
  value, grad = jax.value_and_grad(lambda a: smooth_max(a, a))(x32)
  assert np.isfinite(float(value)) and np.isfinite(float(grad)), (value, grad)
  if x >= 1e-19:  # normal float32 numbers: the exact tie
    assert float(value) == pytest.approx(2 ** (1 / 8) * x, rel=1e-6)
    assert float(grad) == pytest.approx(2 ** (1 / 8), rel=1e-6)
  # Unequal arguments: each gradient finite, and both tiny in the same way.
  for a, b in ((x, 2 * x), (x, 0.0), (0.0, x)):
    ga, gb = jax.grad(lambda u, v: smooth_max(u, v), argnums=(0, 1))(
      jnp.float32(a), jnp.float32(b)
    )
    assert np.isfinite(float(ga)) and np.isfinite(float(gb)), (a, b, ga, gb)
  # The n-ary path likewise.
  g = jax.grad(lambda a: smooth_max(a, a, a))(x32)
  assert np.isfinite(float(g)), g


# ---- jax.grad against central finite differences (float64) ---------------
H_LOG = 1e-5  # relative step of platform and stack leaves: x exp(+-h)
H_ABS = 1e-5  # absolute step of plan leaves
RTOL, ATOL = 1e-4, 1e-9
# Counts (nodes, sockets, accelerators) are integers at a preset; the
# packing bounds of `terms.busiest_rank` read the tables at jR
# through a quadratic B-spline, smooth there (see
# cost_model_test.test_busiest_rank_is_smooth_in_the_rank_count), so the
# preset point checks central differences for them too.


def _check_points(name, rng):
  """The preset and 3 random interior points: (leaves, stack leaves, frac,
  c, o, which plan leaves to check)."""
  leaves, sleaves, template, _ = setup(name)
  t = len(template.sharding)
  points = [
    (
      leaves,
      sleaves,
      np.asarray(template.hbm_fraction, dtype=np.float64),
      float(template.cpu_lookup_fraction),
      float(template.overlap),
      False,  # preset fractions sit on the bounds, often tied (a kink)
    )
  ]
  for _ in range(3):
    u = rng.uniform(0.1, 0.9, size=len(PATHS))
    su = rng.uniform(0.1, 0.9, size=len(STACK_PATHS))
    pu = rng.uniform(0.1, 0.9, size=t + 2)
    points.append((design(u), stack_design(su), pu[:t], pu[t], pu[t + 1], True))
  return points


def finite_difference_mismatches(name):
  """Compares the Jacobian with finite differences at the preset and 3
  random interior points; returns the entries that disagree."""
  rng = np.random.default_rng(1)
  t = len(setup(name)[2].sharding)
  rows = []  # (leaves, stack leaves, frac, c, o)
  checks = []  # (kind, index, base row, scheme, rows of the difference)
  for leaves, sleaves, frac, c, o, fracs_too in _check_points(name, rng):
    base = len(rows)
    rows.append((leaves, sleaves, frac, c, o))
    # Platform and stack leaves: relative (log) steps.
    for kind, values in (('leaf', leaves), ('stack', sleaves)):
      for i in range(len(values)):
        up, down = values.copy(), values.copy()
        up[i] *= np.exp(H_LOG)
        down[i] *= np.exp(-H_LOG)
        if kind == 'leaf':
          rows += [(up, sleaves, frac, c, o), (down, sleaves, frac, c, o)]
        else:
          rows += [(leaves, up, frac, c, o), (leaves, down, frac, c, o)]
        checks.append((kind, i, base, 'central', len(rows) - 2))
    plan_leaves = [('c', 0, c), ('o', 0, o)]
    if fracs_too:
      plan_leaves += [('frac', j, frac[j]) for j in range(t)]
    for kind, j, value in plan_leaves:
      # Central differences inside (0, 1); on the upper bound (the preset
      # plan's cpu_lookup_fraction of 1) the second-order backward one.
      backward = value + 2 * H_ABS > 1.0
      for k in (-1.0, -2.0) if backward else (1.0, -1.0):
        f2, c2, o2 = frac.copy(), c, o
        if kind == 'c':
          c2 = c + k * H_ABS
        elif kind == 'o':
          o2 = o + k * H_ABS
        else:
          f2[j] += k * H_ABS
        rows.append((leaves, sleaves, f2, c2, o2))
      scheme = 'backward' if backward else 'central'
      checks.append((kind, j, base, scheme, len(rows) - 2))
  assert len(rows) <= N, len(rows)
  rows += [rows[0]] * (N - len(rows))
  cols = [np.stack([r[k] for r in rows]) for k in range(5)]
  values, j_leaves, j_stack, j_frac, j_c, j_o = evaluate_batch(
    name, *cols, jnp.float64
  )
  bad = []
  for kind, i, base, scheme, r in checks:
    f0, f1, f2 = values[base], values[r], values[r + 1]
    if kind in ('leaf', 'stack'):
      # Elasticities: d output / d log x.
      col, jac = (0, j_leaves) if kind == 'leaf' else (1, j_stack)
      analytic = cols[col][base, i] * jac[base, :, i]
      fd = (f1 - f2) / (2 * H_LOG)
    else:
      jac = {'c': j_c, 'o': j_o}
      analytic = jac[kind][base] if kind in jac else j_frac[base, :, i]
      if scheme == 'central':
        fd = (f1 - f2) / (2 * H_ABS)
      else:  # f1 = f(x - h), f2 = f(x - 2h)
        fd = (3 * f0 - 4 * f1 + f2) / (2 * H_ABS)
    err = np.abs(analytic - fd)
    tol = RTOL * np.maximum(np.abs(analytic), np.abs(fd)) + ATOL
    for k in np.nonzero(err > tol)[0]:
      if kind == 'leaf':
        where = PATHS[i]
      elif kind == 'stack':
        where = 'stack.' + STACK_PATHS[i]
      else:
        where = f'{kind}[{i}]'
      bad.append((OUTPUTS[k], where, base, float(analytic[k]), float(fd[k])))
  return bad


# One test per configuration, so that both checks share one compile (under
# pytest-xdist, separate tests may land in separate processes).
@pytest.mark.heavy
@pytest.mark.parametrize('name', list(CONFIGS))
def test_float64_finite_and_equal_to_finite_differences(name):
  counts = nonfinite_counts(name, jnp.float64)
  assert counts['nonfinite_values'] == 0, counts
  assert counts['nonfinite_grads'] == 0, counts
  bad = finite_difference_mismatches(name)
  assert not bad, bad[:10]


if __name__ == '__main__':
  # The float32 worker: x64 is off in this process (JAX_ENABLE_X64=0).
  assert not jax.config.jax_enable_x64
  result = {'dtype': 'float32'}
  for config in sys.argv[1:]:
    result[config] = nonfinite_counts(config, jnp.float32)
  print(json.dumps(result, sort_keys=True))
