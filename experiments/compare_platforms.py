r"""Which platform trains a DLRM best as its embedding tables grow?

  python -m experiments.compare_platforms
  python -m experiments.compare_platforms --workload=mlperf_dlrm_v1 \
      --points=24 --max_size_gb=30000

Scales every table of a base workload by one factor so that the embedding
bytes (tables plus optimizer state) sweep log-spaced from --min_size_gb to
--max_size_gb, and evaluates each platform with the auto plan
(`planner.make`: the hottest rows in the HBM the busiest rank has, the
rest spilled to host DDR). For each platform it reports throughput, perf per
dollar and perf per watt, where it starts spilling and where it becomes
infeasible (between which grid points; --refine_steps narrows these
brackets by re-evaluating the model), and which platform leads each
metric at each size, with the crossovers.

Writes to --workdir: config.json, env.json, result.json, metrics.jsonl (one
line per size point) and platforms.png. The summary printed at the end (and
stored under `summary` in result.json) states the crossovers and whether
the GPU-only platforms lead while the tables fit in HBM and the
large-memory platforms lead beyond.
"""

import jax
import numpy as np
from absl import flags

from experiments import common

flags.DEFINE_list(
  'platforms',
  ['cpu_2s', 'big_basin', 'zion', 'zionex', 'dgx_a100_80gb', 'dgx_h100'],
  'Platform presets to compare (comma-separated names or JSON files).',
)
flags.DEFINE_list(
  'gpu_platforms',
  ['big_basin', 'dgx_a100_80gb', 'dgx_h100'],
  'Which of --platforms count as GPU-only servers (small host DDR) in the '
  'summary; may be empty.',
)
flags.DEFINE_list(
  'large_memory_platforms',
  ['zion', 'zionex'],
  'Which of --platforms count as large-memory Zion-like platforms in the '
  'summary; may be empty.',
)
flags.DEFINE_float(
  'min_size_gb', 10.0, 'Smallest embedding size of the sweep, GB (1e9 B).'
)
flags.DEFINE_float(
  'max_size_gb', 10000.0, 'Largest embedding size of the sweep, GB (1e9 B).'
)
flags.DEFINE_integer(
  'points', 16, 'Log-spaced sizes in the sweep, ends included (>= 2).'
)
flags.DEFINE_integer(
  'refine_steps',
  0,
  'Rounds of 32-fold multisection that locate spill onsets and capacity '
  'limits between grid points (0: grid points only; each round divides '
  'the log-interval by 32, at the cost of compiling the plans met there).',
)
common.define_input_flags(
  workload='zion_scale',
  override='workload,stack',
  workload_help='Its tables are scaled to each size of the sweep.',
)
common.define_run_flags(
  'compare_platforms',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS

METRICS = (
  ('throughput', 'throughput_samples_per_s', 'throughput (samples/s)'),
  ('perf_per_usd', 'perf_per_usd', 'samples/s per USD of capex'),
  ('perf_per_watt', 'perf_per_watt', 'samples/s per W'),
)


def _check_flags():
  from codesign.errors import InputError

  if FLAGS.points < 2:
    raise InputError(f'--points must be at least 2, got {FLAGS.points}')
  if not 0 < FLAGS.min_size_gb < FLAGS.max_size_gb:
    raise InputError(
      '--min_size_gb and --max_size_gb need 0 < min < max, got '
      f'{FLAGS.min_size_gb} and {FLAGS.max_size_gb}'
    )
  if FLAGS.refine_steps < 0:
    raise InputError(
      f'--refine_steps must not be negative, got {FLAGS.refine_steps}'
    )
  if not FLAGS.platforms:
    raise InputError('--platforms needs at least one platform')
  if len(set(FLAGS.platforms)) != len(FLAGS.platforms):
    raise InputError('--platforms lists a platform twice')
  for flag in ('gpu_platforms', 'large_memory_platforms'):
    extra = [n for n in FLAGS[flag].value if n not in FLAGS.platforms]
    if extra:
      raise InputError(
        f'--{flag} names {extra[0]!r}, which is not in --platforms'
      )


def _load_platforms():
  from codesign import inputs

  out = {}
  for name in FLAGS.platforms:
    p = inputs.load_platform(name)
    out[name] = p
  return out


def _sweep_all(platforms, base, stack, sizes):
  from codesign import sweeps

  return {
    name: sweeps.size_sweep(p, base, stack, sizes)
    for name, p in platforms.items()
  }


def _thresholds(platforms, base, stack, sizes, data, steps):
  """Where each platform starts spilling and becomes infeasible.

  Returns:
    platform -> {'spill_onset': b, 'infeasible_from': b}, each b None (it
    never happens in the sweep) or a bracket [lo, hi] in bytes: the
    largest size known not to, the smallest known to (lo is None if it
    happens at the first size). Brackets start as grid intervals and are
    narrowed by `steps` rounds of `sweeps.refine`.
  """
  from codesign import sweeps

  out = {}
  for name, p in platforms.items():
    d = data[name]
    found = {}
    for key, mask in (
      ('spill_onset', d['spilling']),
      ('infeasible_from', ~d['feasible']),
    ):
      j = sweeps.first_index(mask)
      if j is None:
        found[key] = None
        continue
      if j == 0:
        found[key] = [None, float(sizes[0])]
        continue

      def pred(s, p=p, key=key):
        r = sweeps.size_sweep(p, base, stack, s)
        return r['spilling'] if key == 'spill_onset' else ~r['feasible']

      found[key] = list(sweeps.refine(pred, sizes[j - 1], sizes[j], steps))
    out[name] = found
  return out


def _leaders_and_crossovers(names, sizes, data, thresholds):
  """Leader of each metric at each size, and where the leader changes.

  A change caused by a capacity limit (the old leader becomes infeasible
  or the new one feasible inside the grid interval) is placed at that
  limit, which `_thresholds` located by re-evaluating the model. Any other
  change is placed where the two platforms' log-metric curves cross under
  log-linear interpolation between the grid points (approximate; the
  `between_gb` interval is exact).
  """
  from codesign import sweeps

  feas = np.stack([data[n]['feasible'] for n in names])
  leaders, crossings = {}, {}
  for key, out_key, _ in METRICS:
    vals = np.stack([data[n][key] for n in names])
    lead = sweeps.leaders(vals, feas)
    leaders[out_key] = [None if i is None else names[i] for i in lead]
    found = []
    for c in sweeps.crossovers(lead, names, sizes):
      lo, hi = c['between']
      j = int(np.searchsorted(sizes, hi))
      lim = c['from'] and thresholds[c['from']]['infeasible_from']
      at, cause = None, 'curves cross (interpolated)'
      if lim and lim[0] is not None and lo <= lim[0] and lim[1] <= hi:
        at, cause = lim[1], f'{c["from"]} becomes infeasible'
      elif c['from'] is None or c['to'] is None:
        at, cause = hi, 'feasibility changes (grid point)'
      else:
        # log(metric_to / metric_from) is negative at lo, >= 0 at hi.
        ya = np.log(data[c['to']][key][j - 1] / data[c['from']][key][j - 1])
        yb = np.log(data[c['to']][key][j] / data[c['from']][key][j])
        t = float(np.clip(ya / (ya - yb), 0.0, 1.0)) if ya != yb else 1.0
        at = float(np.exp(np.log(lo) + t * (np.log(hi) - np.log(lo))))
      found.append(
        {
          'from': c['from'],
          'to': c['to'],
          'at_gb': at / 1e9,
          'between_gb': [lo / 1e9, hi / 1e9],
          'cause': cause,
        }
      )
    crossings[out_key] = found
  return leaders, crossings


def _story(names, sizes, data, thresholds, leaders):
  """Does the sweep show GPU-only first, then large-memory platforms?"""
  gpu = list(FLAGS.gpu_platforms)
  big = list(FLAGS.large_memory_platforms)
  if not gpu or not big:
    return {'checked': False, 'reason': 'no GPU-only or no large-memory set'}
  # Sizes at which every GPU-only platform still holds all tables in HBM,
  # and sizes at which none does (each spills or is infeasible).
  in_hbm = np.all(
    [(data[n]['hbm_fraction'] >= 1.0) & data[n]['feasible'] for n in gpu],
    axis=0,
  )
  beyond = np.all(
    [(data[n]['hbm_fraction'] < 1.0) | ~data[n]['feasible'] for n in gpu],
    axis=0,
  )
  out = {'checked': True}
  for _, key, _ in METRICS:
    lead = leaders[key]
    a = [lead[j] in gpu for j in np.flatnonzero(in_hbm)]
    b = [lead[j] in big for j in np.flatnonzero(beyond)]
    out[key] = {
      'points_all_gpu_in_hbm': len(a),
      'gpu_leads_there': int(sum(a)),
      'points_all_gpu_spill_or_fail': len(b),
      'large_memory_leads_there': int(sum(b)),
      'leaders_beyond': sorted({str(lead[j]) for j in np.flatnonzero(beyond)}),
    }
  drop = {}
  for n in gpu:
    d = data[n]
    ok = d['feasible'] & (d['hbm_fraction'] >= 1.0)
    sp = d['feasible'] & (d['hbm_fraction'] < 1.0)
    if ok.any() and sp.any():
      drop[n] = float(d['throughput'][sp].min() / d['throughput'][ok].max())
  out['gpu_worst_spilled_over_best_in_hbm_throughput'] = drop
  return out


def _bracket_text(b, what: str) -> str:
  if b is None:
    return f'never {what} in the sweep'
  lo, hi = b
  if lo is None:
    return f'{what} from the smallest size'
  if hi / lo < 1.02:
    return f'{what} from about {hi / 1e9:,.0f} GB'
  return f'{what} between {lo / 1e9:,.0f} and {hi / 1e9:,.0f} GB'


def _summary(names, sizes, data, thresholds, crossings, story) -> list[str]:
  lines = []
  for n in names:
    t = thresholds[n]
    lines.append(
      f'{n}: {_bracket_text(t["spill_onset"], "spills")}; '
      f'{_bracket_text(t["infeasible_from"], "infeasible")}.'
    )
  for _, key, label in METRICS:
    cs = crossings[key]
    if not cs:
      lines.append(f'{label}: no crossover in the sweep.')
    for c in cs:
      lines.append(
        f'{label}: leader changes from {c["from"]} to {c["to"]} at '
        f'{c["at_gb"]:,.0f} GB ({c["cause"]}).'
      )
  if story.get('checked'):
    for _, key, label in METRICS:
      s = story[key]
      lines.append(
        f'{label}: a GPU-only platform leads at {s["gpu_leads_there"]} of '
        f'{s["points_all_gpu_in_hbm"]} sizes where all GPU-only platforms '
        f'hold the tables in HBM; a large-memory platform leads at '
        f'{s["large_memory_leads_there"]} of '
        f'{s["points_all_gpu_spill_or_fail"]} sizes where every GPU-only '
        f'platform spills or fails (leaders there: '
        f'{", ".join(s["leaders_beyond"]) or "none"}).'
      )
  return lines


def _gb(bracket):
  if bracket is None:
    return None
  return [None if b is None else b / 1e9 for b in bracket]


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign import (
    cost_model,
    plotting,
    results,
    schema,
    sweeps,
  )
  from codesign import workload as wl

  _check_flags()
  base = common.load_workload()
  platforms = _load_platforms()
  workdir = results.make_workdir('compare_platforms', FLAGS.workdir)
  sizes = sweeps.log_space(
    FLAGS.min_size_gb * 1e9, FLAGS.max_size_gb * 1e9, FLAGS.points
  )
  stack = common.load_stack()
  data = _sweep_all(platforms, base, stack, sizes)
  names = list(platforms)
  steps = FLAGS.refine_steps
  thresholds = _thresholds(platforms, base, stack, sizes, data, steps)
  leaders, crossings = _leaders_and_crossovers(names, sizes, data, thresholds)
  story = _story(names, sizes, data, thresholds, leaders)
  summary = _summary(names, sizes, data, thresholds, crossings, story)

  per_platform = {}
  for n in names:
    d = data[n]
    per_platform[n] = {
      'throughput_samples_per_s': d['throughput'],
      'perf_per_usd': d['perf_per_usd'],
      'perf_per_watt': d['perf_per_watt'],
      'step_time_s': d['step_time'],
      'feasible': d['feasible'],
      'spilling': d['spilling'],
      'hbm_fraction': d['hbm_fraction'],
      'bottleneck': [cost_model.COMPONENTS[i] for i in d['bottleneck_index']],
      'capex_usd': float(d['capex'][0]),
      'power_w': float(d['power'][0]),
      'hbm_required_bytes': d['hbm_required'],
      'ddr_required_bytes': d['ddr_required'],
      'spill_onset_bracket_gb': _gb(thresholds[n]['spill_onset']),
      'infeasible_bracket_gb': _gb(thresholds[n]['infeasible_from']),
    }
  result = {
    'workload': base.name,
    'base_embedding_gb': wl.embedding_bytes(base) / 1e9,
    'sizes_gb': sizes / 1e9,
    'platforms': per_platform,
    'leaders': leaders,
    'crossovers': crossings,
    'story': story,
    'summary': summary,
  }
  metrics = []
  for j, s in enumerate(sizes):
    row = {'step': j, 'size_gb': s / 1e9}
    for n in names:
      for key, out_key, _ in METRICS:
        row[f'{n}/{out_key}'] = data[n][key][j]
      row[f'{n}/feasible'] = data[n]['feasible'][j]
      row[f'{n}/hbm_fraction'] = data[n]['hbm_fraction'][j]
    metrics.append(row)
  config = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(base),
    'stack': schema.stack_to_json(stack),
    'platforms': {n: schema.platform_to_json(p) for n, p in platforms.items()},
  }
  results.write_run(workdir, config, result, metrics, seed=FLAGS.seed)
  plotting.platform_curves(
    workdir / 'platforms.png',
    sizes / 1e9,
    [(label, {n: data[n][key] for n in names}) for key, _, label in METRICS],
    {n: data[n]['spilling'] for n in names},
    {n: data[n]['feasible'] for n in names},
    f'{base.name} with its tables scaled, auto plan per platform',
  )
  print('\n'.join(summary))


if __name__ == '__main__':
  common.run(main)
