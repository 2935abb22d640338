r"""How much NIC bandwidth keeps scale-out efficient, and where time goes.

  python -m experiments.scale_out
  python -m experiments.scale_out --platform=dgx_h100 --scaling=strong \
      --nodes=1,2,4,8

For each node count in --nodes, the platform gets that many nodes (weak
scaling: the batch per node of the workload on the preset stays; strong:
the global batch stays) and the auto plan for that size. Scaling
efficiency is throughput / (nodes x single-node throughput). The NIC
bandwidth per accelerator needed to keep efficiency at or above --target
is found by multisection in log bandwidth over one batched evaluation per
round (NICs per node as in the platform; their line rate varies). The
breakdown of the step at the platform's own NIC bandwidth shows where time
goes as nodes grow.

Writes to --workdir: config.json, env.json, result.json, metrics.jsonl (one
line per node count), nic_required.png (needed NIC Gb/s per accelerator
against nodes, with the platform's own as a dotted line; a missing point
means the target is out of reach inside the bounds), efficiency.png
(efficiency at the platform's NIC bandwidth) and breakdown.png (share of
each step component per node count, before overlap).
"""

import jax
import numpy as np
from absl import flags

from experiments import common

common.define_input_flags(
  workload='zion_scale',
  platform='zionex',
  plan=True,
  override='workload,platform,plan,stack',
  device_profile=True,
)
flags.DEFINE_list(
  'nodes',
  ['1', '2', '4', '8', '16', '32', '64'],
  'Node counts, increasing, from 1 (1 is the efficiency reference).',
)
flags.DEFINE_enum(
  'scaling',
  'weak',
  ['weak', 'strong'],
  'weak: keep the batch per node of the workload on the preset platform; '
  'strong: keep the global batch.',
)
flags.DEFINE_float('target', 0.8, 'Scaling efficiency to keep, in (0, 1].')
flags.DEFINE_float(
  'min_nic_gbit_per_s',
  10.0,
  'Lowest per-NIC line rate searched, Gb/s (at least the hardware bound '
  '8 Gb/s).',
)
flags.DEFINE_float(
  'max_nic_gbit_per_s',
  8000.0,
  'Highest per-NIC line rate searched, Gb/s (at most the hardware bound '
  '8000 Gb/s).',
)
flags.DEFINE_enum(
  'sharding',
  'auto',
  [
    'auto',
    'table_wise',
    'row_wise',
    'table_row_wise',
    'column_wise',
    'data_parallel',
  ],
  'Sharding of every table (auto: the plan.make rule, the fastest of '
  'splitting big tables, big and hot tables, or none, table-row-wise on '
  'several nodes).',
)
flags.DEFINE_integer(
  'rounds', 3, 'Rounds of 32-fold multisection in log bandwidth (>= 1).'
)
common.define_run_flags('scale_out')
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _node_counts() -> list[int]:
  from codesign.errors import InputError

  try:
    counts = [int(x) for x in FLAGS.nodes]
  except ValueError:
    raise InputError(
      f'--nodes must be integers, got {",".join(FLAGS.nodes)}'
    ) from None
  if not counts or counts[0] != 1:
    raise InputError('--nodes must start at 1 (the efficiency reference)')
  if any(b <= a for a, b in zip(counts, counts[1:], strict=False)):
    raise InputError('--nodes must be strictly increasing')
  if counts[-1] > 1024:
    raise InputError(f'--nodes may not exceed 1024, got {counts[-1]}')
  return counts


def _check_flags():
  from codesign import hardware
  from codesign.errors import InputError

  if not 0 < FLAGS.target <= 1:
    raise InputError(f'--target must lie in (0, 1], got {FLAGS.target}')
  lo_b, hi_b = (x * 8 / 1e9 for x in hardware.BOUNDS['nic.bandwidth'])
  lo, hi = FLAGS.min_nic_gbit_per_s, FLAGS.max_nic_gbit_per_s
  if not lo_b <= lo < hi <= hi_b:
    raise InputError(
      f'--min_nic_gbit_per_s and --max_nic_gbit_per_s need {lo_b:g} <= min '
      f'< max <= {hi_b:g}, got {lo:g} and {hi:g}'
    )
  if FLAGS.rounds < 1:
    raise InputError(f'--rounds must be at least 1, got {FLAGS.rounds}')


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign import (
    cost_model,
    inputs,
    planner,
    plotting,
    results,
    schema,
    sweeps,
  )
  from codesign.errors import InputError

  counts = _node_counts()
  _check_flags()
  if FLAGS.plan != 'auto':
    raise InputError(
      '--plan must be auto here: each node count gets its own auto plan'
    )
  w0, p0, _, stack = inputs.resolve(
    FLAGS.workload,
    FLAGS.platform,
    'auto',
    FLAGS.override,
    device_profile=FLAGS.device_profile,
    stack=FLAGS.stack,
  )
  if p0.trainer == 'cpu':
    raise InputError(
      f'platform {p0.name} is a CPU trainer; NIC bandwidth per accelerator '
      'needs an accelerator platform'
    )
  workdir = results.make_workdir('scale_out', FLAGS.workdir)
  weak = FLAGS.scaling == 'weak'
  to_bps = 1e9 / 8.0
  lo, hi = FLAGS.min_nic_gbit_per_s * to_bps, FLAGS.max_nic_gbit_per_s * to_bps
  nic_count = float(p0.nic.count)
  accels = float(p0.accelerators_per_node)
  per_accel = nic_count / accels  # NIC line rate -> per-accelerator share
  own_bw = float(p0.nic.bandwidth)

  rows, single = [], None
  for n in counts:
    p, w = sweeps.with_nodes(p0, w0, n, weak=weak)
    plan = planner.make(w, p, stack, sharding=FLAGS.sharding)
    own = sweeps.nic_sweep(p, w, stack, plan, [own_bw])
    own = {k: v[0] for k, v in own.items()}
    if single is None:
      single = float(own['throughput'])
    need = sweeps.required_nic_bandwidth(
      p, w, stack, plan, single, FLAGS.target, lo, hi, FLAGS.rounds
    )
    bw = need['bandwidth']
    breakdown = dict(zip(cost_model.COMPONENTS, own['breakdown'], strict=True))
    total = float(np.sum(own['breakdown']))
    rows.append(
      {
        'nodes': n,
        'global_batch': w.global_batch,
        'feasible': bool(own['feasible']),
        'hbm_fraction': float(np.mean(plan.hbm_fraction)),
        'throughput_samples_per_s': own['throughput'],
        'efficiency': float(own['throughput']) / (n * single),
        'bottleneck': cost_model.COMPONENTS[int(own['bottleneck_index'])],
        'breakdown_s': breakdown,
        'breakdown_share': {k: v / total for k, v in breakdown.items()},
        'required_status': need['status'],
        'required_nic_gbit_per_s_per_accelerator': None
        if bw is None
        else bw / to_bps * per_accel,
        'required_bracket_gbit_per_s_per_accelerator': [
          None if x is None else x / to_bps * per_accel for x in need['bracket']
        ],
        'efficiency_at_max_bandwidth': need['efficiency_at_hi'],
      }
    )

  own_gbps = own_bw / to_bps * per_accel
  summary = []
  for r in rows[1:]:
    need = r['required_nic_gbit_per_s_per_accelerator']
    if r['required_status'] == 'unreachable':
      text = (
        f'{r["nodes"]} nodes: {FLAGS.target:.0%} efficiency is out of reach '
        f'(at most {r["efficiency_at_max_bandwidth"]:.0%} at '
        f'{FLAGS.max_nic_gbit_per_s * per_accel:,.0f} Gb/s per accelerator)'
      )
    elif r['required_status'] == 'below_range':
      text = (
        f'{r["nodes"]} nodes: any NIC in the range keeps '
        f'{FLAGS.target:.0%} efficiency'
      )
    else:
      text = (
        f'{r["nodes"]} nodes: needs {need:,.1f} Gb/s per accelerator for '
        f'{FLAGS.target:.0%} efficiency'
      )
    summary.append(
      text + f'; with its own {own_gbps:,.0f} Gb/s: efficiency '
      f'{r["efficiency"]:.0%}, bottleneck {r["bottleneck"]}.'
    )
  result = {
    'workload': w0.name,
    'platform': p0.name,
    'scaling': FLAGS.scaling,
    'sharding': FLAGS.sharding,
    'target_efficiency': FLAGS.target,
    'own_nic_gbit_per_s_per_accelerator': own_gbps,
    'single_node_throughput_samples_per_s': single,
    'per_node_count': rows,
    'summary': summary,
  }
  metrics = [
    {
      'step': i,
      'nodes': r['nodes'],
      'efficiency': r['efficiency'],
      'throughput_samples_per_s': r['throughput_samples_per_s'],
      'required_nic_gbit_per_s_per_accelerator': r[
        'required_nic_gbit_per_s_per_accelerator'
      ],
      **{f'share/{k}': v for k, v in r['breakdown_share'].items()},
    }
    for i, r in enumerate(rows)
  ]
  config = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(w0),
    'platform': schema.platform_to_json(p0),
    'stack': schema.stack_to_json(stack),
  }
  results.write_run(workdir, config, result, metrics, seed=FLAGS.seed)

  x = np.array(counts)
  need = np.array(
    [
      np.nan
      if r['required_nic_gbit_per_s_per_accelerator'] is None
      else r['required_nic_gbit_per_s_per_accelerator']
      for r in rows
    ]
  )
  plotting.lines(
    workdir / 'nic_required.png',
    x[1:],
    {f'needed for {FLAGS.target:.0%} efficiency': need[1:]},
    f'{w0.name} on {p0.name} ({FLAGS.scaling} scaling)',
    'nodes',
    'NIC Gb/s per accelerator',
    logx=True,
    logy=True,
    hline=own_gbps,
  )
  plotting.lines(
    workdir / 'efficiency.png',
    x,
    {
      f'at {own_gbps:,.0f} Gb/s per accelerator': np.array(
        [r['efficiency'] for r in rows]
      )
    },
    f'{w0.name} on {p0.name} ({FLAGS.scaling} scaling)',
    'nodes',
    'scaling efficiency',
    logx=True,
    hline=FLAGS.target,
  )
  used = [
    k
    for k in cost_model.COMPONENTS
    if max(r['breakdown_share'][k] for r in rows) > 0.005
  ]
  plotting.stacked_shares(
    workdir / 'breakdown.png',
    x,
    {k: np.array([r['breakdown_share'][k] for r in rows]) for k in used},
    f'Where the step goes: {w0.name} on {p0.name}, '
    f'{own_gbps:,.0f} Gb/s per accelerator',
    'nodes',
  )
  print('\n'.join(summary))


if __name__ == '__main__':
  common.run(main)
