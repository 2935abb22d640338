"""Catalog parts as rows of numbers, and their relaxed mixtures.

The design space (`codesign.search.design_space`) relaxes the choice of an
accelerator or CPU part to mixture weights over the catalog's parts; a
mixture is the weighted geometric mean of the parts' rows (so a one-hot
weight vector is exactly the part). A row holds the part's dataclass
leaves (`hardware.Accelerator` / `hardware.CpuSocket`, SI units) and the
per-part numbers the platform does not hold directly (the `*_AUX` names:
fabric links and bandwidth, PCIe x16 bandwidth of the part's generation,
the accelerator's fabric domain in the design space, the CPU's socket
range, DDR per socket and channels, PCIe lanes per socket alone and in
a multi-socket node, `codesign.search.buildability`; its NIC post
overhead and its 2DPC DDR speed share, `codesign.spec.dimms`).
`default_parts` and `select_parts` say which parts a space offers (the
user's --only_parts, --exclude_parts and --available_by).

Prices the user sets (--price PART=USD) are data passed explicitly, never
global state: `Prices` pairs (catalog part, USD each), read by
`parse_prices`, carried by the design space into the part rows
(`tables`) and applied to any concrete platform by `priced` (the presets
too). An accelerator's price is the part as bought, with its HBM (the
catalog's `price_usd_rough` convention); the model splits it into the
board (`Accelerator.price`) and the HBM at the assumed $/GB
(`board_price`).
"""

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from codesign.core.errors import InputError
from codesign.core.pytree import replace
from codesign.core.units import GB
from codesign.search import buildability
from codesign.spec import catalog, dimms, hardware, platform_presets

# (catalog part name, USD of one part), sorted by name; hashable, so a
# design space can carry it.
Prices = tuple[tuple[str, float], ...]

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
ACC_AUX = (
  'links',
  'link_bandwidth',
  'pcie_bandwidth',
  'fabric_domain',
  'c2c_bandwidth',
  'nvls_share',
)
# A part's `nvls_share` where its switch does not reduce (positive: rows
# mix in log space; a mixture with such a part is all but without it).
NO_NVLS = 1e-6
CPU_AUX = (
  'pcie_x16_bandwidth',
  'max_sockets',
  'max_ddr',
  'min_sockets',
  'ddr_channels',
  'pcie_lanes',
  'pcie_lanes_multi',
  'nic_post_overhead',
  'ddr_speed_2dpc',
)


def accelerator_row(
  name: str, prices: Prices = (), system: str = 'board'
) -> list[float]:
  """The accelerator's row: ACC_FIELDS then ACC_AUX, SI; its price is the
  one `prices` sets, if any; its fabric domain on the topology of
  `system`; its NVLink-C2C rate per direction (a superchip's host link;
  its x16 rate for a part on PCIe, which reads none); whether its switch
  reduces on that topology (NVLink SHARP: 1, else `NO_NVLS`)."""
  a = priced_accelerator(catalog.accelerator(name), prices)
  d = catalog.raw()['accelerators'][name]
  x16 = catalog.pcie_x16_bandwidth(d['pcie_gen'])
  c2c = buildability.catalog_facts()[name]['c2c']
  topology = buildability.part_topology(name, system) or 'switch'
  nvls = platform_presets.accel_fabric(name, topology).in_switch_reduction
  aux = [
    # A card without NVLink (L40S) at the floors (`buildability.NO_*`).
    max(float(d['link_count']), buildability.NO_LINKS),
    max(d['link_bw_GBps_per_direction'] * GB, buildability.NO_LINK_BANDWIDTH),
    x16,
    buildability.design_domain(name, system),
    x16 if c2c is None else c2c,
    1.0 if nvls else NO_NVLS,
  ]
  return [float(getattr(a, f)) for f in ACC_FIELDS] + aux


def cpu_row(name: str, prices: Prices = ()) -> list[float]:
  """The CPU's row: CPU_FIELDS then CPU_AUX, SI; its price is the one
  `prices` sets, if any."""
  c = priced_cpu(catalog.cpu(name, 64), prices)
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
    platform_presets.POST_OVERHEAD_S[catalog.host_vendor(name)],
    dimms.speed_2dpc(name),
  ]
  return [float(getattr(c, f)) for f in CPU_FIELDS] + aux


def tables(
  accelerators: tuple[str, ...],
  cpus: tuple[str, ...],
  prices: Prices = (),
  system: str = 'board',
) -> tuple[np.ndarray, np.ndarray]:
  """(accelerator table (A, F_a), CPU table (C, F_c)) of the named catalog
  parts, one row per part, SI, all positive; prices as `prices` sets
  them, else the catalog's; fabric domains on `system`'s topology."""
  acc = np.array([accelerator_row(n, prices, system) for n in accelerators])
  cpu = np.array([cpu_row(n, prices) for n in cpus])
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


def default_parts(
  system: str = 'board',
) -> tuple[tuple[str, ...], tuple[str, ...]]:
  """(accelerators, CPUs) of the default space of a system class
  (`buildability.SYSTEM_TOPOLOGY`): every modelled catalog part it can
  wire (`buildability.in_system`: the board space no PCIe card, whose
  peers are over PCIe, nor a superchip GPU, whose host is its Grace; the
  PCIe space the bridged cards; the superchip space GH200 and GB200),
  accelerators by bf16 FLOP/s then HBM bandwidth, and its hosts
  (`buildability.in_system_cpus`: DIMM sockets, or Grace for the
  superchips) by DDR bandwidth per socket."""
  raw = catalog.raw()
  acc = sorted(
    (
      n
      for n in catalog.accelerator_names()
      if buildability.in_system(n, system)
    ),
    key=lambda n: (
      float(catalog.accelerator(n).peak_flops_bf16),
      float(catalog.accelerator(n).hbm_bandwidth),
    ),
  )
  cpu = sorted(
    (n for n in raw['cpus'] if buildability.in_system_cpus(n, system)),
    key=lambda n: (raw['cpus'][n]['ddr_bw_GBps_per_socket'], n),
  )
  return tuple(acc), tuple(cpu)


def modelled_parts() -> tuple[str, ...]:
  """Every part a search may offer, over the system classes: what a
  user's --only_parts, --exclude_parts and --price may name."""
  out = {}
  for system in buildability.SYSTEM_TOPOLOGY:
    acc, cpu = default_parts(system)
    out.update(dict.fromkeys(acc + cpu))
  return tuple(out)


def select_parts(
  exclude: tuple[str, ...] = (),
  only: tuple[str, ...] = (),
  available_by: int | None = None,
  system: str = 'board',
) -> tuple[tuple[str, ...], tuple[str, ...]]:
  """The (accelerators, CPUs) of the default space of `system` shaped by
  the user (names of catalog parts or their beginnings, such as 'H100'
  or 'EPYC'): `only` keeps, on each part axis it names parts of, just
  those; `exclude` drops parts; `available_by` keeps parts the catalog
  dates (`year`) no later than that year. An axis left with one part
  repeats it (a mixture of a part with itself is the part).

  Raises:
    InputError: an unknown part name (valid names listed), or an axis
      left without parts (saying which choice emptied it).
  """
  raw = catalog.raw()
  acc, cpu = default_parts(system)
  exclude, only = _expand(exclude), _expand(only)
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


def _expand(given) -> set[str]:
  return {n for name in given for n in matching_parts(name)}


def system_parts(
  systems: tuple[str, ...],
  exclude: tuple[str, ...] = (),
  only: tuple[str, ...] = (),
  available_by: int | None = None,
) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
  """system -> (accelerators, CPUs) (`select_parts`) for each of
  `systems` the user's choice leaves parts in. A system is left out
  where `only` names parts of an axis (accelerators or CPUs) and none of
  that system's, or where nothing of it is left by `exclude` or
  `available_by`: --only_parts=H100 searches the H100 boards and cards,
  not the superchips.

  Raises:
    InputError: an unknown part name, or no system left (the first
      system's sentence).
  """
  named = _expand(only)
  every = {s: default_parts(s) for s in systems}
  # The axes (0: accelerators, 1: CPUs) the user names parts of.
  axes = [named & {n for p in every.values() for n in p[k]} for k in (0, 1)]
  out, first = {}, None
  for system, parts in every.items():
    if any(axes[k] and not axes[k] & set(parts[k]) for k in (0, 1)):
      continue
    try:
      out[system] = select_parts(exclude, only, available_by, system)
    except InputError as e:
      first = first or e
  if not out:
    raise first or InputError(
      '--only_parts leaves no system class to search: ' + ', '.join(systems)
    )
  return out


def cpu_trainer_parts(
  exclude: tuple[str, ...] = (),
  only: tuple[str, ...] = (),
  available_by: int | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
  """(accelerators, CPUs) of the CPU trainer's space: the DIMM sockets
  the user's choice leaves (`select_parts` of the board system's CPUs;
  names of accelerators in `only` do not empty it) and the board
  system's accelerators as its unused placeholder."""
  acc, cpu = default_parts('board')
  only_cpus = tuple(n for n in _expand(only) if n in cpu)
  exclude_cpus = tuple(n for n in _expand(exclude) if n in cpu)
  _, cpus = select_parts(exclude_cpus, only_cpus, available_by, 'board')
  return acc, cpus


# The first year each catalog NIC line rate (Gb/s) shipped in servers
# (`--available_by` keeps the rates sold by then). Confidence medium: the
# adapters' launch, not one catalog of dates. 100: Mellanox ConnectX-4
# (EDR / 100GbE), 2015, the NICs of Big Basin and Zion; 200: ConnectX-6
# (HDR / 200GbE), HDR clusters deployed in 2019 (Mellanox, "InfiniBand
# In-Network Computing Technology and Roadmap", 2019-09); 400: ConnectX-7
# (NDR), first in DGX H100, 2022 (catalog links.network_nic nics); 800:
# ConnectX-8, first in GB300 NVL72 systems, 2025 (catalog nics).
NIC_YEARS = {100: 2015, 200: 2019, 400: 2022, 800: 2025}


def nic_rates(available_by: int | None = None) -> tuple[int, ...]:
  """The catalog NIC line rates (Gb/s, `links.network_nic`), those that
  shipped by `available_by` (`NIC_YEARS`) when given.

  Raises:
    InputError: no rate shipped by then (the earliest named)."""
  rates = tuple(catalog.raw()['links']['network_nic']['ethernet_roce_Gbps'])
  if available_by is None:
    return rates
  kept = tuple(r for r in rates if NIC_YEARS[r] <= available_by)
  if not kept:
    first = min(rates, key=NIC_YEARS.get)
    raise InputError(
      f'no NIC line rate is available by {available_by}: the earliest is '
      f'{first} Gb/s ({NIC_YEARS[first]})'
    )
  return kept


def matching_parts(name: str) -> list[str]:
  """The catalog parts a user's name stands for: the name itself, or every
  part it begins (case aside): 'H100', 'EPYC', 'Xeon-Platinum-8480+'.

  Raises:
    InputError: no part (valid names listed).
  """
  parts = modelled_parts()
  hits = [n for n in parts if n.lower().startswith(name.lower())]
  if not name or not hits:
    raise InputError(
      f'unknown part {name!r}; valid parts (or their beginnings): '
      + ', '.join(parts)
    )
  return hits


# ---- prices ----------------------------------------------------------------


def _is_accelerator(name: str) -> bool:
  return name in catalog.raw()['accelerators']


def catalog_price_usd(name: str) -> float:
  """USD of one catalog part as bought: an accelerator with its HBM (the
  board price plus the HBM at the assumed $/GB: the catalog's
  `price_usd_rough` where it gives one), a CPU per socket."""
  if _is_accelerator(name):
    a = catalog.accelerator(name)
    return float(a.price) + float(a.hbm_capacity) * float(a.hbm_price)
  return float(catalog.cpu(name, 64).price)


def board_price(part, usd: float) -> float:
  """The model's `price` of a part (`hardware.Accelerator` or `CpuSocket`)
  sold at `usd` each: an accelerator's HBM (its capacity at its $/GB) is
  priced apart, so its board costs the rest; a CPU costs `usd`."""
  if isinstance(part, hardware.Accelerator):
    return usd - float(part.hbm_capacity) * float(part.hbm_price)
  return usd


def low_confidence_price(name: str) -> bool:
  """Whether the price of catalog part `name` is uncertain: the catalog's
  `confidence` names 'low' (it does so for the price where it is the
  weak number: 'high (specs); low (price)'), or the catalog gives no
  price, so that `codesign.spec.catalog` derives or assumes one (its source
  says how)."""
  table = 'accelerators' if _is_accelerator(name) else 'cpus'
  d = catalog.raw()[table][name]
  return 'low' in str(d.get('confidence', '')).lower() or not d.get(
    'price_usd_rough'
  )


def price_usd(name: str, prices: Prices = ()) -> float:
  """USD of one part `name`: set in `prices`, else the catalog's."""
  return dict(prices).get(name, None) or catalog_price_usd(name)


def _priced(part, prices: Prices):
  given = dict(prices)
  if part.name not in given:
    return part
  usd = given[part.name]
  why = (
    f'user: {usd:,.0f} USD each (--price'
    + (', with its HBM' if isinstance(part, hardware.Accelerator) else '')
    + f'; catalog {catalog_price_usd(part.name):,.0f})'
  )
  sources = tuple((k, why if k == 'price' else v) for k, v in part.sources)
  return replace(part, price=board_price(part, usd), sources=sources)


def priced_accelerator(a: hardware.Accelerator, prices: Prices):
  """`a` at the price `prices` sets for its name (the board: the price
  less its HBM), with that source; else `a` as it is."""
  return _priced(a, prices)


def priced_cpu(c: hardware.CpuSocket, prices: Prices):
  """`c` at the price `prices` sets for its name, with that source; else
  `c` as it is."""
  return _priced(c, prices)


def priced(p: hardware.Platform, prices: Prices) -> hardware.Platform:
  """Platform `p` with its accelerator and CPU at the prices `prices`
  sets for their names (catalog parts; a preset's own part, such as
  Zion's OAM module, keeps its price). Concrete platforms only."""
  if not prices:
    return p
  return replace(
    p,
    accelerator=priced_accelerator(p.accelerator, prices),
    cpu=priced_cpu(p.cpu, prices),
  )


def parse_prices(items) -> Prices:
  """`Prices` from the user's 'PART=USD' strings (--price; a string may
  hold several, comma-separated): PART a catalog part or the beginning of
  exactly one; USD the price of one part, an accelerator with its HBM.

  Raises:
    InputError: one sentence for a malformed item, an unknown or
      ambiguous part, a part given twice, or a price that is not a
      positive number or puts the part outside the model's bounds.
  """
  out = {}
  for item in [x for given in items for x in str(given).split(',')]:
    part, sep, value = item.partition('=')
    part, value = part.strip(), value.strip()
    if not sep or not part or not value:
      raise InputError(
        f'--price takes PART=USD (e.g. H100=25000), got {str(item)!r}'
      )
    hits = matching_parts(part)
    exact = [n for n in hits if n.lower() == part.lower()]
    board = [n for n in hits if n in sum(default_parts('board'), ())]
    if len(hits) > 1 and not exact and len(board) == 1:
      exact = board  # 'H100': the SXM module, not its PCIe cards
    if len(hits) > 1 and not exact:
      raise InputError(
        f'--price {item!r}: {part!r} begins several parts ('
        + ', '.join(hits)
        + '); name one'
      )
    name = (exact or hits)[0]
    try:
      usd = float(value)
    except ValueError:
      usd = math.nan
    if not (math.isfinite(usd) and usd > 0):
      raise InputError(
        f'--price {item!r}: the price must be a positive number of USD, '
        f'got {value!r}'
      )
    if name in out:
      raise InputError(f'--price sets the price of {name} twice')
    _check_bounds(name, usd, item)
    out[name] = usd
  return tuple(sorted(out.items()))


def _check_bounds(name: str, usd: float, item) -> None:
  """Raises InputError if `usd` puts part `name` outside the model's
  bounds (`hardware.BOUNDS` of its `price`)."""
  if _is_accelerator(name):
    a = catalog.accelerator(name)
    lo, hi = hardware.BOUNDS['accelerator.price']
    board = board_price(a, usd)
    if not lo <= board <= hi:
      hbm = float(a.hbm_capacity) * float(a.hbm_price)
      raise InputError(
        f'--price {item!r}: {name} less its HBM ({hbm:,.0f} USD at the '
        f'assumed $/GB) leaves a board price of {board:,.0f} USD, outside '
        f"the model's {lo:,.0f} to {hi:,.0f} USD"
      )
    return
  lo, hi = hardware.BOUNDS['cpu.price']
  if not lo <= usd <= hi:
    raise InputError(
      f'--price {item!r}: a CPU price must be {lo:,.0f} to {hi:,.0f} USD '
      'in the model'
    )


def price_info(name: str, prices: Prices = ()) -> dict:
  """What prices catalog part `name`, as result.json keeps it: `part`,
  `price_usd` (one part, an accelerator with its HBM), `catalog_price_usd`,
  `set_by_flag` (--price), `low_confidence` (`low_confidence_price`),
  `confidence` (the catalog's words) and `price_source` (the catalog
  entry, or how `codesign.spec.catalog` derives or assumes the price)."""
  table = 'accelerators' if _is_accelerator(name) else 'cpus'
  part = (
    catalog.accelerator(name)
    if table == 'accelerators'
    else catalog.cpu(name, 64)
  )
  return {
    'part': name,
    'price_usd': price_usd(name, prices),
    'catalog_price_usd': catalog_price_usd(name),
    'set_by_flag': name in dict(prices),
    'low_confidence': low_confidence_price(name),
    'confidence': str(catalog.raw()[table][name].get('confidence', '')),
    'price_source': dict(part.sources)['price'],
  }
