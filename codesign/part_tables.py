"""Catalog parts as rows of numbers, and their relaxed mixtures.

The design space (`codesign.design_space`) relaxes the choice of an
accelerator or CPU part to mixture weights over the catalog's parts; a
mixture is the weighted geometric mean of the parts' rows (so a one-hot
weight vector is exactly the part). A row holds the part's dataclass
leaves (`hardware.Accelerator` / `hardware.CpuSocket`, SI units) and the
per-part numbers the platform does not hold directly (the `*_AUX` names:
fabric links and bandwidth, PCIe x16 bandwidth of the part's generation,
the accelerator's fabric domain in the design space, the CPU's socket
range, DDR per socket and channels, and PCIe lanes per socket alone and in
a multi-socket node; `codesign.buildability`). `default_parts` and
`select_parts` say which parts a space offers (the user's --only_parts,
--exclude_parts and --available_by).
"""

import dataclasses

import jax.numpy as jnp
import numpy as np

from codesign import buildability, catalog, hardware
from codesign.errors import InputError
from codesign.units import GB

ACC_FIELDS = tuple(
  f.name
  for f in dataclasses.fields(hardware.Accelerator)
  if not f.metadata.get('static')
)
CPU_FIELDS = tuple(
  f.name
  for f in dataclasses.fields(hardware.CpuSocket)
  if not f.metadata.get('static') and f.name != 'ddr_capacity'
)
# Extra per-part numbers the platform does not hold directly.
ACC_AUX = ('links', 'link_bandwidth', 'pcie_bandwidth', 'fabric_domain')
CPU_AUX = (
  'pcie_x16_bandwidth',
  'max_sockets',
  'max_ddr',
  'min_sockets',
  'ddr_channels',
  'pcie_lanes',
  'pcie_lanes_multi',
)


def accelerator_row(name: str) -> list[float]:
  a = catalog.accelerator(name)
  d = catalog.raw()['accelerators'][name]
  aux = [
    float(d['link_count']),
    d['link_bw_GBps_per_direction'] * GB,
    catalog.pcie_x16_bandwidth(d['pcie_gen']),
    buildability.design_domain(name),
  ]
  return [float(getattr(a, f)) for f in ACC_FIELDS] + aux


def cpu_row(name: str) -> list[float]:
  c = catalog.cpu(name, 64)
  d = catalog.raw()['cpus'][name]
  f = buildability.catalog_facts()[name]
  aux = [
    catalog.pcie_x16_bandwidth(d['pcie_gen']),
    float(f['max_sockets']),
    f['max_ddr'],
    float(f['min_sockets']),
    float(f['ddr_channels']),
    float(f['pcie_lanes']),
    float(f['pcie_lanes_multi']),
  ]
  return [float(getattr(c, f)) for f in CPU_FIELDS] + aux


def tables(
  accelerators: tuple[str, ...], cpus: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray]:
  """(accelerator table (A, F_a), CPU table (C, F_c)) of the named catalog
  parts, one row per part, SI, all positive."""
  acc = np.array([accelerator_row(n) for n in accelerators])
  cpu = np.array([cpu_row(n) for n in cpus])
  return acc, cpu


# Floor of the part weights: keeps the normalization finite when every
# weight is 0; a one-hot vector is then the part to within 1e-9.
WEIGHT_FLOOR = 1e-10


def weights(zp):
  """Mixture weights (sum 1) from part coordinates zp in [0, 1]^n."""
  zp = zp + WEIGHT_FLOOR
  return zp / jnp.sum(zp, axis=-1, keepdims=True)


def mix(table: np.ndarray, zp):
  """Weighted geometric mean of the part rows, shape (F,).

  A sum of products rather than a matrix product: XLA's CPU matrix
  products may split their sums by thread count, and the search must give
  the same bits on any number of devices.
  """
  w = weights(zp)
  return jnp.exp(jnp.sum(w[:, None] * jnp.log(jnp.asarray(table)), axis=0))


def default_parts() -> tuple[tuple[str, ...], tuple[str, ...]]:
  """(accelerators, CPUs) of the default space: every modelled catalog
  part, accelerators by bf16 FLOP/s then HBM bandwidth, CPUs by DDR
  bandwidth per socket."""
  raw = catalog.raw()
  acc = sorted(
    catalog.accelerator_names(),
    key=lambda n: (
      float(catalog.accelerator(n).peak_flops_bf16),
      float(catalog.accelerator(n).hbm_bandwidth),
    ),
  )
  cpu = sorted(
    raw['cpus'], key=lambda n: (raw['cpus'][n]['ddr_bw_GBps_per_socket'], n)
  )
  return tuple(acc), tuple(cpu)


def select_parts(
  exclude: tuple[str, ...] = (),
  only: tuple[str, ...] = (),
  available_by: int | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
  """The (accelerators, CPUs) of the default space shaped by the user
  (names of catalog parts or their beginnings, such as 'H100' or 'EPYC'):
  `only` keeps, on each part axis it names parts of, just those; `exclude`
  drops parts; `available_by` keeps parts the catalog dates (`year`) no
  later than that year. An axis left with one part repeats it (a mixture
  of a part with itself is the part).

  Raises:
    InputError: an unknown part name (valid names listed), or an axis
      left without parts (saying which choice emptied it).
  """
  raw = catalog.raw()
  acc, cpu = default_parts()

  def expand(given):
    """Catalog names a user's names stand for: the name itself, or every
    part it begins (case aside): 'H100', 'EPYC', 'Xeon-Platinum-8480+'."""
    out = []
    for name in given:
      hits = [n for n in acc + cpu if n.lower().startswith(name.lower())]
      if not name or not hits:
        raise InputError(
          f'unknown part {name!r}; valid parts (or their beginnings): '
          + ', '.join(acc + cpu)
        )
      out += hits
    return set(out)

  exclude, only = expand(exclude), expand(only)
  out = []
  for axis, names, table in (
    ('accelerator', acc, 'accelerators'),
    ('CPU', cpu, 'cpus'),
  ):
    kept = [n for n in names if n in only] if set(only) & set(names) else names
    kept = [n for n in kept if n not in exclude]
    if not kept:
      raise InputError(
        f'--only_parts and --exclude_parts leave no {axis} to choose from'
      )
    if available_by is not None:
      years = {n: int(raw[table][n]['year']) for n in kept}
      kept = [n for n in kept if years[n] <= available_by]
      if not kept:
        first = min(years, key=years.get)
        raise InputError(
          f'no {axis} left is available by {available_by}: the earliest is '
          f'{first} ({years[first]})'
        )
    out.append(tuple(kept) * (2 if len(kept) == 1 else 1))
  return out[0], out[1]
