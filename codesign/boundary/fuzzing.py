"""Fuzzing the input boundary: every numeric field of the four inputs, with
its documented range, and values inside, on and outside it.

`fields()` lists each numeric field as an `--override` key (in the key's
unit, as a user types it) with its range: `hardware.BOUNDS`,
`stack.BOUNDS` and `workload.BOUNDS`, converted to the key's unit, and
[0, 1] for the plan's fractions. `inside`, `edges` and `outside` give
values of each kind; `check(base, overrides)` resolves the inputs as the
scripts do and costs the design, and returns what happened. The
property the fuzz tests and `experiments.fuzz` assert: a value inside or
on the range is accepted and costs to finite, positive numbers; one
outside is refused with one sentence that names the key.
"""

import dataclasses
import functools
import math

import jax
import numpy as np

from codesign.boundary import inputs
from codesign.core.errors import InputError
from codesign.core.units import UNITS
from codesign.model import cost_model, planner, terms
from codesign.spec import (
  hardware,
  platform_presets,
  schema,
  stack_presets,
  workload_presets,
)
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl


@dataclasses.dataclass(frozen=True)
class Field:
  """One numeric input field.

  Attributes:
    key: the `--override` key, e.g. `platform.accelerator.hbm_capacity_gb`.
    lo, hi: its documented range in the key's unit (inclusive).
    integer: whether the field is a count (integers only).
  """

  key: str
  lo: float
  hi: float
  integer: bool = False


@dataclasses.dataclass(frozen=True)
class Base:
  """The inputs a fuzzed override is applied to (preset names)."""

  workload: str = 'criteo_kaggle'
  platform: str = 'big_basin'
  stack: str = 'torchrec'
  # The plan is the preset's auto plan written out, so that fuzzing a
  # field does not re-plan (which would cost the model many times).
  overrides: tuple[str, ...] = ('workload.interaction=cat',)


def _unit_scale(f: dataclasses.Field) -> float:
  unit = f.metadata.get('unit')
  return UNITS[unit] if unit else 1.0


def fields(base: Base = Base()) -> list[Field]:
  """Every numeric field of workload, platform, stack and plan with its
  documented range, in the key's unit."""
  p = platform_presets.get(base.platform)
  s = stack_presets.get(base.stack)
  w = inputs.load_workload(base.workload, list(base.overrides))
  # One sample per rank at least (`inputs.check_rank_batch`): the node
  # count and the batch bound each other at the base's other values.
  ranks_per_node = float(terms.ranks_per_node(p))
  joint = {
    'nodes': w.global_batch // ranks_per_node,
    'global_batch': float(p.nodes) * ranks_per_node,
  }
  out = []
  for path in hardware.leaf_paths(p):
    scale = _unit_scale(schema.field_at(p, path))
    lo, hi = hardware.BOUNDS[path]
    hi = min(hi, joint.get(path, hi))
    key = 'platform.' + schema.json_path(p, path)
    out.append(Field(key, lo / scale, hi / scale, path in hardware.COUNTS))
  for path in stack_lib.leaf_paths(s):
    scale = _unit_scale(schema.field_at(s, path))
    lo, hi = stack_lib.BOUNDS[path]
    out.append(
      Field('stack.' + schema.json_path(s, path), lo / scale, hi / scale)
    )
  table = {'rows', 'dim', 'pooling'}
  for name, (lo, hi) in wl.BOUNDS.items():
    if name in ('num_tables', 'mlp_layers'):
      continue  # a count of list items, not a field to override
    if name == 'mlp_width':
      key = 'workload.top_mlp.0'
    elif name in table:
      key = f'workload.tables.0.{name}'
    else:
      key = f'workload.{name}'
    lo = max(lo, joint.get(name, lo))
    out.append(Field(key, lo, hi, name in wl.INTEGERS))
  for name in ('hbm_fraction', 'cpu_lookup_fraction', 'overlap'):
    out.append(Field(f'plan.{name}', 0.0, 1.0))
  return out


def inside(field: Field, u: float):
  """A value inside the range at u in [0, 1]: log-uniform where the range
  is positive, uniform otherwise; rounded for counts."""
  lo, hi = field.lo, field.hi
  if lo > 0:
    x = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
  else:
    x = lo + u * (hi - lo)
  x = min(max(x, lo), hi)
  return int(round(x)) if field.integer else x


def edges(field: Field) -> list:
  """The two ends of the range."""
  if field.integer:
    return [int(math.ceil(field.lo)), int(math.floor(field.hi))]
  return [field.lo, field.hi]


def outside(field: Field) -> list:
  """Values a user may type that the range excludes: just below and
  above it, far outside, not finite, of the wrong type or not a count."""
  lo, hi = field.lo, field.hi
  below = lo - max(abs(lo), 1.0) * 1e-3 if lo != 0 else -1e-9
  values = [below, hi + max(abs(hi), 1.0) * 1e-3, -1e300, 1e300]
  values += [float('nan'), float('inf'), float('-inf'), 'abc', True]
  if field.integer and hi - lo >= 2:
    values.append(lo + 1.5)
  return values


def override(field: Field, value) -> str:
  """The `--override` text of a value (JSON spelling: true, NaN, ...)."""
  if isinstance(value, bool):
    text = 'true' if value else 'false'
  elif isinstance(value, float) and not math.isfinite(value):
    text = {math.inf: 'Infinity', -math.inf: '-Infinity'}.get(value, 'NaN')
  elif isinstance(value, float):
    text = repr(value)
  else:
    text = str(value)
  return f'{field.key}={text}'


@functools.lru_cache(maxsize=4)
def _plan_json(base: Base) -> dict:
  w, p, plan, s = inputs.resolve(
    base.workload, base.platform, 'auto', list(base.overrides), stack=base.stack
  )
  return schema.plan_to_json(plan)


@functools.lru_cache(maxsize=64)
def _evaluator(w: wl.Workload):
  return jax.jit(lambda p, plan, s: cost_model.evaluate(p, w, plan, s))


def check(base: Base, overrides: list[str]) -> tuple[str, str]:
  """Resolves the base inputs with `overrides` and costs the design.

  Returns ('refused', message) for an `InputError`, ('finite', '') when
  the step time, throughput, capex, power and breakdown are finite and
  the step time positive, else ('not finite', what).
  """
  try:
    w = inputs.load_workload(base.workload, list(base.overrides) + overrides)
    p = inputs.load_platform(base.platform, overrides)
    inputs.check_rank_batch(w, p)
    s = inputs.load_stack(base.stack, overrides)
    plj = inputs.with_overrides(dict(_plan_json(base)), 'plan', overrides)
    plan = schema.plan_from_json(plj, w)
  except InputError as e:
    return 'refused', str(e)
  r = _evaluator(w)(hardware.as_arrays(p), plan, s)
  values = {
    'step_time': r.step_time,
    'throughput': r.throughput,
    'capex': r.capex,
    'power': r.power,
    **{f'breakdown.{k}': v for k, v in r.breakdown.items()},
  }
  bad = [k for k, v in values.items() if not np.all(np.isfinite(np.asarray(v)))]
  if bad or not float(r.step_time) > 0:
    return 'not finite', ', '.join(bad) or 'step time not positive'
  return 'finite', ''


# ---- at scale: random designs inside the bounds, batched -----------------

# (workload, platform preset, stack preset): every trainer, stack and
# interaction kind, uniform and skewed traffic, spilled and resident
# tables.
SCALE_CONFIGS = (
  ('criteo_kaggle', 'big_basin', 'nvidia_pytorch'),
  ('zion_scale', 'zion', 'torchrec'),
  ('mlperf_dlrm_dcnv2', 'dgx_a100_80gb', 'hugectr'),
  ('rm2', 'p4d', 'jax_xla'),
  ('dlrm_benchmark', 'cpu_2s', 'ipex_cpu'),
)


def _unit_design(u, lo, hi):
  """Leaf values from unit numbers u (N, L): log-uniform where lo > 0,
  uniform on [lo, hi] otherwise."""
  safe_lo = np.where(lo > 0, lo, 1.0)
  log = safe_lo * (hi / safe_lo) ** u
  return np.where(lo > 0, np.clip(log, lo, hi), lo + (hi - lo) * u)


def random_designs(p, s, n: int, rng: np.random.Generator, edge_share=0.25):
  """n platforms and stacks (batched pytrees, leading axis n) with every
  continuous leaf drawn inside its bounds; a share `edge_share` of the
  leaves sit exactly on a bound. Returns (platforms, stacks, fractions
  (n, 3): hbm fraction, cpu lookup fraction, overlap in [0, 1])."""

  def draw(leaves_lo, leaves_hi):
    u = rng.uniform(size=(n, len(leaves_lo)))
    edge = rng.uniform(size=u.shape) < edge_share
    u = np.where(edge, np.round(u), u)
    return _unit_design(u, leaves_lo, leaves_hi)

  paths = hardware.leaf_paths(p)
  lo = np.array([hardware.BOUNDS[k][0] for k in paths])
  hi = np.array([hardware.BOUNDS[k][1] for k in paths])
  if p.trainer == 'cpu':  # accelerators_per_node unused, keep the preset's
    i = paths.index('accelerators_per_node')
    lo[i] = hi[i] = float(p.accelerators_per_node)
  spaths = stack_lib.leaf_paths(s)
  slo = np.array([stack_lib.BOUNDS[k][0] for k in spaths])
  shi = np.array([stack_lib.BOUNDS[k][1] for k in spaths])
  pv, sv = draw(lo, hi), draw(slo, shi)
  platforms = jax.tree.unflatten(
    jax.tree.structure(p), [pv[:, i] for i in range(len(paths))]
  )
  stacks = jax.tree.unflatten(
    jax.tree.structure(s), [sv[:, i] for i in range(len(spaths))]
  )
  return platforms, stacks, draw(np.zeros(3), np.ones(3))


def count_nonfinite(config, n: int, seed: int, chunk: int = 20_000) -> dict:
  """Evaluates n random in-bounds designs of `config` (workload, platform,
  stack preset names) in chunks, values and gradients (of log throughput
  with respect to every platform and stack leaf), in the current
  precision. Returns counts of evaluations and of designs whose values or
  gradients are not finite (or whose step time is not positive)."""
  wname, pname, sname = config
  w = workload_presets.get(wname)
  p = platform_presets.get(pname)
  s = stack_presets.get(sname)
  template = planner.make(w, p, s)

  def one(pp, ss, f):
    plan = dataclasses.replace(
      template,
      hbm_fraction=f[0] * jax.numpy.ones(w.num_tables),
      cpu_lookup_fraction=f[1],
      overlap=f[2],
    )
    r = cost_model.evaluate(pp, w, plan, ss)
    return jax.numpy.log(r.throughput), r

  def values_and_grads(pp, ss, f):
    (_, r), g = jax.value_and_grad(one, argnums=(0, 1), has_aux=True)(pp, ss, f)
    vals = [r.step_time, r.throughput, r.capex, r.power]
    vals += list(r.breakdown.values())
    ok_v = jax.numpy.all(jax.numpy.isfinite(jax.numpy.stack(vals)))
    ok_v = ok_v & (r.step_time > 0)
    ok_g = jax.numpy.all(
      jax.numpy.stack(
        [jax.numpy.all(jax.numpy.isfinite(x)) for x in jax.tree.leaves(g)]
      )
    )
    return ok_v, ok_g

  batched = jax.jit(jax.vmap(values_and_grads))
  rng = np.random.default_rng(seed)
  bad_v = bad_g = done = 0
  while done < n:
    m = min(chunk, n - done)
    platforms, stacks, fr = random_designs(p, s, m, rng)
    ok_v, ok_g = batched(platforms, stacks, fr)
    bad_v += int(m - np.sum(np.asarray(ok_v)))
    bad_g += int(m - np.sum(np.asarray(ok_g)))
    done += m
  return {
    'config': {'workload': wname, 'platform': pname, 'stack': sname},
    'evaluations': done,
    'nonfinite_values': bad_v,
    'nonfinite_gradients': bad_g,
  }


def boundary_counts(base: Base = Base(), inside_per_field: int = 3) -> dict:
  """Every field with its edges, `inside_per_field` values inside and every
  `outside` value, through `check`. Counts per outcome, and the cases that
  broke the rule (inside or on the range: finite; outside: refused in one
  sentence)."""
  counts = {'finite': 0, 'refused': 0, 'not finite': 0}
  broken = []
  for f in fields(base):
    inner = [
      inside(f, (i + 0.5) / inside_per_field) for i in range(inside_per_field)
    ]
    for v in edges(f) + inner:
      status, message = check(base, [override(f, v)])
      counts[status] += 1
      if status != 'finite':
        broken.append({'key': f.key, 'value': repr(v), 'got': message})
    for v in outside(f):
      status, message = check(base, [override(f, v)])
      counts[status] += 1
      if status != 'refused' or '\n' in message:
        broken.append({'key': f.key, 'value': repr(v), 'got': status})
  return {'counts': counts, 'broken': broken}
