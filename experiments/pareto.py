r"""The throughput frontier against capex and against power.

  python -m experiments.pareto
  python -m experiments.pareto --workload=mlperf_dlrm_v1 --budgets=12 \
      --starts=16 --steps=300

Parses the flags and runs `codesign.studies.pareto.run`: many
budget-constrained hardware searches at once: --budgets capex
limits (log-spaced from --min_budget_usd to --max_budget_usd) and as many
power limits, each with --starts starts, all in one vmapped
augmented-Lagrangian Adam loop over the search's design space
(`codesign.search.design_space`, auto plan, --sharding for every table; the
method and settings of `codesign.search.gradient`), maximizing throughput. The
best starts of each search are snapped to buildable platforms. The frontier is
the set of found buildable designs that no other found design beats on
both throughput and cost (capex, or power). The platform presets are
evaluated on the same workload (auto plan with the same sharding, fitted
into HBM) and placed against it.

Prints every search's best design (the reason beside a NO), the presets
against the frontier and a summary. Writes to --workdir: config.json,
env.json, result.json, metrics.jsonl (per Adam step, each search's best
feasible throughput so far among its starts), pareto.csv (one row per
search: its limit, best buildable design, figures, frontier membership)
and frontier.png: left, throughput against capex; right, against power
(log-log). Dots joined by a line are the frontier, each labelled with its
design; squares are the presets (a preset below the line costs more than
a searched design of the same throughput; a hollow square is a preset
whose tables do not fit).
"""

import dataclasses

from absl import flags

from experiments import common

flags.DEFINE_integer(
  'max_nodes', 16, 'Largest node count of the space.', lower_bound=1
)
common.define_sharding_flag('searched designs')
flags.DEFINE_float('min_budget_usd', 1e5, 'Smallest capex limit, USD.')
flags.DEFINE_float('max_budget_usd', 1e7, 'Largest capex limit, USD.')
flags.DEFINE_float('min_power_w', 5e3, 'Smallest power limit, W.')
flags.DEFINE_float('max_power_w', 5e5, 'Largest power limit, W.')
flags.DEFINE_integer(
  'budgets',
  8,
  'Limits per kind (capex and power), log-spaced (>= 2).',
  lower_bound=2,
)
flags.DEFINE_integer('starts', 8, 'Starts per search (>= 1).', lower_bound=1)
flags.DEFINE_integer(
  'steps', 150, 'Adam steps per search (>= 1).', lower_bound=1
)
flags.DEFINE_integer(
  'snap_top',
  4,
  'Best starts per search whose roundings are evaluated.',
  lower_bound=1,
)
flags.DEFINE_list(
  'presets',
  ['cpu_2s', 'big_basin', 'zion', 'zionex', 'dgx_a100_80gb', 'dgx_h100'],
  'Platform presets drawn against the frontier (may be empty).',
)
common.define_input_flags(
  workload='zion_scale',
  override='workload,stack',
)
common.define_cpu_stack_flag()
common.define_run_flags(
  'pareto',
  x64_help='Search in float64.',
  seed_help='Seed of the uniform starts.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def main():
  common.enable_x64(FLAGS.x64)
  from codesign.boundary import inputs
  from codesign.core import results
  from codesign.spec import schema
  from codesign.studies import pareto, plotting

  names = {f.name for f in dataclasses.fields(pareto.Settings)}
  settings = pareto.Settings(
    **{n: FLAGS[n].value for n in names - {'workload', 'stack', 'presets'}},
    workload=common.load_workload(),
    stack=common.load_stack(),
    presets=tuple(FLAGS.presets),
  )
  result, metrics = pareto.run(settings, progress=common.progress_printer())
  workdir = results.make_workdir('pareto', FLAGS.workdir)
  config = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(settings.workload),
    'stack': schema.stack_to_json(settings.stack),
    'presets': {
      n: schema.platform_to_json(inputs.load_platform(n))
      for n in settings.presets
    },
  }
  out = {k: v for k, v in result.items() if k not in pareto.EXTRA_KEYS}
  results.write_run(workdir, config, out, metrics, seed=FLAGS.seed)
  results.write_csv(workdir / 'pareto.csv', *pareto.csv_table(result))
  plotting.frontier(
    workdir / 'frontier.png',
    pareto.plot_panels(result),
    pareto.plot_title(result),
  )
  print(pareto.table(result))


if __name__ == '__main__':
  common.run(main, lower='--starts (or the tables of the workload)')
