"""Fuzzing the boundary (`codesign.boundary.fuzzing`): every numeric field of
the four inputs, through the same resolution as the scripts (float64 here;
float32 at scale in `experiments.fuzz`, and over every bound in
tests/model/gradients_test.py). Inside or on its
documented range a value is accepted and costs to finite numbers; outside
it is refused with one sentence naming the key. Then random bad flag
values for every script: one sentence, exit status 2, no run directory.
`experiments.fuzz` runs the same at scale."""

import pathlib
import subprocess
import sys

import jax
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesign.boundary import fuzzing

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = fuzzing.Base()
FIELDS = fuzzing.fields(BASE)


def _slow(max_examples: int):
  return settings(
    max_examples=max_examples,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
  )


def test_every_documented_field_is_fuzzed():
  keys = {f.key for f in FIELDS}
  assert len(keys) == len(FIELDS) > 60
  for key in (
    'platform.nodes',
    'platform.accelerator.hbm_capacity_gb',
    'platform.cpu.ddr_bandwidth_gb_per_s',
    'stack.step_floor_us',
    'workload.tables.0.dim',
    'workload.dcn_layers',
    'plan.overlap',
  ):
    assert key in keys, key


def _key_named(field, message: str) -> bool:
  # Messages name the JSON key, or the field path for list items.
  return field.key in message or field.key.rpartition('.')[0] in message


@_slow(150)
@given(st.data())
def test_values_outside_the_range_are_refused_in_one_sentence(data):
  field = data.draw(st.sampled_from(FIELDS))
  value = data.draw(st.sampled_from(fuzzing.outside(field)))
  status, message = fuzzing.check(BASE, [fuzzing.override(field, value)])
  assert status == 'refused', (field, value, status)
  assert '\n' not in message and _key_named(field, message), message


@_slow(40)
@given(st.data())
def test_values_inside_or_on_the_range_cost_finite_float64(data):
  field = data.draw(st.sampled_from(FIELDS))
  value = data.draw(
    st.one_of(
      st.sampled_from(fuzzing.edges(field)),
      st.floats(0.0, 1.0).map(lambda u: fuzzing.inside(field, u)),
    )
  )
  with jax.enable_x64(True):
    status, message = fuzzing.check(BASE, [fuzzing.override(field, value)])
  assert status == 'finite', (field, value, status, message)


@_slow(15)
@given(st.data())
def test_several_fields_on_their_edges_cost_finite(data):
  fields = data.draw(st.lists(st.sampled_from(FIELDS), min_size=2, max_size=6))
  overrides = [
    fuzzing.override(f, data.draw(st.sampled_from(fuzzing.edges(f))))
    for f in {f.key: f for f in fields}.values()
  ]
  with jax.enable_x64(True):
    status, message = fuzzing.check(BASE, overrides)
  # Edges of several fields may together break a cross-field rule (a
  # workload needs its dims to match); then the refusal is one sentence.
  assert status in ('finite', 'refused'), (overrides, status, message)
  if status == 'refused':
    assert 'must' in message or 'needs' in message, message


# Numeric and list flags of every script, and bad values for them.
SCRIPT_FLAGS = {
  'evaluate': ['seed'],
  'propose': ['budget_usd', 'power_w', 'max_nodes', 'starts', 'steps'],
  'pareto': ['max_budget_usd', 'min_power_w', 'budgets', 'starts'],
  'growth': ['budget_usd', 'factors', 'starts', 'steps'],
  'compare_platforms': ['min_size_gb', 'max_size_gb', 'points'],
  'scale_out': ['nodes', 'target', 'rounds', 'max_nic_gbit_per_s'],
  'sensitivity': ['fd_rel_step', 'fd_tolerance', 'check_top'],
  'search_quality': ['population', 'exhaustive_chunk', 'workloads'],
  'benchmark': ['batches', 'grad_batch', 'eager_designs', 'min_time_s'],
  'calibrate': ['fit_steps', 'seed'],
  'zion_decision': ['budget_2019_usd', 'budget_today_usd', 'starts', 'steps'],
}
BAD_VALUES = ['nan', 'inf', '-inf', '-1', 'abc', '', '1e400', ',,']


def test_random_bad_flag_values_for_every_script(tmp_path):
  rng = np.random.default_rng(0)
  cases = {}
  for script, names in SCRIPT_FLAGS.items():
    for _ in range(2):
      name = str(rng.choice(names))
      value = str(rng.choice(BAD_VALUES))
      cases[f'{script}-{name}-{len(cases)}'] = (script, name, value)
  procs = {
    case: subprocess.Popen(
      [
        sys.executable,
        '-m',
        f'experiments.{script}',
        f'--{name}={value}',
        f'--workdir={tmp_path / case}',
      ],
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for case, (script, name, value) in cases.items()
  }
  problems = []
  for case, proc in procs.items():
    _, stderr = proc.communicate(timeout=300)
    lines = stderr.strip().splitlines()
    if proc.returncode != 2 or len(lines) != 1 or 'Traceback' in stderr:
      problems.append((case, cases[case], proc.returncode, stderr[-300:]))
  assert not problems, problems
  assert list(tmp_path.iterdir()) == []
