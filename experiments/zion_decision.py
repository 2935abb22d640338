r"""Would the search have proposed Zion in 2019? The paper as an experiment.

  python -m experiments.zion_decision                 # about 2-3 minutes
  python -m experiments.zion_decision --objective=throughput \
      --budget_2019_usd=2e6 --nocpu_lookups_2019

Parses the flags and runs `codesign.studies.zion_decision.run`: the
proposal search (`codesign.studies.proposal.run`) twice, era 2019 (catalog
parts available by 2019, on --workload_2019, default zion_2019: 1 TB of
fp32 tables, 3.9x the HBM of an 8-V100 node) and era today (every part,
on --workload_today, default neo_12t: Neo's 12e12 parameters, 24 TB in
fp16), each beside the presets of its era on the same workload (Zion,
Big Basin and DGX-2 in 2019; ZionEX, DGX H100 and B200, GH200 and GB200
NVL72 today), with a break-even line per era: the runner-up and the
price of the proposal's main part, or the popularity skew, at which it
would win. The question, and the default objective: the most samples/s per
USD of capex (a fleet buys many of what is chosen) for a cluster within a
budget of the order of a Zion cluster in 2019 ($1M: 4 Zion nodes at the
model's prices) and of a ZionEX pod today ($4M). With --cpu_lookups_2019
(default) the 2019 era runs the stack without UVM caching, so that the CPU
sockets can serve the DDR-resident rows, as Zion was built to (TorchRec's
UVM caching dates from 2022).

Prints a line per phase, the two proposals side by side (parts and counts,
throughput, capex, bottleneck, the largest elasticities of throughput and
that of sockets per node), the comparison with the presets, and the
verdict: is the 2019 proposal Zion-like (an accelerator node with at least
--min_sockets sockets whose DDR holds more of the tables than its HBM),
why, and whether the model agrees with the paper, with the evidence.
Writes to --workdir: config.json (flags, both resolved workloads and
stacks), env.json, result.json (`proposals`, `comparisons`, `verdict`,
`workloads`, `summary`; no wall times), metrics.jsonl (both searches' steps,
with `era`), timing.json (wall seconds per phase), zion_decision.csv (the
comparison table).
"""

import dataclasses

from absl import flags

from experiments import common

flags.DEFINE_string(
  'workload_2019',
  'zion_2019',
  'Workload of the 2019 era: a preset or a workload JSON file.',
)
flags.DEFINE_string(
  'workload_today',
  'neo_12t',
  "Workload of today's era: a preset or a workload JSON file.",
)
flags.DEFINE_enum(
  'objective',
  'throughput_per_usd',
  ['throughput', 'throughput_per_usd', 'throughput_per_watt'],
  'What each search maximizes.',
)
flags.DEFINE_float(
  'budget_2019_usd', 1e6, 'Capex limit of the 2019 cluster, USD (0: none).'
)
flags.DEFINE_float(
  'budget_today_usd', 4e6, "Capex limit of today's cluster, USD (0: none)."
)
flags.DEFINE_integer(
  'max_nodes',
  36,
  'Largest number of nodes (a GB200 tray is a node: 36 is two NVL72 racks).',
  lower_bound=1,
)
flags.DEFINE_integer('starts', 64, 'Starts per search.', lower_bound=1)
flags.DEFINE_integer('steps', 300, 'Adam steps per phase.', lower_bound=1)
common.define_sharding_flag('searched plans', searched=True)
flags.DEFINE_list(
  'trainers',
  ['accelerator', 'cpu'],
  'Kinds of platform each era searches: accelerator, cpu (CPU sockets '
  "that train alone, the paper's CPU-only baseline).",
)
flags.DEFINE_list(
  'systems',
  # codesign.search.design_space.SYSTEMS (spelled out: flags load first)
  ['board', 'superchip', 'pcie'],
  'System classes of the accelerator trainer each era searches (those its '
  'parts allow): board (SXM and OAM baseboards), superchip (GH200 and '
  'GB200 with NVLink domains across hosts), pcie (PCIe cards).',
)
flags.DEFINE_bool(
  'cpu_lookups_2019',
  True,
  "2019 era: the stack's UVM caching off, so the CPU sockets can serve "
  'the DDR-resident rows (the plan chooses how many).',
)
flags.DEFINE_list(
  'presets',
  # codesign.studies.zion_decision.PRESETS (spelled out: flags load first)
  [
    'zion',
    'big_basin',
    'dgx2_v100',
    'zionex',
    'dgx_h100',
    'dgx_b200',
    'gh200',
    'gb200_nvl72',
  ],
  'Platform presets compared, each in the era of the year it was built '
  '(2019 and before: the 2019 era; later: today), with the auto plan.',
)
flags.DEFINE_integer(
  'top_fields', 3, 'Largest throughput elasticities shown.', lower_bound=1
)
flags.DEFINE_integer(
  'min_sockets',
  4,
  'CPU sockets per node from which a node is Zion-like.',
  lower_bound=1,
  upper_bound=8,
)
common.define_run_flags(
  'zion_decision',
  x64_help='Search in float64.',
  seed_help='Random seed of the starts.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def main():
  common.enable_x64(FLAGS.x64)
  from codesign.core import results
  from codesign.studies import zion_decision as study

  names = {f.name for f in dataclasses.fields(study.Settings)}
  settings = study.Settings(
    **{n: FLAGS[n].value for n in names - {'presets', 'systems'}},
    presets=tuple(FLAGS.presets),
    systems=tuple(FLAGS.systems),
  )
  progress = common.progress_printer()
  result, metrics = study.run(
    settings, progress=progress, on_step=progress.on_step(settings.steps)
  )
  workdir = results.make_workdir('zion_decision', FLAGS.workdir)
  config = {'flags': common.flag_values(), **result['inputs']}
  out = {k: v for k, v in result.items() if k not in study.EXTRA_KEYS}
  results.write_run(workdir, config, out, metrics, seed=FLAGS.seed)
  results.write_json(workdir / 'timing.json', result['timing'])
  results.write_csv(workdir / 'zion_decision.csv', *study.csv_table(result))
  print()
  print(study.table(result))


if __name__ == '__main__':
  common.run(main, lower='--starts (or the tables of the workload)')
