"""What feeding the trainers costs: the bytes of a sample, what one reader
node delivers, and how many the trainers need.

A sample in storage and on the wire to a trainer is its label, its dense
features and the ids of every table (`bytes_per_sample`, in the format of
`whole_system.json` `formats.raw`: 4-byte values, and a length per
multi-hot feature). A reader node reads samples from storage over its
NICs, transforms them and sends them to the trainers over the same NICs
(each direction apart): its rate is the least of what its cores
transform (`preprocessed`: MLPerf's preprocessed files, read, shuffled
and batched; `online`: feature generation as Meta's DSI paper measures
it) and what its NICs carry (`reader_rate`). Counts are continuous in
the traced search and whole in a concrete report (`whole`).
"""

import math

import jax.numpy as jnp
import numpy as np

from codesign.core import smooth
from codesign.spec import whole_system as ws
from codesign.spec import workload as wl


def bytes_per_sample(w: wl.Workload, fmt: tuple | None = None) -> float:
  """Bytes of one sample in storage and on the wire (Python float): the
  label, the dense features, every table's ids (its pooling) and a
  length per multi-hot table (pooling other than 1)."""
  f = dict(fmt or ws.parts().format)
  ids = sum(t.pooling for t in w.tables)
  multi = sum(1 for t in w.tables if t.pooling != 1.0)
  return float(
    f['label_bytes']
    + w.num_dense * f['dense_bytes_per_feature']
    + ids * f['id_bytes']
    + multi * f['length_bytes_per_multi_hot_feature']
  )


def reader_rate(w: wl.Workload, transform: str, parts=None) -> float:
  """Samples per second one reader node delivers (Python float): its
  transform's output (`preprocessed`: cores x bytes per core-second;
  `online`: the DSI worker's rate) or its NICs, whichever is less, over
  the bytes of a sample."""
  parts = parts or ws.parts()
  node = parts.reader
  if transform == 'preprocessed':
    cpu = node.cores * parts.per_core_bps
  else:
    cpu = parts.online_bps
  return min(cpu, node.nic_bps) / bytes_per_sample(w, parts.format)


def whole(x):
  """A count of nodes: the next whole number for a concrete value (a
  report buys whole nodes), the value itself when traced (the relaxed
  search prices a fraction of a node, so that its objective stays
  smooth)."""
  if _concrete(x):
    return float(math.ceil(float(x) - 1e-9))
  return x


def _concrete(*xs) -> bool:
  return all(isinstance(x, (int, float, np.number, np.ndarray)) for x in xs)


def xp(*xs):
  """numpy for concrete numbers, jax.numpy when any is traced or a JAX
  array (as `terms.switching` counts its switches)."""
  return np if _concrete(*xs) else jnp


def readers_needed(throughput, rate: float, headroom: float):
  """Reader nodes that feed `throughput` samples/s with `headroom`
  (continuous; `whole` makes a report's count)."""
  return throughput * headroom / rate


def frontend_rate(nodes, bps: float, sample_bytes: float):
  """Samples per second the trainers' front-end ports accept (`nodes`
  trainer nodes of `bps` B/s each)."""
  return nodes * bps / sample_bytes


def smooth_min(*xs):
  """`core.smooth.smooth_min` (p = 8) of positive numbers, in numpy for
  concrete ones (a report's counts stay numpy floats, `whole`)."""
  if not _concrete(*xs):
    return smooth.smooth_min(*(jnp.asarray(x) for x in xs))
  x = np.maximum(np.asarray(xs, np.float64), smooth.TINY)
  return 1.0 / smooth_max(*(1.0 / x))


def smooth_max(*xs):
  """`core.smooth.smooth_max` (p = 8) of positive numbers, in numpy for
  concrete ones."""
  if not _concrete(*xs):
    return smooth.smooth_max(*(jnp.asarray(x) for x in xs))
  x = np.maximum(np.asarray(xs, np.float64), smooth.TINY)
  top = np.max(x)
  p = smooth.DEFAULT_P
  return float(top * np.sum((x / top) ** p) ** (1.0 / p))
