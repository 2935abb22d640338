r"""Propose the platform to build for a DLRM, under the buyer's limits.

  python -m experiments.propose                      # zion_scale, perf/$
  python -m experiments.propose --objective=throughput --budget_usd=2e6 \
      --power_w=40000 --max_nodes=8
  python -m experiments.propose --price=H100=22000 --price=MI300X=18000

Parses the flags and runs `codesign.studies.proposal.run` (which runs
`codesign.search.gradient.gradient_search`: augmented-Lagrangian Adam over a
relaxation of catalog parts and counts, then snapping to buildable
platforms); prints a line at the start of each phase, then the proposal
beside the platform presets on the same workload with the bottleneck of
each (and why a platform is not within the limits), the proposal's parts
with their prices, the workload assumptions that decide it and whether it
stays the best candidate when uncertain prices and the popularity skew
move, and writes to --workdir:
  result.json    proposal, continuous_optimum, presets, prices (set by
                 --price; the proposal's parts), assumptions, robustness,
                 search (no timings: the same flags and seed give the same
                 bytes);
  metrics.jsonl  per step: best feasible objective and constraint
                 violations over the starts;
  proposal.json  workload, platform and plan sections, so that
                 `python -m experiments.evaluate --workload=RUN/proposal.json
                 --platform=RUN/proposal.json --plan=RUN/proposal.json`
                 gives the proposal's figures;
  timing.json    wall-clock seconds (compile included) per phase;
  propose.csv    the printed table: proposal, continuous optimum, presets
                 (figures, objective, within limits and why not);
  config.json, env.json.
A request no buildable platform meets ends with one sentence naming the
constraint and by how much, exit status 2, and no files.
"""

import dataclasses

from absl import flags

from codesign.core.errors import InputError
from experiments import common

flags.DEFINE_enum(
  'objective',
  'throughput_per_usd',
  [
    'throughput',
    'throughput_per_usd',
    'throughput_per_watt',
    'time_to_train',
    'throughput_per_tco',
  ],
  'What to optimize.',
)
flags.DEFINE_float(
  'budget_usd', 1e6, 'Capex limit of the cluster in USD (0: no limit).'
)
flags.DEFINE_float(
  'power_w',
  0.0,
  'Power limit of the cluster at the wall in W (0: no limit).',
)
flags.DEFINE_integer(
  'max_nodes',
  36,
  'Largest number of nodes (a GB200 tray is a node: 36 is two NVL72 racks, '
  'or 36 eight-GPU servers).',
  lower_bound=1,
)
flags.DEFINE_float(
  'samples', 1e9, 'Samples to train, for --objective=time_to_train.'
)
flags.DEFINE_integer('starts', 64, 'Starts run at once.', lower_bound=1)
flags.DEFINE_integer('steps', 300, 'Adam steps per phase.', lower_bound=1)
common.define_sharding_flag('searched plans', searched=True)
flags.DEFINE_list(
  'presets',
  # codesign.studies.proposal.PRESETS (spelled out: flags load first)
  [
    'gb200_nvl72',
    'gh200',
    'dgx_b200',
    'mi300x_8',
    'dgx_h200',
    'dgx_h100',
    'h100_pcie_8',
    'zion',
    'zionex',
    'dgx_a100_80gb',
    'big_basin',
    'cpu_2s',
  ],
  'Platform presets evaluated beside the proposal (auto plan).',
)
flags.DEFINE_list(
  'exclude_parts',
  [],
  'Catalog parts the search may not use: names or their beginnings '
  "(H100, EPYC, 'Xeon-Platinum-8480+'); may be empty.",
)
flags.DEFINE_list(
  'only_parts',
  [],
  'Catalog parts the search may use, per part axis it names parts of '
  '(--only_parts=H100,A100 keeps every CPU); may be empty.',
)
flags.DEFINE_multi_string(
  'price',
  [],
  'PART=USD: the price of one catalog part (a name or the beginning of '
  'one, as --only_parts; an accelerator with its HBM) in place of the '
  "catalog's, for the search, the proposal and the presets. Repeatable, "
  'or comma-separated; may be empty.',
)
flags.DEFINE_list(
  'trainers',
  ['accelerator', 'cpu'],
  'Kinds of platform searched, each in its own design space: accelerator '
  '(catalog accelerators with CPU hosts), cpu (CPU sockets that train '
  "alone, as the Zion paper's CPU-only baseline); the best is proposed.",
)
flags.DEFINE_list(
  'systems',
  # codesign.search.design_space.SYSTEMS (spelled out: flags load first)
  ['board', 'superchip', 'pcie'],
  'System classes of the accelerator trainer, each searched in a design '
  'space of its own: board (SXM and OAM modules on an NVSwitch or '
  'full-mesh baseboard, DIMM hosts), superchip (GH200 and GB200 on their '
  'Grace over NVLink-C2C, soldered LPDDR5X, NVLink domains of 1, 9 or 18 '
  'hosts: NVL36, NVL72), pcie (PCIe cards in PCIe servers, NVLink bridges '
  'on pairs).',
)
flags.DEFINE_float(
  'memory_headroom',
  0.03,
  "Share of each accelerator's usable HBM every candidate keeps free "
  "beyond the stack's own reserve (the search, its plans and the presets "
  'beside it): a margin for what the model does not count; in [0, 0.3].',
)
flags.DEFINE_float(
  'tolerance',
  0.02,
  'Throughput objectives: propose the cheapest design within this share '
  'of the best found (0.02: 2%), not a dearer one that is barely faster.',
)
flags.DEFINE_float(
  'rack_kw',
  142.0,
  'The most one rack may draw, in kW (default: a liquid-cooled rack, '
  'GB300 NVL72 class): the search refuses a node (or a scale-up domain, '
  'whose hosts share a rack) that draws more at the wall; a rack unit '
  'above 40.8 kW (air-cooled: four DGX H100) is liquid-cooled and its '
  "cooling priced per kW; the proposal's bill counts the racks (air: "
  '--rack_kw=40.8 refuses liquid-cooled designs; 0: no rack rule, no '
  'racks counted).',
)
flags.DEFINE_float(
  'life_years',
  5.0,
  "Years of service in the proposal's TCO (capex plus energy; printed "
  'beside it; assumption: 5-6 year server depreciation).',
)
flags.DEFINE_float(
  'usd_per_kwh',
  0.08,
  "Electricity price in the proposal's TCO, USD per kWh (assumption: US "
  'industrial average, about 0.08 in 2023).',
)
flags.DEFINE_float(
  'pue',
  1.58,
  "Power usage effectiveness in the proposal's TCO: facility over IT "
  "power, at least 1 (assumption: Uptime Institute's 2023 average).",
)
flags.DEFINE_string(
  'cpu_stack',
  'ipex_cpu',
  'Software stack of the CPU trainer (a preset or a stack JSON file, as '
  '--stack, which trains the accelerator platforms); a stack that cannot '
  'train CPU sockets is refused.',
)
flags.DEFINE_integer(
  'available_by',
  None,
  'Only parts the catalog dates no later than this year (its `year`) and '
  'NIC line rates that shipped by then (part_tables.NIC_YEARS).',
  lower_bound=1900,
)
flags.DEFINE_string(
  'catalog',
  None,
  'A parts JSON file whose accelerators and CPUs join the catalog for '
  'this run (keys and units: codesign/spec/user_parts.py; an example: '
  'examples/inputs/my_parts.json): searched beside the shipped parts, '
  'and named by --only_parts, --exclude_parts and --price. Each part is '
  'checked as the shipped ones are.',
)
common.define_system_flags(readers='auto', with_failures='auto')
flags.DEFINE_bool(
  'convergence',
  True,
  'For --objective=time_to_train, the samples to the accuracy target at '
  "the workload's batch from its samples-to-target curve (MLPerf's "
  'reference convergence points) in place of --samples, where it has one.',
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
  common.enable_x64(FLAGS.x64)
  from codesign.core import results
  from codesign.studies import proposal

  for key in ('budget_usd', 'power_w', 'rack_kw'):
    if getattr(FLAGS, key) < 0:
      raise InputError(f'--{key} must not be negative')
  names = {f.name for f in dataclasses.fields(proposal.Settings)}
  settings = proposal.Settings(
    **{n: FLAGS[n].value for n in names - {'workload', 'stack', 'presets'}},
    workload=common.load_workload(),
    stack=_stack(proposal),
    presets=tuple(FLAGS.presets),
  )
  progress = common.progress_printer()
  on_step = progress.on_step(settings.steps)
  result, metrics = proposal.run(settings, progress=progress, on_step=on_step)
  workdir = results.make_workdir('propose', FLAGS.workdir)
  extra = {k: result[k] for k in proposal.EXTRA_KEYS}
  config_json = {
    'flags': common.flag_values(),
    'workload': extra['proposal_json']['workload'],
    'stack': extra['proposal_json']['stack'],
  }
  out = {k: v for k, v in result.items() if k not in proposal.EXTRA_KEYS}
  results.write_run(workdir, config_json, out, metrics, seed=FLAGS.seed)
  results.write_json(workdir / 'proposal.json', extra['proposal_json'])
  results.write_json(workdir / 'timing.json', extra['timing'])
  results.write_csv(workdir / 'propose.csv', *proposal.csv_table(result))
  print()
  print(proposal.table(result))


def _stack(proposal):
  """The --stack setting: a stack loaded with its overrides, or the
  names of several (any, or a comma-separated list)."""
  if len(proposal.stack_names(FLAGS.stack)) > 1:
    if any(x.startswith('stack.') for x in FLAGS.override):
      raise InputError('--override=stack.* takes one --stack, not several')
    return FLAGS.stack
  return common.load_stack()


if __name__ == '__main__':
  common.run(main, lower='--starts (or the tables of the workload)')
