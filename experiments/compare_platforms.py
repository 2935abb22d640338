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

Parses the flags and runs `codesign.studies.compare_platforms.run`. Writes
to --workdir: config.json, env.json, result.json, metrics.jsonl (one line
per size point), compare_platforms.csv (one row per size: each platform's
metrics, spilling and feasibility, the leaders) and platforms.png. Prints
the throughput of each platform at each size (spilling and infeasible
points marked, with the tier that overflows), then the summary (stored
under `summary` in result.json): the crossovers and whether the GPU-only
platforms lead while the tables fit in HBM and the large-memory platforms
lead beyond.
"""

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
  'points',
  16,
  'Log-spaced sizes in the sweep, ends included (>= 2).',
  lower_bound=2,
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
common.define_cpu_stack_flag()
common.define_run_flags(
  'compare_platforms',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _plot(path, result, study):
  """platforms.png: each metric against the embedding size, per platform."""
  from codesign.studies import plotting

  per = result['platforms']
  plotting.platform_curves(
    path,
    result['sizes_gb'],
    [
      (label, {n: d[key] for n, d in per.items()})
      for _, key, label in study.METRICS
    ],
    {n: d['spilling'] for n, d in per.items()},
    {n: d['feasible'] for n, d in per.items()},
    f'{result["workload"]} with its tables scaled, auto plan per platform',
  )


def main():
  common.enable_x64(FLAGS.x64)
  from codesign.boundary import inputs
  from codesign.core import results
  from codesign.spec import schema
  from codesign.studies import compare_platforms as study

  base, stack = common.load_workload(), common.load_stack()
  settings = study.Settings(
    workload=base,
    platforms=tuple(FLAGS.platforms),  # loaded by run, after the checks
    gpu_platforms=tuple(FLAGS.gpu_platforms),
    large_memory_platforms=tuple(FLAGS.large_memory_platforms),
    min_size_gb=FLAGS.min_size_gb,
    max_size_gb=FLAGS.max_size_gb,
    points=FLAGS.points,
    refine_steps=FLAGS.refine_steps,
    stack=stack,
    cpu_stack=FLAGS.cpu_stack,
  )
  result, metrics = study.run(settings, progress=common.progress_printer())
  workdir = results.make_workdir('compare_platforms', FLAGS.workdir)
  config = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(base),
    'stack': schema.stack_to_json(stack),
    'platforms': {
      n: schema.platform_to_json(inputs.load_platform(n))
      for n in FLAGS.platforms
    },
  }
  saved = {k: v for k, v in result.items() if k not in study.EXTRA_KEYS}
  results.write_run(workdir, config, saved, metrics, seed=FLAGS.seed)
  results.write_csv(workdir / 'compare_platforms.csv', *study.csv_table(result))
  _plot(workdir / 'platforms.png', result, study)
  print(study.table(result))


if __name__ == '__main__':
  common.run(main)
