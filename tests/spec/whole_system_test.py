"""The system around the trainers as an input
(`codesign.spec.whole_system`): the settings checked in one sentence, the
parts built from the catalog and the data file with their sources, the
failure weight of `auto` at whole nodes."""

import pytest

from codesign.core.errors import InputError
from codesign.spec import catalog
from codesign.spec import whole_system as ws


def test_every_section_of_the_data_file_has_a_source():
  d = ws.raw()
  for key, v in d.items():
    if key == 'about':
      continue
    subs = (
      [v] if 'source' in v else [x for x in v.values() if isinstance(x, dict)]
    )
    assert subs, key
    for x in subs:
      assert x.get('source') and x.get('confidence'), key


def test_reader_node_is_priced_from_the_catalog():
  p = ws.parts()
  cpu = catalog.cpu('EPYC-9654 (Genoa)', 384)
  d = ws.raw()['reader_node']
  assert p.reader.cores == 96
  assert p.reader.usd == pytest.approx(
    d['chassis_usd']
    + float(cpu.price)
    + float(cpu.ddr_capacity) * float(cpu.ddr_price)
    + 200 * 5.0
  )
  assert p.reader.nic_bps == 25e9


def test_storage_node_is_bound_by_its_nics_and_the_code():
  p = ws.parts()
  assert p.storage_read_bps == 50e9  # 8 x 6.8 GB/s > 2 x 200 Gb/s
  assert p.storage_write_bps == pytest.approx(min(8 * 5.6e9, 50e9) / 1.25)
  assert p.storage_bytes == pytest.approx(8 * 7.68e12 / 1.25)


@pytest.mark.parametrize(
  'setting, message',
  [
    (dict(readers=0), 'readers'),
    (dict(readers='some'), 'readers'),
    (dict(checkpoint='half'), 'checkpoint'),
    (dict(with_failures='maybe'), 'with_failures'),
    (dict(transform='cooked'), 'transform'),
    (dict(dataset_samples=-1.0), 'dataset_samples'),
  ],
)
def test_bad_settings_are_one_sentence(setting, message):
  with pytest.raises(InputError, match=message):
    ws.check(ws.WholeSystem(**setting))


def test_flags_parse():
  assert ws.readers_setting('auto') == 'auto'
  assert ws.readers_setting('12') == 12
  with pytest.raises(InputError, match='--readers'):
    ws.readers_setting('1.5')
  assert ws.failures_setting('True') is True
  assert ws.failures_setting('auto') == 'auto'


def test_auto_failures_weigh_in_above_64_accelerators():
  s = ws.WholeSystem(with_failures='auto')
  assert ws.failure_weight(s, 64.0) == 0.0
  assert ws.failure_weight(s, 72.0) == 1.0
  assert ws.failure_weight(s, 68.0) == 0.5
  assert ws.failure_weight(ws.WholeSystem(with_failures=True), 8.0) == 1.0
  assert not ws.WholeSystem().active and ws.WholeSystem('auto').active


def test_transforms_by_workload():
  assert (
    ws.transform_of(ws.WholeSystem(), 'mlperf_dlrm_dcnv2') == 'preprocessed'
  )
  assert ws.transform_of(ws.WholeSystem(), 'zion_scale') == 'online'
  s = ws.WholeSystem(transform='online')
  assert ws.transform_of(s, 'mlperf_dlrm_dcnv2') == 'online'
