"""The system around the trainers in the search
(`gradient.Problem.system`): the search judges a buildable design as the
report does up to the fraction of a node it prices (readers and storage
are continuous in the search, whole in a report); a budget that holds
the trainers but not their readers is refused; the relaxed loss keeps
finite gradients."""

import dataclasses

import jax
import numpy as np
import pytest

from codesign.model import report
from codesign.search import design_space as ds
from codesign.search import gradient, snapping
from codesign.spec import stack_presets
from codesign.spec import whole_system as ws
from codesign.spec import workload_presets as wp

STACK = stack_presets.get('hugectr')
SYSTEM = ws.WholeSystem('auto', True)


@pytest.fixture(scope='module')
def problem():
  w = wp.get('mlperf_dlrm_v1')
  space = ds.make_space(
    w,
    max_nodes=4,
    plan_mode='auto',
    accelerators=('A100-SXM4-80GB', 'H100-SXM5-80GB'),
    cpus=('EPYC-7742 (Rome)', 'Xeon-Platinum-8480+ (Sapphire Rapids-SP)'),
  )
  return gradient.check_problem(
    gradient.Problem(space, w, STACK, 'throughput', system=SYSTEM)
  )


def _draws(space, count):
  rng = np.random.default_rng(1)
  out = []
  while len(out) < count:
    idx = [int(rng.integers(n)) for n in space.sizes]
    if snapping.buildable(space, np.array([idx]))[0][0]:
      out.append(idx)
  return np.array(out)


def test_search_judges_the_whole_system_as_the_report_up_to_node_fractions(
  problem,
):
  w, space = problem.workload, problem.space
  idx = _draws(space, 4)
  pz = np.zeros((len(idx), space.num_plan))
  ev = gradient.evaluate_indices(problem, idx, pz)
  alone = dataclasses.replace(problem, system=None)
  ev0 = gradient.evaluate_indices(alone, idx, pz)
  for i, row in enumerate(idx):
    p, plan = gradient.buildable(problem, row, pz[i])
    fig = report.design_figures(p, w, plan, STACK, SYSTEM)
    sysd = fig['system']
    # The throughput: the fed rate times the goodput; the search's
    # goodput writes checkpoints to a fraction of a storage node, the
    # report's to whole ones: within 2%.
    assert float(ev['value'][i]) == pytest.approx(
      fig['throughput_samples_per_s'], rel=2e-2
    )
    assert float(ev['value'][i]) <= float(ev0['value'][i])
    # The system's bill is in the report's capex, beside the trainers'.
    assert sysd['reader_nodes'] >= 1 and sysd['storage_nodes'] >= 1
    bill = sum(b['usd'] for b in sysd['bill'].values())
    trainers = report.design_figures(p, w, plan, STACK)
    assert fig['capex_usd'] == pytest.approx(trainers['capex_usd'] + bill)


def test_a_budget_for_the_trainers_alone_is_refused(problem):
  space = problem.space
  idx = _draws(space, 6)
  pz = np.zeros((len(idx), space.num_plan))
  alone = dataclasses.replace(problem, system=None)
  ev0 = gradient.evaluate_indices(alone, idx, pz)
  capex = ev0['g'][:, 0] + 1.0  # no budget set: capex / inf - 1 = -1
  assert np.all(capex == 0.0)
  # With a budget exactly each design's trainers, the system breaks it.
  for i, row in enumerate(idx):
    p, plan = gradient.buildable(problem, row, pz[i])
    trainers = report.design_figures(p, problem.workload, plan, STACK)
    tight = dataclasses.replace(problem, budget_usd=trainers['capex_usd'])
    ev = gradient.evaluate_indices(tight, row[None], pz[i][None])
    assert ev['g'][0, 0] > 0.0
    assert not ev['feasible'][0]


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_relaxed_whole_system_gradients_finite(problem, dtype):
  space = problem.space
  z = jax.numpy.asarray(
    np.random.default_rng(2).uniform(0, 1, (50, space.dim)), dtype
  )
  grad = jax.jit(jax.vmap(jax.grad(lambda v: gradient.assess(problem, v)[0])))(
    z
  )
  assert np.all(np.isfinite(np.asarray(grad)))
