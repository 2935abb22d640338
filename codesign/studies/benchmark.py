"""How fast is the cost model? Evaluations per second, jitted and not.

The library part of `experiments.benchmark`, with no file I/O and no
printing. `run(settings)` measures, on the local JAX backend: evaluations
per second of the jitted, vmapped cost model (the full `CostReport`) for
each batch of designs, given as the columns of one matrix and returned
as one (`blocked`; at the largest batch of one block also as `Platform`
and `CostReport` pytrees, an array per leaf, for comparison);
value-and-gradient evaluations per second (of the log throughput);
compile time; FLOPs per evaluation from XLA's cost analysis; and the
same model called one design at a time without jit, as a naive user
would. Designs are the platform with every continuous field scaled by a
random factor in [0.5, 2] (clipped to `hardware.BOUNDS`; `designs`).

Times are wall-clock seconds, rates per second. They vary with machine
load, so tests assert none of them; the FLOPs per evaluation and the
designs are reproducible.
"""

import dataclasses
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from codesign.boundary import inputs
from codesign.core import xla_options
from codesign.core.errors import InputError
from codesign.model import cost_model
from codesign.spec import hardware
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl


@dataclasses.dataclass(frozen=True)
class Settings:
  """What to time (the flags of `experiments.benchmark`).

  Attributes:
    workload: a `Workload`, or a preset name or JSON file.
    platform: a `Platform`, or a preset name or JSON file: the centre of
      the random designs.
    plan: a `Plan`, or a named plan (`auto`, `hbm`, `ddr`) or plan file.
    stack: a `Stack`, or a preset name or stack JSON file.
    batches: design batch sizes (designs per jitted, vmapped call).
    grad_batch: designs per value-and-gradient call.
    block: a batch of more designs runs as `lax.map` over vmapped blocks
      of this many (padded to whole blocks; see `blocked`), the way
      `codesign.search.batching` runs the search's batches: the
      intermediates of a block stay in cache, where one vmap over 1e5
      designs streams each through memory (value and gradient 2-3x
      slower on 2 cores).
    eager_designs: designs evaluated one at a time without jit.
    min_time_s: each timed call is repeated until this many seconds have
      passed (0: one call after the warm-up).
    x64: evaluate in float64 (needs `jax_enable_x64`) instead of float32.
    seed: seed of the random designs (batches use seed, value-and-gradient
      seed + 1, eager seed + 2).
  """

  workload: str | wl.Workload = 'criteo_kaggle'
  platform: str | hardware.Platform = 'dgx_a100_80gb'
  plan: str | plan_lib.Plan = 'auto'
  stack: str | stack_lib.Stack = 'torchrec'
  batches: tuple[int, ...] = (1, 1000, 100000)
  grad_batch: int = 100000
  block: int = 2000
  eager_designs: int = 5
  min_time_s: float = 1.0
  x64: bool = False
  seed: int = 0


def _inputs(settings: Settings):
  """(workload, platform, plan, stack) objects; names and files load as
  `inputs.resolve` loads them (no overrides, no device profile)."""
  w, p, s = settings.workload, settings.platform, settings.stack
  w = w if isinstance(w, wl.Workload) else inputs.load_workload(str(w))
  p = p if isinstance(p, hardware.Platform) else inputs.load_platform(str(p))
  s = s if isinstance(s, stack_lib.Stack) else inputs.load_stack(str(s))
  plan = settings.plan
  if not isinstance(plan, plan_lib.Plan):
    plan = inputs.load_plan(str(plan), w, p, s)
  return w, p, plan, s


def designs(platform: hardware.Platform, n: int, seed: int):
  """`n` random designs around `platform`, as one batched pytree: every
  leaf scaled by a log-uniform factor in [0.5, 2], clipped to
  `hardware.BOUNDS` (but for the accelerator count of a CPU trainer,
  which is 0)."""
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


def seconds_per_call(fn, *args, min_time_s: float) -> float:
  """Median seconds of one call of `fn(*args)`, over the calls made until
  `min_time_s` has passed (at least 5), after one warm-up call. The
  median, not the mean: on a shared machine another process lengthens
  some calls by 2-3x, and one such call moved a mean by 20-50% between
  runs of the same program."""
  jax.block_until_ready(fn(*args))
  times, start = [], time.perf_counter()
  while len(times) < 5 or time.perf_counter() - start < min_time_s:
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t)
  return float(np.median(times))


def _check(settings: Settings) -> None:
  sizes = (
    *settings.batches,
    settings.grad_batch,
    settings.eager_designs,
    settings.block,
  )
  if not settings.batches or min(int(n) for n in sizes) < 1:
    raise InputError('every design batch size must be a positive integer')
  if settings.min_time_s < 0:
    raise InputError('min_time_s must not be negative')
  if settings.x64 and not jax.config.jax_enable_x64:
    raise InputError('x64 needs jax_enable_x64 set before JAX computes')


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> tuple[dict, list[dict]]:
  """Times the cost model (see the module docstring).

  Args:
    settings: what to time.
    progress: called with one line of text as each timing starts (the
      compile of a large batch takes seconds).

  Returns:
    (result, metrics). result: the dict `experiments.benchmark` writes to
    result.json: workload, platform, dtype, evals_per_s, compile_s and
    flops_per_eval (each {batch size as a string: value}; evaluations/s,
    s, FLOP per design), pytree_evals_per_s ({batch: evaluations/s} of
    designs as pytrees at the largest batch of one block), grads_per_s
    (value-and-gradient evaluations/s), grad_batch, block,
    grad_compile_s (s), eager_evals_per_s, speedup_vs_eager (the best
    jitted rate over the eager one). metrics: empty.

  Raises:
    InputError: bad settings or inputs.
  """
  progress = progress or (lambda line: None)
  _check(settings)
  bench = bench_of(settings)
  evals_per_s, compile_s, flops, pytree = _batched_rates(
    bench, settings, progress
  )
  grads_per_s, grad_compile_s = _gradient_rate(bench, settings, progress)
  eager = _eager_rate(bench, settings, progress)
  best = max(evals_per_s.values())
  result = {
    'workload': bench.w.name,
    'platform': bench.p.name,
    'dtype': str(jnp.dtype(bench.dtype)),
    'evals_per_s': evals_per_s,
    'pytree_evals_per_s': pytree,
    'grads_per_s': grads_per_s,
    'grad_batch': int(settings.grad_batch),
    'block': int(settings.block),
    'eager_evals_per_s': eager,
    'speedup_vs_eager': best / eager,
    'compile_s': compile_s,
    'grad_compile_s': grad_compile_s,
    'flops_per_eval': flops,
  }
  return result, []


@dataclasses.dataclass(frozen=True, eq=False)
class Bench:
  """The design timed: workload, platform, plan and stack (in `dtype`),
  the platform's arrays `base` the designs scatter around, the seed."""

  w: wl.Workload
  p: hardware.Platform
  plan: plan_lib.Plan
  stack: stack_lib.Stack
  dtype: type
  base: hardware.Platform
  seed: int

  def evaluate(self, hw):
    """The cost model's report of platform arrays `hw`."""
    return cost_model.evaluate(hw, self.w, self.plan, self.stack)

  def log_throughput(self, hw):
    """The log throughput of platform arrays `hw`."""
    return jnp.log(self.evaluate(hw).throughput)

  def batch_of(self, n: int, seed: int):
    """`designs` of n platforms around `base`, in `dtype`."""
    return jax.tree.map(
      lambda x: x.astype(self.dtype), designs(self.base, n, seed)
    )

  def columns_of(self, n: int, seed: int):
    """`batch_of` as an (L, n) matrix, a column per design."""
    return jnp.stack(jax.tree.leaves(self.batch_of(n, seed)))


def bench_of(settings: Settings) -> Bench:
  """The `Bench` of the settings: what `run` times."""
  w, p, plan, stack = _inputs(settings)
  dtype = jnp.float64 if settings.x64 else jnp.float32
  plan = jax.tree.map(lambda x: jnp.asarray(x, dtype), plan)
  stack = jax.tree.map(lambda x: jnp.asarray(x, dtype), stack)
  base = hardware.as_arrays(p, dtype)
  return Bench(w, p, plan, stack, dtype, base, int(settings.seed))


def _batched_rates(bench: Bench, settings: Settings, progress):
  """(evals_per_s, compile_s, flops, pytree_evals_per_s): per batch size
  (as a string) the jitted and vmapped evaluations per second of designs
  as the columns of one matrix, the compile seconds and XLA's FLOPs per
  design; and the rate of the same designs as pytrees at the largest
  batch of one block."""
  evals_per_s, compile_s, flops = {}, {}, {}
  for n in (int(b) for b in settings.batches):
    progress(f'compiling and timing a batch of {n} designs ...')
    cols = bench.columns_of(n, bench.seed)
    batched = blocked(bench.evaluate, n, settings.block, bench.base)
    start = time.perf_counter()
    compiled = batched.lower(cols).compile()
    compile_s[str(n)] = time.perf_counter() - start
    block = min(n, settings.block)
    one = compiled if n == block else _one_block(bench, cols, block)
    flops[str(n)] = _flops(one) / block
    sec = seconds_per_call(compiled, cols, min_time_s=settings.min_time_s)
    evals_per_s[str(n)] = n / sec
  return evals_per_s, compile_s, flops, _pytree_rate(bench, settings)


def _pytree_rate(bench: Bench, settings: Settings) -> dict:
  """{batch: evaluations per second} of the largest batch of one block
  with designs in and reports out as pytrees (an array per leaf)."""
  single = [int(b) for b in settings.batches if int(b) <= settings.block]
  if not single:
    return {}
  n = max(single)
  batch = bench.batch_of(n, bench.seed)
  compiled = blocked(bench.evaluate, n, n).lower(batch).compile()
  sec = seconds_per_call(compiled, batch, min_time_s=settings.min_time_s)
  return {str(n): n / sec}


def _one_block(bench: Bench, cols, block: int):
  """The compiled vmapped program of one block of `block` designs (XLA's
  cost analysis counts a loop's body once: a blocked program's count is
  a block's)."""
  fn = blocked(bench.evaluate, block, block, bench.base)
  return fn.lower(cols[:, :block]).compile()


def _flops(compiled) -> float:
  """XLA's FLOPs of a compiled program."""
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, list | tuple) else cost
  return float(cost.get('flops', float('nan')))


def _gradient_rate(bench: Bench, settings: Settings, progress):
  """(grads_per_s, compile_s) of the jitted, vmapped value and gradient
  of the log throughput over `grad_batch` designs."""
  n = int(settings.grad_batch)
  value_and_grad = jax.value_and_grad(bench.log_throughput)
  batched_grad = blocked(value_and_grad, n, settings.block)
  progress(f'compiling and timing value and gradient of {n} designs ...')
  batch = bench.batch_of(n, bench.seed + 1)
  start = time.perf_counter()
  compiled_grad = batched_grad.lower(batch).compile()
  grad_compile_s = time.perf_counter() - start
  sec = seconds_per_call(compiled_grad, batch, min_time_s=settings.min_time_s)
  return n / sec, grad_compile_s


def blocked(fn, n: int, block: int, template=None):
  """jit of `fn` (one design -> pytree) over a batch of `n` designs: one
  vmap when n <= block, else `lax.map` over vmapped blocks of `block`
  designs (the batch padded with copies of its first design to whole
  blocks, the copies dropped). With a `template` (a pytree of the
  designs' structure), the program takes the designs as the columns of
  one (L, n) matrix, each row a leaf of `template`, and returns the
  output's leaves as the rows of one (K, n) matrix, in the input's
  dtype: one buffer in and one out, where a batch of `Platform`s and
  its `CostReport`s are 62 and 32 (an accelerator preset), whose
  handling took a third of a call of 1,000 designs (2-core machine:
  0.55 ms a call as pytrees, 0.30-0.36 ms as matrices). Compiled with
  `xla_options.MODEL_COMPILER_OPTIONS`."""
  one = jax.vmap(fn)
  blocks = -(-n // block)

  def split(x):
    pad = jnp.broadcast_to(x[:1], (blocks * block - n,) + x.shape[1:])
    x = jnp.concatenate([x, pad]) if pad.shape[0] else x
    return x.reshape((blocks, block) + x.shape[1:])

  def run(designs):
    if n <= block:
      return one(designs)
    out = jax.lax.map(one, jax.tree.map(split, designs))
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:])[:n], out)

  def on_columns(cols):
    designs = jax.tree.unflatten(jax.tree.structure(template), list(cols))
    out = jax.tree.leaves(run(designs))
    return jnp.stack([jnp.asarray(x, cols.dtype) for x in out])

  program = run if template is None else on_columns
  return jax.jit(program, compiler_options=xla_options.MODEL_COMPILER_OPTIONS)


def _eager_rate(bench: Bench, settings: Settings, progress) -> float:
  """Evaluations per second of `eager_designs` designs one at a time
  without jit (op caches warmed first)."""
  m = int(settings.eager_designs)
  progress(f'evaluating {m} designs one at a time without jit ...')
  singles = designs(bench.base, m, bench.seed + 2)
  one = [
    jax.tree.map(lambda x, i=i: x[i].astype(bench.dtype), singles)
    for i in range(m)
  ]
  jax.block_until_ready(bench.evaluate(one[0]))  # warm op caches
  start = time.perf_counter()
  for hw in one:
    jax.block_until_ready(bench.evaluate(hw))
  return m / (time.perf_counter() - start)


def table(result: dict) -> str:
  """Rates, compile times and FLOPs per evaluation, as plain text (a
  `run` result)."""
  lines = [f'{result["workload"]} on {result["platform"]} ({result["dtype"]})']
  for key, rate in result['evals_per_s'].items():
    lines.append(
      f'batch {int(key):>7d}: {rate:14,.0f} evals/s  compile '
      f'{result["compile_s"][key]:.2f} s  '
      f'{result["flops_per_eval"][key]:,.0f} FLOP/eval'
    )
  for key, rate in result.get('pytree_evals_per_s', {}).items():
    lines.append(
      f'batch {int(key):>7d}: {rate:14,.0f} evals/s with designs and '
      'reports as pytrees (an array per leaf), not a matrix'
    )
  lines.append(
    f'value+grad batch {result["grad_batch"]}: {result["grads_per_s"]:,.0f} '
    f'/s  compile {result["grad_compile_s"]:.2f} s'
  )
  lines.append(
    f'(a batch of more than {result["block"]:,} designs runs as lax.map '
    f'over vmapped blocks of {result["block"]:,}; rates are medians of '
    'timed calls)'
  )
  lines.append(
    f'eager, one design at a time: {result["eager_evals_per_s"]:,.1f} '
    f'evals/s (jit+vmap is {result["speedup_vs_eager"]:,.0f}x faster)'
  )
  lines += _job_lines(result)
  return '\n'.join(lines)


def _job_lines(result: dict) -> list[str]:
  """The job's rates and propose's wall times, where measured."""
  lines = []
  if 'relaxed_evals_per_s' in result:
    lines.append(
      f'the job ({result["job_workload"]}): '
      f'{result["relaxed_evals_per_s"]:,.0f} relaxed designs/s (steps of '
      f'the search, each start one value and gradient; first call '
      f'{result["relaxed_first_call_s"]:.1f} s), '
      f'{result["relaxed_auto_evals_per_s"]:,.0f}/s in the auto-plan space '
      f'(the HBM fit in each; first call '
      f'{result["relaxed_auto_first_call_s"]:.1f} s), '
      f'{result["planned_designs_per_s"]:,.0f} buildable designs with their '
      f'auto plan/s (first call {result["planned_first_call_s"]:.1f} s)'
    )
  if 'exhaustive_s' in result:
    lines.append(
      f'exhaustive enumeration of its {result["exhaustive_designs"]:,} '
      f'designs at ${result["exhaustive_budget_usd"]:,.0f}: '
      f'{result["exhaustive_s"]:.1f} s '
      f'({result["exhaustive_designs_per_s"]:,.0f} designs/s, most ruled '
      'out without the cost model; first call '
      f'{result["exhaustive_first_call_s"]:.1f} s, compile included)'
    )
  if 'propose_cold_s' in result:
    lines.append(
      f'propose defaults: {result["propose_cold_s"]:.1f} s cold '
      f'(search {result["propose_cold_search_s"]:.1f} s), '
      f'{result["propose_warm_s"]:.1f} s warm '
      f'(search {result["propose_warm_search_s"]:.1f} s)'
    )
  return lines


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """The main table, one row per design batch size: jitted, vmapped
  evaluations per second, compile seconds, XLA FLOPs per evaluation."""
  header = ['design_batch', 'evals_per_s', 'compile_s', 'flops_per_eval']
  rows = [
    [
      int(key),
      rate,
      result['compile_s'][key],
      result['flops_per_eval'][key],
    ]
    for key, rate in result['evals_per_s'].items()
  ]
  return header, rows
