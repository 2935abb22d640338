r"""Propose the platform to build for a DLRM, under the buyer's limits.

  python -m experiments.propose                      # zion_scale, perf/$
  python -m experiments.propose --objective=throughput --budget_usd=2e6 \
      --power_w=40000 --max_nodes=8

Runs `codesign.search.gradient_search` (augmented-Lagrangian Adam over a
relaxation of catalog parts and counts, then snapping to buildable
platforms), prints the proposal beside the platform presets on the same
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
import jax.numpy as jnp
import numpy as np
from absl import flags

from codesign.errors import InputError
from experiments import common

flags.DEFINE_string(
  'workload',
  'zion_scale',
  'Workload preset name (see codesign/workload_presets.py) or a JSON file '
  "in the dumped schema (a run's config.json also works).",
)
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
flags.DEFINE_integer('seed', 0, 'Random seed of the starts.')
common.define_sharding_flag('searched plans')
flags.DEFINE_list(
  'presets',
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
flags.DEFINE_string(
  'workdir', None, 'Run directory; default results/propose/<UTC timestamp>/.'
)
flags.DEFINE_bool('x64', True, 'Search in float64.')
FLAGS = flags.FLAGS


def _figures(p, w, plan, stack) -> dict:
  """The evaluate figures of a concrete design (as experiments.evaluate)."""
  from codesign import cost_model, hardware, report

  return report.to_result(
    cost_model.evaluate(hardware.as_arrays(p), w, plan, stack)
  )


def _within(fig: dict, problem) -> bool:
  ok = fig['feasible']
  if problem.budget_usd:
    ok = ok and fig['capex_usd'] <= problem.budget_usd
  if problem.power_w:
    ok = ok and fig['power_w'] <= problem.power_w
  return bool(ok)


def _objective_of(fig: dict, problem) -> float:
  return {
    'throughput': fig['throughput_samples_per_s'],
    'throughput_per_usd': fig['perf_per_usd'],
    'throughput_per_watt': fig['perf_per_watt'],
    'time_to_train': problem.samples / fig['throughput_samples_per_s'],
  }[problem.objective]


def _row(name, hw, fig, problem) -> str:
  return (
    f'{name:22s} {hw:34s} {fig["throughput_samples_per_s"]:>12,.0f} '
    f'{fig["capex_usd"]:>12,.0f} {fig["power_w"]:>9,.0f} '
    f'{_objective_of(fig, problem):>10.4g} '
    f'{"yes" if _within(fig, problem) else "NO":>5s}  {fig["bottleneck"]}'
  )


def _hw(p) -> str:
  acc = p.accelerator.name.split(' ')[0]
  if p.name == 'continuous_optimum':  # a mixture: "w1 part1 + w2 part2"
    acc = '+'.join(
      f'{t.split()[1].split("-")[0]}:{float(t.split()[0]):.2f}'
      for t in p.accelerator.name.split(' + ')[:2]
    )
  return (
    f'{p.nodes:.0f}x({p.sockets_per_node:.0f}S+'
    f'{p.accelerators_per_node:.0f} {acc})'
    if p.trainer == 'accelerator'
    else f'{p.nodes:.0f}x({p.sockets_per_node:.0f}S CPU trainer)'
  )


def _explain_infeasible(problem, result, config, make_progress) -> str:
  """One sentence: which constraint no buildable platform meets, by how
  much."""
  import dataclasses

  from codesign import search

  g = result.best_g
  worst = search.CONSTRAINTS[int(g.argmax())]
  if worst in ('capex', 'power'):
    # The cheapest (or leanest) platform that holds the tables, found by the
    # same search without the budget.
    free = dataclasses.replace(
      problem, objective=worst, budget_usd=None, power_w=None
    )
    print(f'no feasible platform; searching the minimum {worst} ...')
    low = search.gradient_search(free, config, progress=make_progress(worst))
    if low.best_feasible:
      if worst == 'capex':
        limit, need = problem.budget_usd, low.best_value
        return (
          f'the capex budget of ${limit:,.0f} cannot be met: the cheapest '
          f'buildable platform found that holds the tables costs '
          f'${need:,.0f}, ${need - limit:,.0f} ({100 * (need / limit - 1):.0f}'
          '%) over the budget'
        )
      limit, need = problem.power_w, low.best_value
      return (
        f'the power budget of {limit:,.0f} W cannot be met: the leanest '
        f'buildable platform found that holds the tables draws {need:,.0f} '
        f'W, {need - limit:,.0f} W ({100 * (need / limit - 1):.0f}%) over '
        'the budget'
      )
  return (
    'no buildable platform within the limits was found: '
    + search.violation_sentence(problem, g)
    + f' at best (max_nodes={FLAGS.max_nodes})'
  )


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign import (
    design_space,
    inputs,
    planner,
    results,
    schema,
    search,
  )
  from codesign import platform_presets as presets

  t_start = time.perf_counter()
  w = inputs.load_workload(FLAGS.workload)
  stack = common.load_stack()
  for name in FLAGS.presets:
    presets.get(name)  # an unknown name fails before the search
  for key in ('budget_usd', 'power_w'):
    if getattr(FLAGS, key) < 0:
      raise InputError(f'--{key} must not be negative')
  space = design_space.make_space(
    w, max_nodes=FLAGS.max_nodes, sharding=FLAGS.sharding
  )
  problem = search.check_problem(
    search.Problem(
      space,
      w,
      stack,
      FLAGS.objective,
      budget_usd=FLAGS.budget_usd or None,
      power_w=FLAGS.power_w or None,
      samples=FLAGS.samples,
    )
  )
  config = search.check_config(
    search.Config(starts=FLAGS.starts, steps=FLAGS.steps, seed=FLAGS.seed)
  )
  unit = {
    'throughput': 'samples/s',
    'throughput_per_usd': 'samples/s/$',
    'throughput_per_watt': 'samples/s/W',
    'time_to_train': 's',
    'capex': '$',
    'power': 'W',
  }

  def make_progress(objective):
    def progress(step, m):
      best = m['objective']
      best = f'{best:.5g}' if best is not None else 'none yet'
      print(
        f'[{time.perf_counter() - t_start:6.1f} s] {m["phase"]:10s} step '
        f'{step:4d}/{config.steps}: best feasible {best} {unit[objective]}; '
        f'{m["feasible_starts"]} feasible starts; min violation '
        f'{m["violation_min"]:.3g}',
        flush=True,
      )

    return progress

  print(
    f'searching {space.size:,} buildable platforms (and their plans) for '
    f'{w.name}, objective {problem.objective}, {config.starts} starts x '
    f'{config.steps} steps on {len(jax.devices())} device(s)',
    flush=True,
  )
  res = search.gradient_search(
    problem, config, progress=make_progress(problem.objective)
  )
  t_search = time.perf_counter() - t_start
  if not res.best_feasible:
    raise InputError(_explain_infeasible(problem, res, config, make_progress))

  # The proposal as the evaluate CLI would read it back.
  p, plan = search.buildable(problem, res.best_index, res.best_plan_z)
  pj = schema.platform_to_json(p)
  plj = schema.plan_to_json(plan)
  wj = schema.workload_to_json(w)
  p_back = schema.platform_from_json(pj)
  plan_back = schema.plan_from_json(plj, w)
  fig = _figures(p_back, w, plan_back, stack)
  # Recomputed op by op here, so the file does not depend on the devices
  # the batched search ran on.
  _, g_best, _ = search.assess_index(
    problem, jnp.asarray(res.best_index), jnp.asarray(res.best_plan_z)
  )
  g_best = np.asarray(g_best)
  auto_fig = _figures(p_back, w, planner.make(w, p_back, stack), stack)
  pc, planc = search.relaxed(problem, res.continuous_z)
  cfig = _figures(pc, w, planc, stack)
  cj = schema.platform_to_json(pc)

  preset_rows = []
  for name in FLAGS.presets:
    pp = presets.get(name)
    f = _figures(pp, w, planner.make(w, pp, stack), stack)
    preset_rows.append(
      {
        'name': name,
        'plan': 'auto',
        'objective_value': _objective_of(f, problem),
        'within_limits': _within(f, problem),
        **f,
      }
    )

  t_total = time.perf_counter() - t_start
  result = {
    'workload': w.name,
    'stack': stack.name,
    'objective': problem.objective,
    'objective_unit': unit[problem.objective],
    'limits': {
      'budget_usd': problem.budget_usd,
      'power_w': problem.power_w,
      'max_nodes': FLAGS.max_nodes,
      'samples': problem.samples,
    },
    'proposal': {
      'platform': pj,
      'plan': plj,
      'objective_value': _objective_of(fig, problem),
      'within_limits': _within(fig, problem),
      'constraint_violations': dict(
        zip(search.CONSTRAINTS, g_best.tolist(), strict=True)
      ),
      'with_auto_plan': auto_fig,
      **fig,
    },
    'continuous_optimum': {
      'platform': cj,
      'plan': schema.plan_to_json(planc),
      'relaxed_axes': design_space.describe_relaxed(
        space, res.continuous_z[: space.num_hw_coords]
      ),
      'objective_value': _objective_of(cfig, problem),
      'constraint_violations': dict(
        zip(search.CONSTRAINTS, res.continuous_g.tolist(), strict=True)
      ),
      **cfig,
    },
    'presets': preset_rows,
    'search': {
      'method': 'augmented-Lagrangian Adam over the relaxation, snapping '
      'to 2^H neighbouring roundings of the best starts, plan polish',
      'starts': config.starts,
      'steps': config.steps,
      'snap_top': config.snap_top,
      'evaluations': res.evaluations,
      'design_space_size': space.size,
      'seed': config.seed,
      'wall_s': 'in timing.json (kept out so result.json is reproducible)',
    },
  }
  workdir = results.make_workdir('propose', FLAGS.workdir)
  config_json = {
    'flags': common.flag_values(),
    'workload': wj,
    'stack': schema.stack_to_json(stack),
  }
  results.write_run(
    workdir, config_json, result, metrics=res.history, seed=FLAGS.seed
  )
  results.write_json(
    workdir / 'proposal.json',
    {
      'workload': wj,
      'platform': pj,
      'plan': plj,
      'stack': schema.stack_to_json(stack),
    },
  )
  results.write_json(
    workdir / 'timing.json',
    {'search_wall_s': t_search, 'total_wall_s': t_total},
  )

  head = (
    f'{"platform":22s} {"hardware":34s} {"samples/s":>12s} {"capex $":>12s} '
    f'{"power W":>9s} {unit[problem.objective]:>10s} {"ok":>5s}  bottleneck'
  )
  print()
  print(f'{w.name}: objective {problem.objective}; limits {result["limits"]}')
  print(head)
  print(_row('PROPOSAL', _hw(p), fig, problem))
  print(_row('  (auto plan)', _hw(p), auto_fig, problem))
  print(_row('continuous optimum', _hw(pc), cfig, problem))
  for row in preset_rows:
    print(_row(row['name'], _hw(presets.get(row['name'])), row, problem))
  print(
    f'proposal: {p.accelerator.name}, {p.cpu.name}, DDR '
    f'{p.cpu.ddr_capacity / 1e9:.0f} GB/socket, {p.nic.count:.0f} x '
    f'{p.nic.bandwidth * 8 / 1e9:.0f} Gb/s NICs per node'
  )
  print(
    f'search: {res.evaluations:,} evaluations in {t_search:.1f} s '
    f'(compile included); total {t_total:.1f} s'
  )
  print(f'wrote {workdir}')


if __name__ == '__main__':
  common.run(main)
