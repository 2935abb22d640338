"""`python3 -m experiments.zion_decision`: a tiny run end to end (the
result's schema, both eras' proposals, the comparisons, the verdict, the
files) beside a bad input (one sentence, exit 2, no files); the Zion-like
test and the study's workload presets, in-process.

The tiny run searches criteo_kaggle in both eras with 2 starts x 4 steps:
its numbers mean nothing, its shape is what is checked.
"""

import json
import os
import subprocess
import sys

import pytest

from codesign.search import buildability, part_tables
from codesign.spec import catalog, schema, workload_presets
from codesign.spec import workload as wl
from codesign.studies import zion_decision
from tests import streams

ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
ENV = dict(os.environ, JAX_PLATFORMS='cpu')
TINY = [
  '--workload_2019=criteo_kaggle',
  '--workload_today=criteo_kaggle',
  '--presets=zion,dgx_h100',
  '--systems=board',
  '--max_nodes=2',
  '--starts=2',
  '--steps=4',
  '--top_fields=2',
  '--trainers=accelerator',
]
PROPOSAL_KEYS = {
  'era',
  'parts_available_by',
  'workload',
  'platform',
  'throughput_samples_per_s',
  'capex_usd',
  'bottleneck',
  'zion_like',
  'elasticities',
}


def _start(args, workdir):
  return subprocess.Popen(
    [
      sys.executable,
      '-m',
      'experiments.zion_decision',
      *args,
      f'--workdir={workdir}',
    ],
    cwd=ROOT,
    env=ENV,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """The tiny run and a run with an unknown workload, side by side:
  (tmp dir, {name: (returncode, stdout, stderr)})."""
  tmp = tmp_path_factory.mktemp('zion_decision')
  procs = {
    'good': _start(TINY, tmp / 'good'),
    'bad': _start([*TINY, '--workload_today=zion_2091'], tmp / 'bad'),
  }
  out = {}
  for name, p in procs.items():
    stdout, stderr = p.communicate(timeout=300)
    out[name] = (p.returncode, stdout, stderr)
  return tmp, out


@pytest.mark.heavy
def test_unknown_workload_is_one_sentence_and_no_files(runs):
  tmp, out = runs
  rc, _, stderr = out['bad']
  lines = stderr.strip().splitlines()
  assert rc == 2 and len(lines) == 1, stderr[-500:]
  assert "'zion_2091'" in stderr and 'valid choices' in stderr
  assert 'zion_2019' in stderr and 'neo_12t' in stderr
  assert not (tmp / 'bad').exists()
  assert not [p for p in tmp.iterdir() if p.name.startswith('.bad')]


def test_tiny_run_writes_the_result_schema(runs):
  tmp, out = runs
  rc, stdout, stderr = out['good']
  assert rc == 0, stderr[-2000:]
  workdir = tmp / 'good'
  for f in ('config.json', 'env.json', 'metrics.jsonl', 'timing.json'):
    assert (workdir / f).is_file(), f
  r = json.loads((workdir / 'result.json').read_text())
  assert 'timing' not in r and 'inputs' not in r
  assert [p['era'] for p in r['proposals']] == ['2019', 'today']
  raw = catalog.raw()
  for p, year in zip(r['proposals'], (2019, None), strict=True):
    assert PROPOSAL_KEYS <= set(p), PROPOSAL_KEYS - set(p)
    assert isinstance(p['parts_available_by'], int)
    assert p['parts_available_by'] == (year or zion_decision.newest_part_year())
    assert p['workload'] == 'criteo_kaggle'
    assert p['throughput_samples_per_s'] > 0 and p['capex_usd'] > 0
    schema.platform_from_json(p['platform'])  # proposal.json's schema
    if year:  # the 2019 search used parts of 2019 or before
      acc, cpu = p['platform']['accelerator'], p['platform']['cpu']
      assert raw['accelerators'][acc['name']]['year'] <= year
      assert raw['cpus'][cpu['name']]['year'] <= year
      rate = int(p['platform']['nic']['bandwidth_gbit_per_s'])
      assert part_tables.NIC_YEARS[rate] <= year
    # A board that is sold (the search's snapping enforces it).
    built = schema.platform_from_json(p['platform'])
    assert 'board' not in {r for r, _ in buildability.violations(built)}
    assert set(p['zion_like']['checks']) == {
      'accelerators',
      'sockets',
      'ddr_holds_tables',
    }
    assert len(p['elasticities']['top']) <= 2
    assert 'nodes' not in [e['field'] for e in p['elasticities']['top']]
  assert [(c['era'], c['platform']) for c in r['comparisons']] == [
    ('2019', 'proposal'),
    ('2019', 'zion'),
    ('today', 'proposal'),
    ('today', 'dgx_h100'),
  ]
  # A break-even line per era: what would flip its answer.
  for p in r['proposals']:
    assert p['break_even']['sentence'].startswith('break-even: ')
    assert f'{p["era"]} break-even: ' in stdout
  v = r['verdict']
  assert v['answer'] in ('YES', 'NO')
  assert v['zion_like'] == (v['answer'] == 'YES') == v['agrees_with_paper']
  assert v['zion_like'] == r['proposals'][0]['zion_like']['zion_like']
  assert 'sockets per node' in v['why'] and 'Zion' in v['evidence']
  assert f'VERDICT: {v["answer"]}' in stdout
  header = (workdir / 'zion_decision.csv').read_text().splitlines()[0]
  assert header.startswith('era,platform,hardware,')
  config = json.loads((workdir / 'config.json').read_text())
  assert {
    'workload_2019',
    'workload_today',
    'stack_2019',
    'stack_today',
  } <= set(config)
  assert config['stack_2019']['uvm_caching'] is False  # --cpu_lookups_2019
  rows = [
    json.loads(x) for x in (workdir / 'metrics.jsonl').read_text().splitlines()
  ]
  assert [x['step'] for x in rows] == list(range(len(rows)))
  assert {x['era'] for x in rows} == {'2019', 'today'}


def _platform(sockets, accels=8, trainer='accelerator'):
  return {
    'trainer': trainer,
    'sockets_per_node': sockets,
    'accelerators_per_node': accels,
    'cpu': {'ddr_capacity_gb': 384.0},
  }


def _figures(ddr_gb, hbm_gb_per_accelerator):
  return {
    'memory': {
      'ddr': {'required_bytes': ddr_gb * 1e9},
      'hbm': {'required_bytes': hbm_gb_per_accelerator * 1e9},
    }
  }


@pytest.mark.parametrize(
  'platform, figures, zion_like',
  [
    (_platform(8), _figures(1000, 27), True),  # Zion: DDR holds the tables
    (_platform(4), _figures(1000, 27), True),
    (_platform(2), _figures(1000, 27), False),  # too few sockets
    (_platform(8), _figures(100, 27), False),  # HBM holds more
    (_platform(8, 0, 'cpu'), _figures(1000, 0), False),  # no accelerators
  ],
)
def test_zion_likeness(platform, figures, zion_like):
  z = zion_decision.zion_likeness(platform, figures, 4)
  assert z['zion_like'] is zion_like
  assert len(z['reasons']) == 3


def test_era_workloads_have_the_stated_sizes():
  w19 = workload_presets.get('zion_2019')
  today = workload_presets.get('neo_12t')
  # 1 TB of fp32 rows (1e12 B); 12e12 fp16 parameters (24 TB).
  assert wl.embedding_param_count(w19) * 4 == pytest.approx(1e12, rel=1e-6)
  assert wl.embedding_param_count(today) == pytest.approx(12e12, rel=1e-6)
  assert {t.precision for t in today.tables} == {'fp16'}
  # Both exceed the HBM of an 8 x 32 GB node several times over.
  assert wl.embedding_bytes(w19) > 3.5 * 8 * 32e9


def test_progress_goes_to_stderr_and_is_never_silent(runs):
  _, out = runs
  rc, stdout, stderr = out['good']
  assert rc == 0, stderr[-2000:]
  assert streams.progress_lines(stdout) == []
  assert streams.longest_silence(stderr) <= 5.0, stderr[-3000:]
  # Each era's search steps as bars, the era named.
  assert '2019 board continuous: ' in stderr
  assert 'today board polish: ' in stderr
