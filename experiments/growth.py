r"""Design for where the model is going, not where it is.

  python -m experiments.growth
  python -m experiments.growth --factors=1,3,9 --budget_usd=3e6

Parses the flags and runs `codesign.studies.growth.run`. Recommendation
models grow fast (about 3x compute a year). The workload is
grown by each of --factors in embedding size (every table's rows) and in
dense compute (hidden MLP widths, so that dense FLOPs per sample grow by
the same factor; `codesign.studies.sweeps.grow`). Under one capex budget,
searches run at once (one vmapped augmented-Lagrangian Adam loop over the
search's design space, auto plan, the settings of `codesign.search.gradient`):
  - one per factor, maximizing that grown workload's throughput alone (the
    first factor's design is the one tuned for today);
  - the horizon design, maximizing the mean log-throughput over all
    factors and required to hold every grown workload.
Every found design is then evaluated on every grown workload. The regret
of a design at a factor is log(best throughput found for that factor) -
log(its throughput); a design that cannot hold a grown workload has
infinite regret there. Prints each design's throughput per factor (the
reason beside a NO) and a summary comparing the mean regret of the
horizon design with that of the design tuned for today.

Writes to --workdir: config.json, env.json, result.json, metrics.jsonl (per
Adam step, each search's best feasible objective so far), growth.csv (one
row per factor: every design's throughput and regret) and growth.png
(throughput of the today-tuned and the horizon design, and the best found
per factor, against the growth factor; a missing point is a design that
cannot hold that workload).
"""

import dataclasses

import numpy as np
from absl import flags

from experiments import common

flags.DEFINE_list(
  'factors',
  ['1', '2', '4', '8'],
  'Growth factors, increasing, starting at 1 (today).',
)
flags.DEFINE_float('budget_usd', 1e6, 'Capex limit of every design, USD.')
flags.DEFINE_integer(
  'max_nodes', 16, 'Largest node count of the space.', lower_bound=1
)
common.define_sharding_flag('searched designs')
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
common.define_input_flags(
  workload='zion_scale',
  override='workload,stack',
  workload_help="Today's workload; its tables grow by --factors.",
)
common.define_run_flags(
  'growth',
  x64_help='Search in float64.',
  seed_help='Seed of the uniform starts.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _factors() -> tuple[float, ...]:
  """--factors as numbers (the study checks the rest)."""
  from codesign.core.errors import InputError

  try:
    return tuple(float(x) for x in FLAGS.factors)
  except ValueError:
    raise InputError(
      f'--factors must be numbers, got {",".join(FLAGS.factors)}'
    ) from None


def main():
  common.enable_x64(FLAGS.x64)
  from codesign.core import results
  from codesign.spec import schema
  from codesign.studies import growth, plotting

  factors = _factors()
  names = {f.name for f in dataclasses.fields(growth.Settings)}
  settings = growth.Settings(
    **{n: FLAGS[n].value for n in names - {'workload', 'stack', 'factors'}},
    workload=common.load_workload(),
    stack=common.load_stack(),
    factors=factors,
  )
  result, metrics = growth.run(settings, progress=common.progress_printer())
  workdir = results.make_workdir('growth', FLAGS.workdir)
  config = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(settings.workload),
    'stack': schema.stack_to_json(settings.stack),
  }
  out = {k: v for k, v in result.items() if k not in growth.EXTRA_KEYS}
  results.write_run(workdir, config, out, metrics, seed=FLAGS.seed)
  results.write_csv(workdir / 'growth.csv', *growth.csv_table(result))
  plotting.lines(
    workdir / 'growth.png',
    np.array(factors),
    growth.plot_curves(result),
    f'{result["workload"]} grown in embeddings and compute, capex <= '
    f'${FLAGS.budget_usd:,.0f}',
    'growth factor',
    'throughput (samples/s)',
    logx=True,
    logy=True,
  )
  print(growth.table(result))


if __name__ == '__main__':
  common.run(main, lower='--starts (or the tables of the workload)')
