r"""How good is the gradient search? Baselines on a space exhaustively
known, and on one too large to enumerate.

  python -m experiments.search_quality
  python -m experiments.search_quality --objective=throughput \
      --budget_usd=1e6 --workloads=zion_scale,rm2
  python -m experiments.search_quality --spaces=large --workloads=rm2

Parses the flags and runs `codesign.studies.search_quality.run`. For
each workload, in the spaces of --spaces:
- small: the discrete space of buildable platforms
  (`codesign.search.design_space`, plan mode `auto`, one sharding for every
  table: one plan per platform, so the space can be enumerated; millions
  of platforms with 16 nodes): exhaustive enumeration gives the true
  optimum; gradient search optimizes the continuous relaxation of the
  same space, then snaps to it (`codesign.search.gradient.gradient_search`);
  random search and CMA-ES (evosax) get as many evaluations as the
  gradient search used (a value and gradient counts as 2);
- large: the same platforms with each table's sharding searched among
  four (platforms x 4^T designs, 4^T times the small space: no
  enumeration); gradient search, random search and CMA-ES at the
  gradient search's evaluation count, judged against the best design
  any of them found or, with the small space run, the small space's
  exhaustive optimum (a design of the large space, evaluated there).
Prints the gap of each method per workload and the summaries (progress
lines go to stderr). Writes result.json (small space: per workload the
optimum, each method's best, its evaluations and gap in percent, and a
summary; `large_space`: per workload the size, the reference, each
method's best, gap and sharding, who is best and by how much, and a
summary), metrics.jsonl (the gradient searches' per-step metrics, with
`space`), search_quality.csv (small space, a row per workload),
search_quality_large.csv (large space, a row per workload), timing.json
(wall seconds per space, workload and method, and the total; kept out of
result.json so it is reproducible), config.json, env.json.
"""

import dataclasses

from absl import flags

from experiments import common

flags.DEFINE_list(
  'workloads',
  [
    'zion_scale',
    'mlperf_dlrm_dcnv2',
    'criteo_terabyte',
    'nv_dlrm_large',
    'rm2',
  ],
  'Workload presets (comma separated).',
)
flags.DEFINE_enum(
  'objective',
  'throughput_per_usd',
  ['throughput', 'throughput_per_usd', 'throughput_per_watt', 'time_to_train'],
  'What to optimize.',
)
flags.DEFINE_float('budget_usd', 1e6, 'Capex limit in USD (0: none).')
flags.DEFINE_float('power_w', 0.0, 'Power limit in W (0: none).')
flags.DEFINE_integer('max_nodes', 16, 'Largest number of nodes.', lower_bound=1)
flags.DEFINE_integer('starts', 64, 'Gradient search starts.', lower_bound=1)
flags.DEFINE_integer('steps', 200, 'Gradient search Adam steps.', lower_bound=1)
flags.DEFINE_integer('population', 32, 'CMA-ES population.', lower_bound=2)
flags.DEFINE_integer(
  'exhaustive_chunk', 65536, 'Designs per batch.', lower_bound=1
)
flags.DEFINE_list(
  'spaces',
  ['small', 'large'],
  'Comparisons to run (comma separated): small (one sharding for every '
  "table; exhaustive optimum), large (each table's sharding searched: "
  '4^T times larger; the reference is the best design found, the small '
  "space's optimum included when small runs).",
)
flags.DEFINE_list(
  'large_systems',
  ['board', 'superchip'],
  'System classes the large comparison runs on: board (the small '
  "space's parts, its optimum an entry), superchip (GH200/GB200, hosts "
  'per NVLink domain a further axis), pcie.',
)
common.define_run_flags(
  'search_quality',
  seed_help='Seed of every method.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def main():
  common.enable_x64(FLAGS.x64)
  from codesign.core import results
  from codesign.spec import workload_presets
  from codesign.studies import search_quality as study
  from codesign.studies import search_quality_large as large

  names = {f.name for f in dataclasses.fields(study.Settings)}
  settings = study.Settings(
    **{
      n: FLAGS[n].value
      for n in names - {'workloads', 'stack', 'spaces', 'large_systems'}
    },
    workloads=tuple(workload_presets.get(n) for n in FLAGS.workloads),
    spaces=tuple(FLAGS.spaces),
    large_systems=tuple(FLAGS.large_systems),
    stack=common.load_stack(),
  )
  result, metrics = study.run(settings, progress=common.progress_printer())
  workdir = results.make_workdir('search_quality', FLAGS.workdir)
  out = {k: v for k, v in result.items() if k not in study.EXTRA_KEYS}
  results.write_run(
    workdir, {'flags': common.flag_values()}, out, metrics, seed=FLAGS.seed
  )
  results.write_json(workdir / 'timing.json', result['timing'])
  if 'per_workload' in result:
    results.write_csv(workdir / 'search_quality.csv', *study.csv_table(result))
  if 'large_space' in result:
    results.write_csv(
      workdir / 'search_quality_large.csv', *large.csv_table(result)
    )
  print(study.table(result))
  print(
    f'wall time {result["timing"]["total_s"]:.0f} s (per space, workload '
    'and method in timing.json)'
  )


if __name__ == '__main__':
  common.run(main, lower='--starts (or the tables of the workload)')
