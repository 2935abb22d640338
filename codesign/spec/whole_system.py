"""The training system around the trainers, as an input: readers,
storage, front-end network, failures and checkpoints.

A `WholeSystem` says how the data reaches the trainers (`readers`:
`local`, the data already on the trainers as the step alone assumes;
`auto`, reader nodes sized to feed them; or a count of reader nodes),
whether failures and checkpoints are counted (`with_failures`) and how
checkpoints are written (`checkpoint`: `full`, or `incremental` and
quantized as Check-N-Run writes them). Its `parts` are the numbers of
`codesign/data/whole_system.json` in SI, each with its source
(`parts().sources`). It is static and hashable: a search's problem
carries it, and what it costs is `codesign.model.whole_system`.
"""

import dataclasses
import functools
import json
import math

from codesign.core.errors import InputError
from codesign.core.paths import DATA_DIR
from codesign.core.units import GB
from codesign.spec import catalog

READERS = ('local', 'auto')
FAILURES = (True, False, 'auto')
# `with_failures='auto'` counts failures on jobs above this many
# accelerators (the default of proposals), ramping in over
# `FAILURES_RAMP` more, so that the search stays continuous: a job of 64
# accelerators or fewer is the step alone, one of 72 or more counts them
# whole.
FAILURES_ABOVE = 64.0
FAILURES_RAMP = 8.0
CHECKPOINTS = ('full', 'incremental')
TRANSFORMS = ('preprocessed', 'online')
HOUR_S = 3600.0


@functools.cache
def raw() -> dict:
  """`codesign/data/whole_system.json` as read."""
  return json.loads((DATA_DIR / 'whole_system.json').read_text())


@dataclasses.dataclass(frozen=True)
class Node:
  """A CPU server of the system (a reader, or a storage node's head).

  Attributes:
    usd: price of the node with its NICs.
    w: power of its parts at TDP (the model adds fans and supplies:
      `model.terms.budget.wall_power`).
    cores: CPU cores.
    nic_bps: NIC bandwidth, B/s per direction (all its NICs).
    nic_gbit_per_s: the same in Gb/s.
  """

  usd: float
  w: float
  cores: float
  nic_bps: float
  nic_gbit_per_s: float


@dataclasses.dataclass(frozen=True)
class Parts:
  """The system's numbers in SI (from `whole_system.json`).

  Attributes:
    reader: the reader node (`Node`).
    storage: the storage node's head (`Node`; its drives apart).
    storage_usd, storage_w: a storage node whole (head and drives; W
      at the parts' TDP).
    storage_read_bps, storage_write_bps: what one storage node reads and
      writes, B/s (its drives, its NICs and the erasure code).
    storage_bytes: bytes one storage node keeps (after the code).
    per_core_bps: a preprocessed sample's output, B/s per reader core.
    online_bps: an online-transformed sample's output, B/s per reader.
    transforms: workload name -> transform ('default' for the others).
    format: the storage format's bytes (label, dense, id, length).
    trainer_frontend_bps: a trainer node's front-end port, B/s.
    port_usd_per_bps, port_w_per_bps: the front-end network per B/s of
      an endpoint's line rate (switch ports and links).
    nic_usd_per_bps: a NIC per B/s (the trainers' NICs are theirs).
    headroom: readers sized this much above the trainers' rate.
    gpu_fail_per_s, node_fail_per_s: failure rates.
    restart_s: seconds to restart before reading the checkpoint back.
    write_reduction, capacity_reduction: Check-N-Run's incremental
      checkpoint against a full one (bytes written, bytes kept).
    retained: checkpoints kept.
    write_target_s: storage is sized to write one in this many seconds.
    sources: key -> where the number comes from.
  """

  reader: Node
  storage: Node
  storage_usd: float
  storage_w: float
  storage_read_bps: float
  storage_write_bps: float
  storage_bytes: float
  per_core_bps: float
  online_bps: float
  transforms: tuple
  format: tuple
  trainer_frontend_bps: float
  port_usd_per_bps: float
  port_w_per_bps: float
  nic_usd_per_bps: float
  headroom: float
  gpu_fail_per_s: float
  node_fail_per_s: float
  restart_s: float
  write_reduction: float
  capacity_reduction: float
  retained: float
  write_target_s: float
  sources: tuple


def _node(d: dict) -> Node:
  """A CPU server of section `d`: the catalog CPU with its DDR, NICs
  priced and powered as the platform presets' (imported late: the
  presets import the catalog), the chassis as assumed; W at TDP."""
  from codesign.spec import platform_presets as pp

  cpu = catalog.cpu(d['cpu'], d['ddr_gb_per_socket'])
  sockets = d['sockets']
  gbit = d['nics'] * d['nic_gbit_per_s']
  ddr = float(cpu.ddr_capacity)
  usd = (
    d['chassis_usd']
    + sockets * (float(cpu.price) + ddr * float(cpu.ddr_price))
    + gbit * pp.NIC_USD_PER_GBITPS
  )
  parts_w = (
    d['chassis_w']
    + sockets * (float(cpu.power) + ddr * float(cpu.ddr_power))
    + gbit * pp.NIC_W_PER_GBITPS
  )
  cores = sockets * catalog.raw()['cpus'][d['cpu']]['cores']
  return Node(usd, parts_w, float(cores), gbit * 1e9 / 8, gbit)


def _storage(d: dict) -> tuple:
  """(USD, W, read B/s, write B/s, bytes kept) of one storage node."""
  head = _node(d)
  n, tb = d['drives'], d['drive_tb']
  usd = head.usd + n * tb * 1e3 * d['drive_usd_per_gb']
  w = head.w + n * d['drive_w']
  read = min(n * d['drive_read_gbyte_per_s'] * GB, head.nic_bps)
  write = min(n * d['drive_write_gbyte_per_s'] * GB, head.nic_bps)
  code = d['erasure_overhead']
  return head, usd, w, read, write / code, n * tb * 1e12 / code


def _network() -> tuple:
  """(USD, W per B/s of an endpoint) of the front-end network."""
  from codesign.spec import platform_presets as pp

  f = raw()['frontend_network']
  per_gbit_usd = (
    f['switch_ports_per_endpoint'] * pp.SWITCH_USD_PER_GBITPS
    + f['links_per_endpoint'] * pp.LINK_USD_PER_GBITPS
  )
  per_gbit_w = (
    f['switch_ports_per_endpoint'] * pp.SWITCH_W_PER_GBITPS
    + f['links_per_endpoint'] * pp.LINK_W_PER_GBITPS
  )
  bps = 1e9 / 8
  return per_gbit_usd / bps, per_gbit_w / bps, pp.NIC_USD_PER_GBITPS / bps


@functools.cache
def parts() -> Parts:
  """The system's numbers (`Parts`), read once."""
  d = raw()
  head, s_usd, s_w, s_read, s_write, s_bytes = _storage(d['storage_node'])
  port_usd, port_w, nic_usd = _network()
  f, c, t = d['failures'], d['checkpoint'], d['transforms']
  fmt = d['formats']['raw']
  return Parts(
    reader=_node(d['reader_node']),
    storage=head,
    storage_usd=s_usd,
    storage_w=s_w,
    storage_read_bps=s_read,
    storage_write_bps=s_write,
    storage_bytes=s_bytes,
    per_core_bps=t['preprocessed']['output_bytes_per_s_per_core'],
    online_bps=t['online']['output_bytes_per_s_per_node'],
    transforms=tuple(
      (k, v)
      for k, v in t['by_workload'].items()
      if k not in ('source', 'confidence')
    ),
    format=tuple(
      (k, v) for k, v in fmt.items() if k not in ('source', 'confidence')
    ),
    trainer_frontend_bps=d['trainer_frontend']['nic_gbit_per_s_per_node']
    * 1e9
    / 8,
    port_usd_per_bps=port_usd,
    port_w_per_bps=port_w,
    nic_usd_per_bps=nic_usd,
    headroom=d['readers']['headroom'],
    gpu_fail_per_s=f['per_gpu_per_hour'] / HOUR_S,
    node_fail_per_s=f['per_node_per_hour'] / HOUR_S,
    restart_s=d['restart']['seconds'],
    write_reduction=c['incremental_write_reduction'],
    capacity_reduction=c['incremental_capacity_reduction'],
    retained=float(c['retained']),
    write_target_s=c['write_target_s'],
    sources=_sources(d),
  )


def _sources(d: dict) -> tuple:
  """(section, source and confidence) of every section with a source."""
  out = []
  for key, v in d.items():
    if isinstance(v, dict) and 'source' in v:
      out.append((key, f'{v["source"]} ({v.get("confidence", "")})'))
    elif isinstance(v, dict):
      for sub, x in v.items():
        if isinstance(x, dict) and 'source' in x:
          out.append((f'{key}.{sub}', f'{x["source"]} ({x["confidence"]})'))
  return tuple(out)


@dataclasses.dataclass(frozen=True)
class WholeSystem:
  """How the system around the trainers is built (hashable, static).

  Attributes:
    readers: `local` (the data already on the trainers: no readers, no
      storage, the step alone), `auto` (reader nodes sized to feed the
      trainers, `Parts.headroom` above their rate) or a count (int) of
      reader nodes: the step then runs no faster than they feed it.
    with_failures: count failures: the throughput is the goodput (the
      share of wall time that trains, checkpoints at the Young/Daly
      interval, lost work and restarts deducted) and the bill holds the
      checkpoints' storage; `auto`: above `FAILURES_ABOVE` accelerators
      (`failure_weight`).
    checkpoint: `full` or `incremental` (Check-N-Run: the modified rows,
      quantized).
    transform: `preprocessed` or `online` (what a reader does per
      sample), or None: the workload's (`transform_of`).
    dataset_samples: samples the dataset holds (stored on the storage
      nodes), where its workload has no dataset in `convergence.json`.
  """

  readers: str | int = 'local'
  with_failures: bool | str = False
  checkpoint: str = 'full'
  transform: str | None = None
  dataset_samples: float = 1e9

  @property
  def local(self) -> bool:
    return self.readers == 'local'

  @property
  def active(self) -> bool:
    """Whether the system may change anything of the step alone."""
    return not self.local or self.with_failures is not False


def failure_weight(s: WholeSystem, accelerators):
  """How much failures count on a job of `accelerators` (may be traced):
  1 with failures, 0 without; `auto`: 0 up to `FAILURES_ABOVE`, 1 from
  `FAILURES_ABOVE + FAILURES_RAMP`, linear between (exact at whole
  nodes of 8)."""
  if s.with_failures is True:
    return 1.0
  if s.with_failures is False:
    return 0.0
  x = (accelerators - FAILURES_ABOVE) / FAILURES_RAMP
  if isinstance(x, (int, float)):
    return min(max(float(x), 0.0), 1.0)
  return x.clip(0.0, 1.0)


def check(s: WholeSystem) -> WholeSystem:
  """`s`, or `InputError` with one sentence for a bad setting."""
  r = s.readers
  if isinstance(r, bool) or not (
    r in READERS or (isinstance(r, int) and r >= 1)
  ):
    raise InputError(
      f'readers must be local, auto or a count of reader nodes of at '
      f'least 1, got {r!r}'
    )
  if s.with_failures not in FAILURES:
    raise InputError(
      f'with_failures must be true, false or auto, got {s.with_failures!r}'
    )
  if not (math.isfinite(s.dataset_samples) and s.dataset_samples > 0):
    raise InputError(
      f'dataset_samples must be positive, got {s.dataset_samples}'
    )
  if s.checkpoint not in CHECKPOINTS:
    raise InputError(
      f'checkpoint must be one of {", ".join(CHECKPOINTS)}, got '
      f'{s.checkpoint!r}'
    )
  if s.transform is not None and s.transform not in TRANSFORMS:
    raise InputError(
      f'transform must be one of {", ".join(TRANSFORMS)}, got {s.transform!r}'
    )
  return s


def readers_setting(text: str) -> str | int:
  """The --readers flag: `local`, `auto` or a whole count of at least 1
  (`InputError` otherwise)."""
  t = str(text).strip()
  if t in READERS:
    return t
  try:
    n = float(t)
  except ValueError:
    n = math.nan
  if not (math.isfinite(n) and n >= 1 and n == int(n)):
    raise InputError(
      f'--readers must be local, auto or a whole number of reader nodes of '
      f'at least 1, got {text!r}'
    )
  return int(n)


def failures_setting(text) -> bool | str:
  """The --with_failures flag: true, false or auto (`InputError`
  otherwise)."""
  t = str(text).strip().lower()
  table = {'true': True, 'yes': True, 'false': False, 'no': False}
  if t == 'auto':
    return 'auto'
  if t not in table:
    raise InputError(
      f'--with_failures must be true, false or auto, got {text!r}'
    )
  return table[t]


def from_settings(
  readers='local', with_failures=False, checkpoint='full', samples=1e9
) -> WholeSystem:
  """The checked `WholeSystem` of the flags as given (`--readers`,
  `--with_failures`, `--checkpoint`, in text or as values) and the
  dataset's `samples` (`InputError` with one sentence for a bad one)."""
  return check(
    WholeSystem(
      readers=readers_setting(readers),
      with_failures=failures_setting(with_failures),
      checkpoint=checkpoint,
      dataset_samples=float(samples),
    )
  )


def transform_of(s: WholeSystem, workload_name: str) -> str:
  """The reader's transform for a workload: the setting's, else the
  data file's for the workload (`transforms.by_workload`)."""
  if s.transform is not None:
    return s.transform
  table = dict(parts().transforms)
  return table.get(workload_name, table['default'])
