"""A user's own parts (`codesign.spec.user_parts`, `--catalog`): checked
as the shipped parts are, one sentence for a bad one, joined to the
catalog for one run only, and searched: the part a `--catalog` file adds
shows up in `propose --only_parts=` it."""

import copy
import json
import pathlib
import subprocess
import sys

import pytest

import codesign
from codesign.boundary import inputs
from codesign.core import interrupts
from codesign.core.pytree import replace
from codesign.core.units import GIB
from codesign.search import buildability, design_space, part_tables
from codesign.spec import (
  catalog,
  platform_presets,
  user_parts,
  workload_presets,
)
from codesign.studies import proposal
from tests import streams

ROOT = pathlib.Path(__file__).resolve().parents[2]
PARTS_FILE = ROOT / 'examples' / 'inputs' / 'my_parts.json'
EXAMPLE = json.loads(PARTS_FILE.read_text())
NEW = 'MI325X-OAM'


def _refused(d, *words):
  with pytest.raises(codesign.InputError) as e:
    user_parts.load(d, 'my.json')
  message = str(e.value)
  assert '\n' not in message and message.startswith('my.json')
  for w in words:
    assert w in message, message
  return message


def _changed(table, name, **changes):
  d = copy.deepcopy(EXAMPLE)
  d[table][name].update(changes)
  for k, v in changes.items():
    if v is None:
      del d[table][name][k]
  return d


def test_every_shipped_part_passes_the_check_a_users_part_must():
  for name in catalog.accelerator_names():
    assert user_parts.part_problems('accelerators', name) == [], name
  for name in catalog.raw()['cpus']:
    assert user_parts.part_problems('cpus', name) == [], name


def test_the_example_joins_the_catalog_inside_its_block_only():
  parts = inputs.load_catalog(str(PARTS_FILE))
  assert [n for _, n, _ in parts] == [NEW, 'EPYC-9755 (Turin)']
  assert NEW not in part_tables.default_parts()[0]
  with catalog.using(parts):
    acc, cpus = part_tables.default_parts()
    assert NEW in acc and 'EPYC-9755 (Turin)' in cpus
    a = catalog.accelerator(NEW)
    assert float(a.hbm_capacity) == 256 * GIB and catalog.vendor(NEW) == 'amd'
    # The price given is the part with its HBM, as the catalog's.
    assert part_tables.catalog_price_usd(NEW) == pytest.approx(20000.0)
    # Threads started from the block see the parts too.
    seen = interrupts.thread_map(lambda _: catalog.user_parts(), [1, 2], 2)
    assert seen == [parts, parts]
    space = design_space.make_space(workload_presets.get('rm1'))
    assert space.user_parts == parts and NEW in space.accelerators
  with pytest.raises(RuntimeError), catalog.using(parts):
    raise RuntimeError('a failed run')
  assert catalog.user_parts() == () and NEW not in catalog.raw()['accelerators']
  plain = design_space.make_space(workload_presets.get('rm1'))
  assert plain.user_parts == () and plain != space  # programs keyed apart


def test_a_users_boards_and_fabric_are_the_rules():
  parts = inputs.load_catalog(EXAMPLE)
  base = platform_presets.get('mi300x_8')
  with catalog.using(parts):
    assert buildability.fabrics_of(NEW) == {'switch': 8}
    assert buildability.in_design_space(NEW)
    genoa = 'EPYC-9654 (Genoa)'
    assert buildability.board_allows(NEW, genoa, 8.0, 2.0)
    assert not buildability.board_allows(NEW, genoa, 4.0, 2.0)
    p = replace(
      base, accelerator=catalog.accelerator(NEW), accelerators_per_node=4.0
    )
    rules = [r for r, _ in buildability.violations(p)]
    assert 'board' in rules


@pytest.mark.parametrize(
  'change, words',
  [
    (
      ('accelerators', NEW, {'hbm_capacity_gb': 5000}),
      'hbm_capacity_gb must lie in [1, 2000] gb, got 5000',
    ),
    (
      ('accelerators', NEW, {'max_per_node': 7.5}),
      'max_per_node must be a whole number',
    ),
    (
      ('accelerators', NEW, {'hbm_bandwidth_gb_per_s': None}),
      'missing key hbm_bandwidth_gb_per_s',
    ),
    (('accelerators', NEW, {'hbm_bw': 3}), "unknown key 'hbm_bw'"),
    (('accelerators', NEW, {'price_usd': 500}), 'price_usd less its HBM'),
    (('accelerators', NEW, {'source': ''}), 'source must be non-blank'),
    (('accelerators', NEW, {'vendor': 'acme'}), 'vendor must be one of'),
    (
      (
        'accelerators',
        NEW,
        {'boards': [{'accelerators_per_node': [8], 'cpus': ['Z80']}]},
      ),
      "names no CPU 'Z80'",
    ),
    (
      ('cpus', 'EPYC-9755 (Turin)', {'max_sockets': 32}),
      'max_sockets must be a whole number in [1, 16]',
    ),
    (
      ('cpus', 'EPYC-9755 (Turin)', {'ddr_bandwidth_gb_per_s': 5}),
      'ddr_bandwidth_gb_per_s must lie in',
    ),
  ],
)
def test_a_bad_part_is_one_sentence(change, words):
  table, name, values = change
  _refused(_changed(table, name, **values), words)


def test_a_bad_file_is_one_sentence():
  _refused(
    {'accelerators': {'H100-SXM5-80GB': EXAMPLE['accelerators'][NEW]}},
    'is a shipped part',
  )
  _refused({'gpus': {}}, "unknown key 'gpus'")
  _refused({}, 'holds no parts')
  two = _changed('accelerators', NEW, year=1800, power_w=-1)
  assert 'has 2 problems' in _refused(two)
  with pytest.raises(codesign.InputError):
    inputs.load_catalog(str(ROOT / 'no_such_parts.json'))


def test_api_propose_takes_the_catalog(monkeypatch):
  seen = []

  def run(settings, **_):
    seen.append(settings)
    return {}, []

  monkeypatch.setattr(proposal, 'run', run)
  codesign.propose('rm1', catalog=PARTS_FILE)
  assert seen[0].catalog == str(PARTS_FILE)
  with pytest.raises(codesign.InputError):
    codesign.propose('rm1', catalog=5)


@pytest.mark.heavy
def test_the_new_accelerator_is_searched(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.propose',
      f'--catalog={PARTS_FILE}',
      '--only_parts=MI325X',
      '--workload=rm1',
      '--starts=2',
      '--steps=4',
      '--max_nodes=2',
      '--presets=mi300x_8',
      '--trainers=accelerator',
      f'--workdir={tmp_path / "run"}',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  result = json.loads((tmp_path / 'run' / 'result.json').read_text())
  assert result['proposal']['platform']['accelerator']['name'] == NEW
  assert list(result['user_parts']['accelerators']) == [NEW]
  assert result['prices']['proposal_parts'][0]['part'] == NEW
  assert f'{NEW} 20,000 USD' in proc.stdout  # the parts line under the table
  # A tiny propose: progress on stderr only, never silent for 5 s.
  assert streams.progress_lines(proc.stdout) == []
  assert streams.longest_silence(proc.stderr) <= 5.0, proc.stderr[-3000:]
  assert 'board continuous: 4/4 (100%' in proc.stderr
