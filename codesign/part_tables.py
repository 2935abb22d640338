"""Catalog parts as rows of numbers, and their relaxed mixtures.

The design space (`codesign.design_space`) relaxes the choice of an
accelerator or CPU part to mixture weights over the catalog's parts; a
mixture is the weighted geometric mean of the parts' rows (so a one-hot
weight vector is exactly the part). A row holds the part's dataclass
leaves (`hardware.Accelerator` / `hardware.CpuSocket`, SI units) and the
per-part numbers the platform does not hold directly (the `*_AUX` names:
fabric links and bandwidth, PCIe x16 bandwidth of the part's generation,
max sockets and DDR per socket).
"""

import dataclasses

import jax.numpy as jnp
import numpy as np

from codesign import catalog, hardware
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
ACC_AUX = ('links', 'link_bandwidth', 'pcie_bandwidth')
CPU_AUX = ('pcie_x16_bandwidth', 'max_sockets', 'max_ddr')


def accelerator_row(name: str) -> list[float]:
  a = catalog.accelerator(name)
  d = catalog.raw()['accelerators'][name]
  aux = [
    float(d['link_count']),
    d['link_bw_GBps_per_direction'] * GB,
    catalog.pcie_x16_bandwidth(d['pcie_gen']),
  ]
  return [float(getattr(a, f)) for f in ACC_FIELDS] + aux


def cpu_row(name: str) -> list[float]:
  c = catalog.cpu(name, 64)
  d = catalog.raw()['cpus'][name]
  aux = [
    catalog.pcie_x16_bandwidth(d['pcie_gen']),
    float(d['max_sockets']),
    d['max_mem_per_socket_TB'] * 1e12,
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
