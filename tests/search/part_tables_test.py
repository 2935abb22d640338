"""Which catalog parts a search may use (`part_tables.select_parts`): the
user's --only_parts, --exclude_parts and --available_by, by name or by a
name's beginning, with one sentence for a choice that leaves nothing."""

import pytest

from codesign.core.errors import InputError
from codesign.search import design_space, part_tables
from codesign.spec import catalog
from codesign.spec import workload_presets as presets

ACC, CPU = part_tables.default_parts()


def test_defaults_are_every_modelled_part_the_space_can_wire():
  # The PCIe cards are left out of the board space, whose one switch
  # fabric would credit them NVLink; the PCIe space offers them all, the
  # bridged cards and the L40S, which is sold without a bridge.
  pcie = {'A100-PCIe-80GB', 'H100-PCIe-80GB', 'H100-NVL-94GB'}
  pcie |= {'H200-NVL-141GB', 'L40S'}
  assert set(part_tables.default_parts('pcie')[0]) == pcie
  # Nor the superchips, whose host is their Grace, nor Grace, whose
  # soldered LPDDR5X has no DIMM population to search.
  superchips = {'GH200-H100-96GB', 'GB200-B200-186GB'}
  assert set(ACC) == set(catalog.accelerator_names()) - pcie - superchips
  assert set(CPU) == set(catalog.raw()['cpus']) - {
    'Grace-72C-480GB (Neoverse V2)'
  }
  assert part_tables.select_parts() == (ACC, CPU)


def test_beginnings_name_families_and_axes_stay_whole_unless_named():
  acc, cpu = part_tables.select_parts(only=('H100', 'a100'))
  assert acc == ('A100-SXM4-40GB', 'A100-SXM4-80GB', 'H100-SXM5-80GB')
  assert cpu == CPU  # --only_parts named no CPU
  acc, cpu = part_tables.select_parts(exclude=('EPYC',))
  assert acc == ACC and cpu and not any('EPYC' in c for c in cpu)


def test_available_by_uses_the_catalog_year():
  raw = catalog.raw()
  acc, cpu = part_tables.select_parts(available_by=2019)
  assert acc and all(raw['accelerators'][a]['year'] <= 2019 for a in acc)
  assert cpu and all(raw['cpus'][c]['year'] <= 2019 for c in cpu)
  later = [a for a in ACC if raw['accelerators'][a]['year'] > 2019]
  assert later and not set(later) & set(acc)


def test_available_by_keeps_the_nic_rates_sold_by_then():
  every = part_tables.nic_rates()
  assert set(every) == set(part_tables.NIC_YEARS)
  by_2019 = part_tables.nic_rates(2019)
  assert by_2019 and all(part_tables.NIC_YEARS[r] <= 2019 for r in by_2019)
  assert 800 in every and 800 not in by_2019
  with pytest.raises(InputError, match='no NIC line rate is available by 2010'):
    part_tables.nic_rates(2010)
  # The design space offers only those rates, one kept as a degenerate axis.
  w = presets.get('rm1')
  space = design_space.make_space(w, max_nodes=2, nic_rates=by_2019)
  rate = space.axes.index('nic_bandwidth') - 2  # the number axes' grids
  assert space.grids[rate] == tuple(catalog.nic_bandwidth(r) for r in by_2019)
  one = design_space.make_space(w, max_nodes=2, nic_rates=(100,))
  assert one.grids[rate] == (catalog.nic_bandwidth(100),) * 2


def test_one_part_left_is_a_space_of_that_part():
  acc, _ = part_tables.select_parts(only=('H100',))
  assert acc == ('H100-SXM5-80GB', 'H100-SXM5-80GB')
  w = presets.get('rm1')
  space = design_space.make_space(w, max_nodes=2, accelerators=acc)
  p = design_space.build(space, [0] * (2 + len(space.grids)))
  assert p.accelerator.name == catalog.accelerator('H100-SXM5-80GB').name


@pytest.mark.parametrize(
  'kwargs,words',
  [
    ({'only': ('nope',)}, ["unknown part 'nope'", 'H100-SXM5-80GB']),
    ({'exclude': ('',)}, ["unknown part ''"]),
    ({'exclude': tuple(ACC)}, ['leave no accelerator']),
    ({'only': ('V100',), 'exclude': ('V100-SXM2',)}, ['no accelerator']),
    ({'available_by': 2000}, ['available by 2000', 'earliest', '2017']),
  ],
)
def test_choices_that_leave_nothing_are_one_sentence(kwargs, words):
  with pytest.raises(InputError) as e:
    part_tables.select_parts(**kwargs)
  message = str(e.value)
  assert '\n' not in message
  for word in words:
    assert word in message, message


def test_the_proposal_prints_its_parts_with_price_power_and_confidence():
  from codesign.studies import proposal

  line = proposal.parts_line(
    {
      'trainer': 'accelerator',
      'accelerator': {'name': 'H100-SXM5-80GB'},
      'cpu': {'name': 'EPYC-7742 (Rome)'},
    }
  )
  cpu_only = proposal.parts_line(
    {
      'trainer': 'cpu',
      'accelerator': {'name': 'H100-SXM5-80GB'},
      'cpu': {'name': 'EPYC-7742 (Rome)'},
    }
  )
  # A CPU trainer buys no accelerator: its line names the CPU alone.
  assert 'H100' not in cpu_only and 'EPYC-7742 (Rome) 6,950 USD' in cpu_only
  h100 = catalog.accelerator('H100-SXM5-80GB')
  # The part as bought, with its HBM: the catalog's price_usd_rough.
  usd = catalog.raw()['accelerators']['H100-SXM5-80GB']['price_usd_rough']
  assert f'H100-SXM5-80GB {usd:,.0f} USD (catalog, low confidence)' in line
  assert f'{float(h100.power):,.0f} W' in line
  assert 'low (price)' in line  # the catalog's confidence in that price
  assert 'EPYC-7742 (Rome) 6,950 USD (catalog)' in line
  assert 'confidence: medium' in line
