r"""Propose the platform to build for a DLRM, under the buyer's limits.

  python -m experiments.propose                      # zion_scale, perf/$
  python -m experiments.propose --objective=throughput --budget_usd=2e6 \
      --power_w=40000 --max_nodes=8

Parses the flags and runs `codesign.studies.proposal.run` (which runs
`codesign.search.gradient_search`: augmented-Lagrangian Adam over a
relaxation of catalog parts and counts, then snapping to buildable
platforms); prints the proposal beside the platform presets on the same
workload with the bottleneck of each, and writes to --workdir:
  result.json    proposal, continuous_optimum, presets, search (no
                 timings: the same flags and seed give the same bytes);
  metrics.jsonl  per step: best feasible objective and constraint
                 violations over the starts;
  proposal.json  workload, platform and plan sections, so that
                 `python -m experiments.evaluate --workload=RUN/proposal.json
                 --platform=RUN/proposal.json --plan=RUN/proposal.json`
                 gives the proposal's figures;
  timing.json    wall-clock seconds (compile included) per phase;
  config.json, env.json.
A request no buildable platform meets ends with one sentence naming the
constraint and by how much, exit status 2, and no files.
"""

import time

import jax
from absl import flags

from codesign.errors import InputError
from experiments import common

flags.DEFINE_enum(
  'objective',
  'throughput_per_usd',
  ['throughput', 'throughput_per_usd', 'throughput_per_watt', 'time_to_train'],
  'What to optimize.',
)
flags.DEFINE_float(
  'budget_usd', 1e6, 'Capex limit of the cluster in USD (0: no limit).'
)
flags.DEFINE_float(
  'power_w', 0.0, 'Power limit of the cluster at TDP in W (0: no limit).'
)
flags.DEFINE_integer('max_nodes', 16, 'Largest number of nodes.')
flags.DEFINE_float(
  'samples', 1e9, 'Samples to train, for --objective=time_to_train.'
)
flags.DEFINE_integer('starts', 64, 'Starts run at once.')
flags.DEFINE_integer('steps', 300, 'Adam steps per phase.')
common.define_sharding_flag('searched plans')
flags.DEFINE_list(
  'presets',
  # codesign.studies.proposal.PRESETS (spelled out: flags load first)
  [
    'zion',
    'zionex',
    'dgx_h100',
    'dgx_h200',
    'dgx_a100_80gb',
    'dgx_a100_40gb',
    'p4d',
    'dgx2_v100',
    'dgx1_v100',
    'big_basin',
    'cpu_2s',
  ],
  'Platform presets evaluated beside the proposal (auto plan).',
)
common.define_input_flags(
  workload='zion_scale',
  override='workload,stack',
)
common.define_run_flags(
  'propose',
  x64_help='Search in float64.',
  seed_help='Random seed of the starts.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign import results
  from codesign.studies import proposal

  t_start = time.perf_counter()
  for key in ('budget_usd', 'power_w'):
    if getattr(FLAGS, key) < 0:
      raise InputError(f'--{key} must not be negative')
  settings = proposal.Settings(
    workload=common.load_workload(),
    objective=FLAGS.objective,
    budget_usd=FLAGS.budget_usd,
    power_w=FLAGS.power_w,
    max_nodes=FLAGS.max_nodes,
    samples=FLAGS.samples,
    starts=FLAGS.starts,
    steps=FLAGS.steps,
    seed=FLAGS.seed,
    sharding=FLAGS.sharding,
    presets=tuple(FLAGS.presets),
    stack=common.load_stack(),
  )

  def progress(step, m):
    best = m['objective']
    best = f'{best:.5g}' if best is not None else 'none yet'
    print(
      f'[{time.perf_counter() - t_start:6.1f} s] {m["phase"]:10s} step '
      f'{step:4d}/{FLAGS.steps}: best feasible {best} '
      f'{proposal.OBJECTIVE_UNITS[m["searching"]]}; '
      f'{m["feasible_starts"]} feasible starts; min violation '
      f'{m["violation_min"]:.3g}',
      flush=True,
    )

  result, metrics = proposal.run(
    settings, progress=progress, log=lambda s: print(s, flush=True)
  )
  proposal_json = result.pop('proposal_json')
  timing = result.pop('timing')
  workdir = results.make_workdir('propose', FLAGS.workdir)
  config_json = {
    'flags': common.flag_values(),
    'workload': proposal_json['workload'],
    'stack': proposal_json['stack'],
  }
  results.write_run(
    workdir, config_json, result, metrics=metrics, seed=FLAGS.seed
  )
  results.write_json(workdir / 'proposal.json', proposal_json)
  results.write_json(workdir / 'timing.json', timing)

  print()
  print(proposal.table(result))
  print(
    f'search: {result["search"]["evaluations"]:,} evaluations in '
    f'{timing["search_wall_s"]:.1f} s (compile included); total '
    f'{timing["total_wall_s"]:.1f} s'
  )


if __name__ == '__main__':
  common.run(main)
