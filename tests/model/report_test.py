"""The printed lines of a bill (`codesign.model.report`): the racks."""

from codesign.core.pytree import replace
from codesign.model import report, terms
from codesign.spec import platform_presets


def test_the_racks_line_says_rack_units_and_what_binds():
  """50 two-socket CPU nodes: 20 of 2U by the 40U of an air rack, more
  by its power, so space binds (3 racks, 100U used); 10 DGX H100: power
  binds (4 by power, 5 by space)."""
  cpu = replace(platform_presets.get('cpu_2s'), nodes=50.0)
  line = report.racks_line(terms.racks(cpu, 142e3))
  assert line.startswith('racks: 3 air-cooled of 40.8 kW and 42U (40U')
  assert 'space binds' in line and '20 by space' in line
  assert '100U used' in line
  dgx = replace(platform_presets.get('dgx_h100'), nodes=10.0)
  line = report.racks_line(terms.racks(dgx, 142e3))
  assert 'power binds: 4 by power, 5 by space' in line and '80U used' in line


def test_a_unit_over_the_rack_space_is_named():
  """Two NVL72 domains' worth of GB200 trays in one domain (36 hosts: 36U
  of trays and 9U of switch trays, 45U) exceed the 38U a liquid rack
  holds for nodes."""
  nvl = platform_presets.get('gb200_nvl72')
  two = replace(
    nvl, nodes=36.0, fabric=replace(nvl.fabric, hosts_per_domain=36.0)
  )
  r = terms.racks(two, 1e6)
  assert r['unit_u'] == 45.0 and not r['space_fits'] and not r['fits']
  assert report.racks_line(r).startswith('racks: OVER RACK SPACE: ')
