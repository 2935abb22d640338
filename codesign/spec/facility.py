"""The facility around the nodes: rack classes and rack units.

The numbers of `codesign/data/facility.json`, each with its source
there: a rack class's height and the rack units it keeps for its own
switches and power (`rack_classes`), the rack units a node of each
system class takes by its accelerators (or a CPU trainer's by its
sockets, `node_rack_units`), the NVLink switch trays of a scale-up
domain across hosts and the rack units of a network switch. What they
cost in racks is `codesign.model.terms.budget` (`racks`, and the
search's `rack_space` row).
"""

import functools
import json

from codesign.core.paths import DATA_DIR

# The system classes of `node_rack_units`: an accelerator trainer's
# (boards, PCIe cards, superchips) and a CPU trainer's.
SYSTEM_CLASSES = ('board', 'pcie', 'superchip', 'cpu')


@functools.cache
def raw() -> dict:
  """`codesign/data/facility.json` as read."""
  return json.loads((DATA_DIR / 'facility.json').read_text())


def usable_rack_units(cooling: str) -> float:
  """Rack units a rack of class `cooling` ('air' or 'liquid') holds for
  nodes: its height less what it keeps for its switches and power."""
  c = raw()['rack_classes'][cooling]
  return float(c['rack_units'] - c['reserved_rack_units'])


def rack_units(cooling: str) -> float:
  """The height of a rack of class `cooling`, rack units."""
  return float(raw()['rack_classes'][cooling]['rack_units'])


@functools.cache
def node_rack_units(system: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
  """(counts, rack units): a node of `system` (`SYSTEM_CLASSES`) with
  that many accelerators (a CPU trainer: sockets) takes that many rack
  units; counts ascending."""
  d = raw()['node_rack_units'][system]
  table = d['by_sockets' if system == 'cpu' else 'by_accelerators']
  pairs = sorted((float(k), float(v)) for k, v in table.items())
  return tuple(k for k, _ in pairs), tuple(v for _, v in pairs)


def domain_switch_rack_units() -> float:
  """Rack units of the NVLink switch trays of one scale-up domain that
  spans hosts (NVL36, NVL72)."""
  return float(raw()['domain_switch_rack_units']['value'])


def network_switch_rack_units() -> float:
  """Rack units of one scale-out network switch."""
  return float(raw()['network_switch_rack_units']['value'])
