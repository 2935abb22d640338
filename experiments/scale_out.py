r"""How much NIC bandwidth keeps scale-out efficient, and where time goes.

  python -m experiments.scale_out
  python -m experiments.scale_out --platform=dgx_h100 --scaling=strong \
      --nodes=1,2,4,8

Parses the flags and runs `codesign.studies.scale_out.run`: for each node
count in --nodes, the platform gets that many nodes (weak
scaling: the batch per node of the workload on the preset stays; strong:
the global batch stays) and the auto plan for that size. Scaling
efficiency is throughput per node over the reference's: the smallest node
count whose HBM holds every table (a node that spills its tables to DDR
would make more nodes look faster than linear: holding them is reported
apart as the capacity effect). Per node count it also prints the time to
train: the samples to the accuracy target at that global batch (MLPerf's
reference convergence points, extrapolation marked) over the throughput
times the goodput, the batch per accelerator against the range the
stack's published cases measured, and where the time to train stops
falling. The NIC
bandwidth per accelerator needed to keep efficiency at or above --target
is found by multisection in log bandwidth over one batched evaluation per
round (NICs per node as in the platform; their line rate varies). The
breakdown of the step at the platform's own NIC bandwidth shows where time
goes as nodes grow.

Prints per node count the throughput, efficiency, needed NIC bandwidth,
the bottleneck's share of the step and feasibility (with the tier that
overflows), the step components in ms, the summary, the term that stops
the scaling (at the first node count below --target: the component that
grew most beyond linear scaling, with its share of the step) and the
public cases measured on this platform, workload and stack (measured and
modelled samples/s at each case's own batch, with the source). Writes to
--workdir: config.json, env.json, result.json (with `measured_cases` and
`scaling_stopped_by`), metrics.jsonl (one line per node count),
scale_out.csv (one row per node count, components in seconds),
throughput.png (the model's samples/s against nodes, linear scaling of
one node dashed, and the matching public cases as squares, each beside
the model's prediction at its own batch as an x), nic_required.png
(needed NIC Gb/s per accelerator against nodes, with the platform's own
as a dotted line; a missing point means the target is out of reach
inside the bounds), efficiency.png (efficiency at the platform's NIC
bandwidth, with the target, and the multi-node public cases' efficiency
against their one-node case, measured and modelled) and breakdown.png
(each step component per node count in ms, stacked, and as a share of
their sum; components are summed before overlap).
"""

import dataclasses

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
    'hybrid',
    'table_wise',
    'row_wise',
    'table_row_wise',
    'column_wise',
    'data_parallel',
  ],
  'Sharding of every table (auto: the plan.make rule, the fastest of '
  'splitting big tables, big and hot tables, or none, table-row-wise on '
  "several nodes; hybrid: HugeCTR's hybrid embedding, each table's "
  'frequent rows data-parallel, for a stack that runs it, e.g. '
  'hugectr@2022).',
)
flags.DEFINE_integer(
  'rounds',
  3,
  'Rounds of 32-fold multisection in log bandwidth (>= 1).',
  lower_bound=1,
)
flags.DEFINE_enum(
  'with_failures',
  'auto',
  ['auto', 'true', 'false'],
  'The time to train counts the goodput (checkpoints at the Young/Daly '
  'interval, lost work, restarts; per-GPU and per-node failure rates of '
  'Llama 3); auto: above 64 accelerators.',
)
flags.DEFINE_enum(
  'checkpoint',
  'full',
  ['full', 'incremental'],
  'How checkpoints are written: full, or incremental and quantized '
  '(Check-N-Run).',
)
flags.DEFINE_float(
  'samples',
  1e9,
  'Samples to train, for the time to train of a workload without a '
  'samples-to-target curve (MLPerf DLRM v1 and DCNv2 have one).',
)
common.define_run_flags('scale_out')
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _node_counts() -> tuple[int, ...]:
  from codesign.core.errors import InputError

  try:
    return tuple(int(x) for x in FLAGS.nodes)
  except ValueError:
    raise InputError(
      f'--nodes must be integers, got {",".join(FLAGS.nodes)}'
    ) from None


def _inputs():
  """(workload, platform, stack) of the flags; the plan must be auto."""
  from codesign.core.errors import InputError

  if FLAGS.plan != 'auto':
    raise InputError(
      '--plan must be auto here: each node count gets its own auto plan'
    )
  # No plan is made here (the study plans per node count).
  from codesign.boundary import inputs

  overrides = FLAGS.override
  inputs.split_overrides(overrides)  # a malformed override fails first
  p = inputs.load_platform(FLAGS.platform, overrides, FLAGS.device_profile)
  return (
    inputs.load_workload(FLAGS.workload, overrides),
    p,
    # No --stack: the platform trainer's default, as evaluate.
    inputs.load_stack(FLAGS.stack, overrides, p.trainer),
  )


def _plots(workdir, result, study):
  """nic_required.png, efficiency.png and breakdown.png."""
  from codesign.studies import plotting

  rows = result['per_node_count']
  x = np.array([r['nodes'] for r in rows])
  own = result['own_nic_gbit_per_s_per_accelerator']
  target = result['target_efficiency']
  title = (
    f'{result["workload"]} on {result["platform"]} '
    f'({result["scaling"]} scaling)'
  )
  need = [r['required_nic_gbit_per_s_per_accelerator'] for r in rows]
  label = f'needed for {target:.0%} efficiency'
  if any(r['required_status'] == 'below_range' for r in rows[1:]):
    # Such a point sits at the lowest rate searched: an upper bound.
    label += '; at the lowest rate searched: any NIC is enough'
  plotting.lines(
    workdir / 'nic_required.png',
    x[1:],
    {label: np.array(need[1:], dtype=float)},
    title,
    'nodes',
    'NIC Gb/s per accelerator',
    logx=True,
    logy=True,
    hline=own,
    hline_label=f'own NIC: {own:,.0f} Gb/s per accelerator',
    gap_reason='target out of reach in the searched range',
  )
  cases = [c for c in result['measured_cases'] if c['nodes'] > 1]
  plotting.lines(
    workdir / 'efficiency.png',
    x,
    {
      f'model at the own NIC, {own:,.0f} Gb/s per accelerator': np.array(
        [r['efficiency'] for r in rows]
      )
    },
    title,
    'nodes',
    "scaling efficiency\n(throughput per node / the reference's)",
    logx=True,
    hline=target,
    hline_label=f'target {target:.0%}',
    points=_case_points(plotting, result, cases, '_efficiency'),
    note=_case_note(result, 'each case against the one-node case '),
  )
  _throughput_plot(workdir, result, title)
  shown = study.shown_components(result)
  plotting.step_breakdown(
    workdir / 'breakdown.png',
    x,
    {k: np.array([r['breakdown_s'][k] for r in rows]) for k in shown},
    f'Where the step goes: {title}, {own:,.0f} Gb/s per accelerator',
    'nodes',
    step_s=np.array([study.step_time_s(r) for r in rows]),
  )


def _case_text(case, by_case):
  """A case's label: its name and batch per accelerator, and its
  reference case's where an efficiency needs one."""
  text = f'{case["case"]}: {case["batch_per_accelerator"]:,.0f}/accel'
  ref = by_case.get(case.get('reference_case'))
  if ref is None or ref is case:
    return text
  return f'{text} vs {ref["case"]}: {ref["batch_per_accelerator"]:,.0f}/accel'


def _case_points(plotting, result, cases, suffix):
  """(measured, model) markers of the public cases in `cases` that have
  `measured{suffix}` (efficiency: a one-node reference), or ()."""
  cases = [c for c in cases if c[f'measured{suffix}'] is not None]
  if not cases:
    return ()
  x = np.array([c['nodes'] for c in cases])
  by_case = {c['case']: c for c in result['measured_cases']}
  if suffix != '_efficiency':  # no reference case to name
    by_case = {}
  texts = tuple(_case_text(c, by_case) for c in cases)
  return (
    plotting.Points(
      x,
      np.array([c[f'measured{suffix}'] for c in cases]),
      'measured: public cases at their own batch',
      's',
      'C3',
      texts,
    ),
    plotting.Points(
      x,
      np.array([c[f'model{suffix}'] for c in cases]),
      'model at each case (its batch, plan and stack; the shipped fit)',
      'x',
      'C2',
    ),
  )


def _case_note(result, what=''):
  """The line under a plot that says which batch the line and the
  markers are at ('' without cases)."""
  if not result['measured_cases']:
    return ''
  rows = result['per_node_count']
  if result['scaling'] == 'weak':
    batch = f'{rows[0]["global_batch"]:,} samples per node'
  else:
    batch = f'a global batch of {rows[0]["global_batch"]:,}'
  return (
    f'Line: the model at {batch} ({result["scaling"]} scaling). Markers: '
    f'{what}at its own batch (calibration_cases.json); compare a case '
    'with its x, not with the line.'
  )


def _throughput_plot(workdir, result, title):
  """throughput.png: the model's samples/s against nodes with linear
  scaling of one node, and the measured public cases beside it."""
  from codesign.studies import plotting

  rows = result['per_node_count']
  x = np.array([r['nodes'] for r in rows])
  own = result['own_nic_gbit_per_s_per_accelerator']
  single = result['single_node_throughput_samples_per_s']
  plotting.lines(
    workdir / 'throughput.png',
    x,
    {
      f'model at the own NIC, {own:,.0f} Gb/s per accelerator': np.array(
        [float(r['throughput_samples_per_s']) for r in rows]
      )
    },
    title,
    'nodes',
    'throughput, samples/s',
    logx=True,
    logy=True,
    reference={'linear scaling of one node': x * float(single)},
    points=_case_points(
      plotting, result, result['measured_cases'], '_samples_per_s'
    ),
    note=_case_note(result),
  )


def main():
  common.enable_x64(FLAGS.x64)
  from codesign.core import results
  from codesign.spec import schema
  from codesign.studies import scale_out as study

  # Checked before the inputs load (the auto plan costs seconds); the
  # names are replaced by the resolved inputs below.
  settings = study.Settings(
    nodes=_node_counts(),
    scaling=FLAGS.scaling,
    target=FLAGS.target,
    min_nic_gbit_per_s=FLAGS.min_nic_gbit_per_s,
    max_nic_gbit_per_s=FLAGS.max_nic_gbit_per_s,
    sharding=FLAGS.sharding,
    rounds=FLAGS.rounds,
    with_failures=FLAGS.with_failures,
    checkpoint=FLAGS.checkpoint,
    samples=FLAGS.samples,
  )
  w0, p0, stack = _inputs()
  settings = dataclasses.replace(
    settings, workload=w0, platform=p0, stack=stack
  )
  result, metrics = study.run(settings, progress=common.progress_printer())
  workdir = results.make_workdir('scale_out', FLAGS.workdir)
  config = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(w0),
    'platform': schema.platform_to_json(p0),
    'stack': schema.stack_to_json(stack),
  }
  saved = {k: v for k, v in result.items() if k not in study.EXTRA_KEYS}
  results.write_run(workdir, config, saved, metrics, seed=FLAGS.seed)
  results.write_csv(workdir / 'scale_out.csv', *study.csv_table(result))
  _plots(workdir, result, study)
  print(study.table(result))


if __name__ == '__main__':
  common.run(main)
