r"""How fast is the cost model? Evaluations per second, jitted and not.

  python -m experiments.benchmark
  python -m experiments.benchmark --workload=zion_scale --platform=zion

Measures, on the local JAX backend: evaluations per second of the jitted,
vmapped cost model (the full `CostReport`) for batches of 1, 1e3 and 1e5
designs; value-and-gradient evaluations per second; compile time; FLOPs per
evaluation from XLA's cost analysis; and the same model called one design
at a time without jit, as a naive user would. Designs are the platform
preset with every continuous field scaled by a random factor in [0.5, 2]
(clipped to hardware.BOUNDS). Writes result.json (keys evals_per_s,
grads_per_s, eager_evals_per_s, compile_s, ...) and env.json. A benchmark
script: timings vary with machine load, so it prints them; tests do not
assert them.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from experiments import common

common.define_input_flags(
  workload='criteo_kaggle',
  platform='dgx_a100_80gb',
  plan=True,
  override='workload,platform,plan,stack',
  device_profile=True,
)
flags.DEFINE_list(
  'batches', ['1', '1000', '100000'], 'Design batch sizes to time.'
)
flags.DEFINE_integer(
  'grad_batch', 100000, 'Batch size for value-and-gradient timing.'
)
flags.DEFINE_integer(
  'eager_designs', 5, 'Designs evaluated one at a time without jit.'
)
flags.DEFINE_float(
  'min_time_s', 1.0, 'Repeat each timed call until this much time has passed.'
)
common.define_run_flags(
  'benchmark',
  x64=False,
  x64_help='Benchmark in float64 instead of float32.',
  seed_help='Seed of the random designs.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _designs(platform, n: int, seed: int):
  """`n` random designs around `platform`, as one batched pytree."""
  from codesign import hardware

  paths = hardware.leaf_paths(platform)
  leaves, treedef = jax.tree.flatten(platform)
  rng = np.random.default_rng(seed)
  out = []
  for path, leaf in zip(paths, leaves, strict=True):
    lo, hi = hardware.BOUNDS[path]
    x = float(leaf) * np.exp(rng.uniform(np.log(0.5), np.log(2.0), n))
    if not (path == 'accelerators_per_node' and platform.trainer == 'cpu'):
      x = np.clip(x, lo, hi)
    out.append(jnp.asarray(x))
  return jax.tree.unflatten(treedef, out)


def _time(fn, *args, min_time_s: float) -> float:
  """Seconds per call of `fn(*args)`, after one warm-up call."""
  jax.block_until_ready(fn(*args))
  calls, start = 0, time.perf_counter()
  while True:
    jax.block_until_ready(fn(*args))
    calls += 1
    elapsed = time.perf_counter() - start
    if elapsed >= min_time_s:
      return elapsed / calls


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign import cost_model, hardware, inputs, results

  w, p, plan, stack = inputs.resolve(
    FLAGS.workload,
    FLAGS.platform,
    FLAGS.plan,
    FLAGS.override,
    device_profile=FLAGS.device_profile,
    stack=FLAGS.stack,
  )
  dtype = jnp.float64 if FLAGS.x64 else jnp.float32
  plan = jax.tree.map(lambda x: jnp.asarray(x, dtype), plan)
  stack = jax.tree.map(lambda x: jnp.asarray(x, dtype), stack)
  base = hardware.as_arrays(p, dtype)
  workdir = results.make_workdir('benchmark', FLAGS.workdir)

  def evaluate(hw):
    return cost_model.evaluate(hw, w, plan, stack)

  def log_throughput(hw):
    return jnp.log(cost_model.evaluate(hw, w, plan, stack).throughput)

  batched = jax.jit(jax.vmap(evaluate))
  batched_grad = jax.jit(jax.vmap(jax.value_and_grad(log_throughput)))

  evals_per_s, compile_s, flops = {}, {}, {}
  for n in (int(b) for b in FLAGS.batches):
    designs = jax.tree.map(lambda x: x.astype(dtype), _designs(base, n, 0))
    start = time.perf_counter()
    compiled = batched.lower(designs).compile()
    compile_s[str(n)] = time.perf_counter() - start
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    flops[str(n)] = float(cost.get('flops', float('nan'))) / n
    sec = _time(compiled, designs, min_time_s=FLAGS.min_time_s)
    evals_per_s[str(n)] = n / sec
    print(
      f'batch {n:>7d}: {n / sec:14,.0f} evals/s  compile '
      f'{compile_s[str(n)]:.2f} s  {flops[str(n)]:,.0f} FLOP/eval'
    )

  n = FLAGS.grad_batch
  designs = jax.tree.map(lambda x: x.astype(dtype), _designs(base, n, 1))
  start = time.perf_counter()
  compiled_grad = batched_grad.lower(designs).compile()
  grad_compile_s = time.perf_counter() - start
  sec = _time(compiled_grad, designs, min_time_s=FLAGS.min_time_s)
  grads_per_s = n / sec
  print(
    f'value+grad batch {n}: {grads_per_s:,.0f} /s  compile '
    f'{grad_compile_s:.2f} s'
  )

  singles = _designs(base, FLAGS.eager_designs, 2)
  one = [
    jax.tree.map(lambda x, i=i: x[i].astype(dtype), singles)
    for i in range(FLAGS.eager_designs)
  ]
  jax.block_until_ready(evaluate(one[0]))  # warm op caches
  start = time.perf_counter()
  for hw in one:
    jax.block_until_ready(evaluate(hw))
  eager = FLAGS.eager_designs / (time.perf_counter() - start)
  best = max(evals_per_s.values())
  print(
    f'eager, one design at a time: {eager:,.1f} evals/s '
    f'(jit+vmap is {best / eager:,.0f}x faster)'
  )

  result = {
    'workload': w.name,
    'platform': p.name,
    'dtype': str(jnp.dtype(dtype)),
    'evals_per_s': evals_per_s,
    'grads_per_s': grads_per_s,
    'grad_batch': n,
    'eager_evals_per_s': eager,
    'speedup_vs_eager': best / eager,
    'compile_s': compile_s,
    'grad_compile_s': grad_compile_s,
    'flops_per_eval': flops,
  }
  config = {'flags': common.flag_values()}
  results.write_run(workdir, config, result, seed=FLAGS.seed)
  print(f'wrote {workdir}')


if __name__ == '__main__':
  common.run(main)
