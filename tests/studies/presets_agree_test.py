"""One answer per preset: the same preset and workload give the same
throughput through every script's library function (evaluate's
`codesign.evaluate`, propose's and zion_decision's preset rows
`shared.preset_figures`, compare_platforms' sweep at the workload's own
size, pareto's auto-plan column), each with the stack evaluate gives the
preset's trainer; where a script deliberately uses another plan (pareto:
the searched designs' one sharding for every table), its figure is that
plan's, and its table names the plan beside the figure."""

import pytest

import codesign
from codesign.spec import stack_presets
from codesign.spec import workload as wl
from codesign.studies import compare_platforms, pareto, shared

WORKLOAD = 'rm1'
# An accelerator preset whose auto plan is not table-wise for every table
# (pareto's default differs), and a CPU trainer (its own stack).
PRESETS = ('zionex', 'cpu_2s')


@pytest.fixture(scope='module')
def w():
  return codesign.load_workload(WORKLOAD)


def _stack(p):
  return stack_presets.get(stack_presets.default_for(p.trainer))


@pytest.mark.parametrize('name', PRESETS)
def test_every_script_gives_evaluates_throughput(w, name):
  p = codesign.load_platform(name)
  evaluated = codesign.evaluate(w, p)['throughput_samples_per_s']
  # propose and zion_decision: the preset rows beside the proposal.
  _, fig = shared.preset_figures(w, p, _stack(p))
  assert fig['throughput_samples_per_s'] == evaluated
  # pareto: the auto plan's figure beside its own plan's.
  row, _ = pareto.preset_point(w, p, _stack(p), 'table_wise')
  assert row['auto_plan_throughput_samples_per_s'] == evaluated
  # compare_platforms: the sweep's first size is the workload's own.
  own = wl.embedding_bytes(w) / 1e9
  result, _ = compare_platforms.run(
    compare_platforms.Settings(
      workload=w,
      platforms=(name,),
      gpu_platforms=(),
      large_memory_platforms=(),
      min_size_gb=own,
      max_size_gb=2 * own,
      points=2,
    )
  )
  swept = result['platforms'][name]['throughput_samples_per_s'][0]
  assert swept == pytest.approx(evaluated, rel=1e-9)
  assert result['stacks'][name] == _stack(p).name


def test_pareto_names_the_plan_it_uses_beside_the_figure(w):
  p = codesign.load_platform('zionex')
  row, _ = pareto.preset_point(w, p, _stack(p), 'table_wise')
  plan = codesign.make_plan(w, p, sharding='table_wise')
  assert row['throughput_samples_per_s'] == pytest.approx(
    codesign.evaluate(w, p, plan=plan)['throughput_samples_per_s'], rel=1e-9
  )
  assert row['plan'] == 'table_wise (every table)'
  assert row['stack'] == 'torchrec'
  # The auto plan differs here, so the two columns differ.
  assert row['throughput_samples_per_s'] != pytest.approx(
    row['auto_plan_throughput_samples_per_s'], rel=1e-3
  )
  text = pareto.table(
    {
      'workload': WORKLOAD,
      'searches': [],
      'frontier': {'capex': [], 'power': []},
      'display': {
        'design_names': [],
        'search_reasons': [],
        'preset_reasons': {'zionex': ''},
      },
      'presets': {
        'zionex': {
          **row,
          'share_of_frontier_at_same_capex': None,
          'share_of_frontier_at_same_power': None,
        }
      },
      'summary': [],
    }
  )
  line = next(x for x in text.splitlines() if x.startswith('zionex'))
  assert 'table_wise (every table)' in line
  assert f'{row["auto_plan_throughput_samples_per_s"]:,.0f}' in line
  assert "planner's auto plan" in text
