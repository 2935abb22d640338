"""Real parts from the catalog (`codesign/data/catalog.json`, a copy of
`shared/reference/catalog.json`), converted to SI with their sources.

Numbers the catalog lacks are *assumptions*: they are named in `ASSUMED`
with the reason, and every part records, per field, where its number came
from ('catalog: <entry> (<sources>)' or 'assumption: <why>').

A user's own parts (`codesign.spec.user_parts`, `--catalog`) join the
shipped ones inside `using(parts)`: `raw()` is the shipped catalog with
them merged in, for that block (and the threads `core.interrupts` starts
from it) only. No state outlives the block, so one run's parts never
reach another call; the search's design space records them
(`DesignSpace.user_parts`), so its cached programs are keyed by them.
"""

import contextlib
import contextvars
import dataclasses
import functools
import json

from codesign.core.errors import InputError
from codesign.core.paths import DATA_DIR
from codesign.core.units import GB, GIB, TFLOPS
from codesign.spec import dimms
from codesign.spec.hardware import REFERENCE_CPU, Accelerator, CpuSocket

# A user's parts: (table, name, the part's catalog entry as JSON text),
# sorted; hashable, so that a design space can carry it.
UserParts = tuple[tuple[str, str, str], ...]
_USER_PARTS: contextvars.ContextVar = contextvars.ContextVar(
  'codesign_user_parts', default=()
)


@functools.cache
def _shipped() -> dict:
  return json.loads((DATA_DIR / 'catalog.json').read_text())


@functools.cache
def _with_parts(parts: UserParts) -> dict:
  if not parts:
    return _shipped()
  out = dict(_shipped())
  for table in ('accelerators', 'cpus'):
    out[table] = dict(out[table])
  for table, name, text in parts:
    out[table][name] = json.loads(text)
  return out


def raw() -> dict:
  """The catalog: the shipped parts, and the user's inside `using`. Read
  only (shared between calls)."""
  return _with_parts(_USER_PARTS.get())


def user_parts() -> UserParts:
  """The user's parts in effect (`using`); () outside."""
  return _USER_PARTS.get()


@contextlib.contextmanager
def using(parts: UserParts):
  """A block in which `raw()` holds the user's `parts` too."""
  token = _USER_PARTS.set(tuple(parts))
  try:
    yield
  finally:
    _USER_PARTS.reset(token)


def is_user_part(name: str) -> bool:
  """Whether `name` is one of the user's parts in effect."""
  return any(n == name for _, n, _ in user_parts())


# Values the public record does not give. Each is a modelling parameter with
# the reasoning that picked it; issue 3 calibrates the efficiency ones.
ASSUMED = {
  'hbm_price_per_gb': (
    17.0,
    'catalog links.memory_price: H100 80 GB HBM BOM estimate ~$1,350 '
    '(~$17/GB), low confidence',
  ),
  'ddr_power_w_per_gb': (
    0.1,
    'assumption: a 64 GB DDR4/5 RDIMM draws ~5-8 W under load',
  ),
  'accel_gemm_efficiency': (
    0.8,
    'assumption: large GEMMs reach ~80% of dense peak on GPUs',
  ),
  'accel_fp32_gemm_efficiency': (
    0.8,
    'assumption: as accel_gemm_efficiency; fp32 GEMMs (SGEMM) run on the '
    'fp32 units, not the tensor cores, so they get their own number',
  ),
  'accel_gemm_half_size': (
    48.0,
    'assumption: one GEMM dimension of ~48 halves tensor-core efficiency',
  ),
  'accel_gather_efficiency': (
    0.5,
    'assumption: embedding-bag gathers reach ~50% of HBM bandwidth '
    '(torchrec planner uses 1.0 for fused kernels; 0.5 for dense)',
  ),
  'accel_update_efficiency': (
    0.5,
    'assumption: row read-modify-write (scatter-add and optimizer update) '
    'runs at the gather efficiency until a device profile measures it',
  ),
  'accel_kernel_overhead_us': (
    5.0,
    'assumption: ~5 us per kernel launch and tail on GPUs',
  ),
  'cpu_gemm_efficiency': (
    0.6,
    'assumption: AVX-512 all-core clocks run below base; ~60% of the '
    'at-base peak for large GEMMs',
  ),
  'cpu_gemm_half_size': (16.0, 'assumption: AVX-512 tiles are small'),
  'cpu_gather_efficiency': (
    0.4,
    'assumption: random 64 B reads reach ~40% of DDR stream bandwidth',
  ),
  'cpu_update_efficiency': (
    0.4,
    'assumption: row read-modify-write runs at the gather efficiency until '
    'a device profile measures it',
  ),
  'cpu_kernel_overhead_us': (
    10.0,
    'assumption: ~10 us per operator in a CPU framework',
  ),
  # Soldered LPDDR5X (Grace). NVIDIA: LPDDR5X gives 53% more bandwidth
  # than DDR5 'at one-eighth the power and at a similar cost'
  # (hardwaretimes.com Grace announcement, NVIDIA's Grace slides).
  'lpddr5x_usd_per_gb': (
    2.4,
    'assumption (L): the catalog DDR5 spot price (links.memory_price '
    'ddr5_usd_per_GB) at NVIDIA\'s "similar cost" of LPDDR5X to DDR5',
  ),
  'lpddr5x_w_per_gb': (
    0.0125,
    'assumption (L): the assumed DDR 0.1 W/GB at one-eighth the power '
    '(NVIDIA: LPDDR5X at one-eighth the power of DDR5, per bandwidth)',
  ),
}


def assumed(key: str) -> float:
  return ASSUMED[key][0]


@functools.cache
def gpu_fit() -> dict:
  """GPU numbers fitted to the published cases (`data/stack_fit.json`,
  written by experiments.calibrate): field -> (value, provenance); empty
  when no fit is shipped. They replace the assumptions of the same
  fields for every catalog accelerator."""
  path = DATA_DIR / 'stack_fit.json'
  if not path.is_file():
    return {}
  gpu = json.loads(path.read_text()).get('gpu', {})
  return {k: (float(v['value']), v['provenance']) for k, v in gpu.items()}


def _gpu_number(field: str, key: str) -> tuple[float, str]:
  """(value, source) of an accelerator efficiency field: fitted if
  shipped, else the assumption."""
  if field in gpu_fit():
    value, why = gpu_fit()[field]
    return value, 'fitted: ' + why
  return assumed(key), _assume(key)


def _src(entry: str, d: dict) -> str:
  return f'catalog: {entry} (' + '; '.join(d.get('source', [])) + ')'


def _assume(key: str) -> str:
  return 'assumption: ' + ASSUMED[key][1]


# Accelerator board prices (USD, without HBM), where the catalog gives a
# system or board price; otherwise an assumption says how it was derived.
_ACCEL_PRICE = {
  'V100-SXM2-16GB': (
    14900.0,
    'derived: DGX-1 $149k (catalog, low) minus ~$30k host, over 8 GPUs',
  ),
  'V100-SXM2-32GB': (
    14900.0,
    'derived: DGX-1 $149k (catalog, low) minus ~$30k host, over 8 GPUs',
  ),
  'A100-SXM4-40GB': (
    13640.0,
    'derived: same board as the A100-80GB ($15k HF MSRP minus 80 GB HBM)',
  ),
  'B200-HGX': (
    40000.0,
    'assumption: no public price in the catalog; ~1.3x H100',
  ),
  'MI250X-OAM': (
    12000.0,
    'assumption: no public price in the catalog',
  ),
  # PCIe cards (no public price in our sources): the SXM part of the same
  # generation at its catalog price (HF MSRP, low), scaled by the card's
  # dense bf16 rate, less its memory at the assumed HBM $/GB (17 USD).
  'A100-PCIe-80GB': (
    13640.0,
    'derived (L): the A100-SXM4-80GB $15k (HF MSRP; same GA100 die, same '
    'bf16 rate) minus 80 GB HBM',
  ),
  'H100-PCIe-80GB': (
    21578.0,
    'assumption (L): H100-SXM5 $30k (HF MSRP) x 756.5/989.4 bf16 = '
    '$22,938, minus 80 GB HBM',
  ),
  'H100-NVL-94GB': (
    23736.0,
    'assumption (L): H100-SXM5 $30k (HF MSRP) x 835.5/989.4 bf16 = '
    '$25,334, minus 94 GB HBM',
  ),
  'H200-NVL-141GB': (
    24625.0,
    'assumption (L): H200-SXM $32k (HF MSRP) x 835.5/989.4 bf16 = '
    '$27,022, minus 141 GB HBM',
  ),
  'L40S': (
    10162.0,
    'assumption (L): the H100-PCIe derived $22,938 x 362.05/756.5 bf16 = '
    '$10,978, minus 48 GB GDDR6 at the HBM $/GB',
  ),
  # Superchip GPUs (no public module price in our sources): the GPU alone,
  # its Grace priced as the CPU part (`_CPU_PRICE`), its LPDDR5X per GB.
  'GH200-H100-96GB': (
    28640.0,
    'derived (L): the H100-SXM5 $30k (HF MSRP, low) minus its 80 GB HBM '
    'at the assumed $17/GB (same GH100 die and compute)',
  ),
  'GB200-B200-186GB': (
    44444.0,
    'assumption (L): the B200-HGX assumed $40k board x 2500/2250 bf16',
  ),
}


# Maker by the beginning of a part name (catalog accelerators and CPUs):
# NVIDIA's data-centre GPUs, AMD's Instinct OAMs and EPYC, Google's TPUs,
# Intel's Xeons.
VENDOR_PREFIXES = (
  (
    ('V100', 'A100', 'H100', 'H200', 'B200', 'GH200', 'GB200', 'L40', 'Grace'),
    'nvidia',
  ),
  (('MI', 'EPYC'), 'amd'),
  (('TPU',), 'google'),
  (('Xeon',), 'intel'),
)


def vendor(part: str) -> str | None:
  """The maker of a catalog part (`stack.VENDORS`; a user's part says,
  if it does), or None when the name does not say (a preset's own part,
  such as Zion's assumed OAM)."""
  for table in ('accelerators', 'cpus'):
    entry = raw()[table].get(part, {})
    if 'user_vendor' in entry:
      return entry['user_vendor']
  for prefixes, who in VENDOR_PREFIXES:
    if part.startswith(prefixes):
      return who
  return None


def platform_vendor(p) -> str | None:
  """The maker of the device that trains platform `p` (its accelerator,
  or its CPU on a CPU trainer); None when unknown."""
  return vendor(p.cpu.name if p.trainer == 'cpu' else p.accelerator.name)


def accelerator_names() -> list[str]:
  """Catalog accelerators with the numbers the model needs."""
  return [
    n
    for n, d in raw()['accelerators'].items()
    if d['fp32_tflops'] and d['hbm_bw_GBps'] and d['tdp_w']
  ]


def accelerator(name: str) -> Accelerator:
  """The catalog accelerator `name` with SI numbers and per-field sources."""
  d = _accelerator_entry(name)
  src = _src(f'accelerators.{name}', d)
  numbers = {
    **_accelerator_compute(d, src),
    **_accelerator_memory(d, src),
    **_accelerator_efficiencies(),
    **_accelerator_cost(name, d, src),
  }
  # Sources in the order of the fields.
  order = [f.name for f in dataclasses.fields(Accelerator)]
  numbers = dict(sorted(numbers.items(), key=lambda kv: order.index(kv[0])))
  return Accelerator(
    name=name,
    **{k: v for k, (v, _) in numbers.items()},
    sources=tuple((k, why) for k, (_, why) in numbers.items()),
  )


def _accelerator_entry(name: str) -> dict:
  """The catalog entry of accelerator `name`; raises `InputError` for an
  unknown name or one without fp32 FLOP/s, HBM bandwidth or TDP."""
  parts = raw()['accelerators']
  if name not in parts:
    raise InputError(
      f'unknown accelerator {name!r}; valid choices: '
      + ', '.join(accelerator_names())
    )
  d = parts[name]
  if not d['fp32_tflops'] or not d['hbm_bw_GBps'] or not d['tdp_w']:
    raise InputError(
      f'accelerator {name!r} lacks fp32 FLOP/s, HBM bandwidth or TDP in the '
      'catalog, so it is not modelled; valid choices: '
      + ', '.join(accelerator_names())
    )
  return d


def _accelerator_compute(d: dict, src: str) -> dict:
  """Peak FLOP/s of catalog entry `d` (fp32; TF32 and bf16 falling back
  to the next rate the part has): field -> (value, source)."""
  fp32 = d['fp32_tflops']
  tf32 = d['tf32_tflops_dense'] or fp32
  bf16 = d['bf16_tflops_dense'] or d['fp16_tflops_dense'] or tf32
  tf32_src = src if d['tf32_tflops_dense'] else src + ' (no TF32: fp32 rate)'
  return {
    'peak_flops_fp32': (fp32 * TFLOPS, src),
    'peak_flops_tf32': (tf32 * TFLOPS, tf32_src),
    'peak_flops_bf16': (bf16 * TFLOPS, src),
  }


def _accelerator_memory(d: dict, src: str) -> dict:
  """HBM bandwidth, capacity and access size of catalog entry `d`: field
  -> (value, source)."""
  return {
    'hbm_bandwidth': (d['hbm_bw_GBps'] * GB, src),
    'hbm_capacity': (
      d['hbm_capacity_vendor_gb'] * GIB,
      src + ' (vendor GB of HBM are binary: 2^30 B)',
    ),
    'access_granularity': (
      64,
      'assumption: 64 B HBM access (2 x 32 B bursts)',
    ),
  }


def _accelerator_efficiencies() -> dict:
  """The efficiencies and kernel overhead every catalog accelerator
  shares (GEMM fitted where shipped, else assumed): field -> (value,
  source)."""
  return {
    'gemm_efficiency': _gpu_number('gemm_efficiency', 'accel_gemm_efficiency'),
    'gemm_half_size': _gpu_number('gemm_half_size', 'accel_gemm_half_size'),
    'fp32_gemm_efficiency': _gpu_number(
      'fp32_gemm_efficiency', 'accel_fp32_gemm_efficiency'
    ),
    'gather_efficiency': (
      assumed('accel_gather_efficiency'),
      _assume('accel_gather_efficiency'),
    ),
    'update_efficiency': (
      assumed('accel_update_efficiency'),
      _assume('accel_update_efficiency'),
    ),
    'kernel_overhead': (
      assumed('accel_kernel_overhead_us') * 1e-6,
      _assume('accel_kernel_overhead_us'),
    ),
  }


def _accelerator_cost(name: str, d: dict, src: str) -> dict:
  """Board price (without HBM: the catalog's price less HBM at the
  assumed USD/GB, or `_ACCEL_PRICE`), HBM price and TDP of accelerator
  `name` (catalog entry `d`): field -> (value, source)."""
  # The assumed USD per GB of HBM is per GB as sold (binary).
  hbm_price = assumed('hbm_price_per_gb') / GIB
  hbm = d['hbm_capacity_vendor_gb'] * GIB
  if d.get('price_usd_rough'):
    board = d['price_usd_rough'] - hbm * hbm_price
    price_src = src + ' minus HBM at the assumed $/GB'
  else:
    board, price_src = _ACCEL_PRICE[name]
  return {
    'price': (board, price_src),
    'hbm_price': (hbm_price, _assume('hbm_price_per_gb')),
    'power': (float(d['tdp_w'] or 0.0), src),
  }


_CPU_PRICE = {
  'Xeon-Platinum-8380H (Cooper Lake-SP)': (
    10009.0,
    'assumption: no list price in the catalog; the 8280 list price',
  ),
  'Xeon-Platinum-8480+ (Sapphire Rapids-SP)': (
    10710.0,
    'assumption: no list price in the catalog',
  ),
  'EPYC-7763 (Milan)': (7890.0, 'assumption: no list price in the catalog'),
  'EPYC-9654 (Genoa)': (11805.0, 'assumption: no list price in the catalog'),
  'Grace-72C-480GB (Neoverse V2)': (
    11258.0,
    'assumption (L): no public price (sold only in GH200/GB200 modules); '
    'the mean of the 2022-23 flagship sockets, Xeon 8480+ $10,710 and '
    'EPYC 9654 $11,805 (both assumed)',
  ),
}

# Cooper Lake and Sapphire Rapids run BF16 at twice the fp32 rate
# (AVX-512 BF16 / AMX); others have no 16-bit speedup.
_CPU_BF16_SPEEDUP = {
  'Xeon-Platinum-8380H (Cooper Lake-SP)': 2.0,
  'Xeon-Platinum-8480+ (Sapphire Rapids-SP)': 2.0,
}

_PCIE_X16_GBPS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 128.0}


def host_vendor(cpu_name: str) -> str:
  """'amd' for an AMD host (`vendor`), else 'intel': the two makers whose
  NIC post overheads `platform_presets.POST_OVERHEAD_S` holds (NCCL's
  getNetOverhead gives every non-AMD host, Grace too, the Intel 1 us)."""
  return 'amd' if vendor(cpu_name) == 'amd' else 'intel'


def pcie_x16_bandwidth(gen: int) -> float:
  """One direction of a PCIe x16 link of generation `gen`, B/s (catalog
  links.pcie)."""
  key = f'gen{gen}_x16'
  return raw()['links']['pcie'][key]['GBps_per_direction'] * GB


def _cpu_price(name: str, d: dict, src: str) -> tuple[float, str]:
  """(USD, source) of CPU `name`: the catalog's, else `_CPU_PRICE`."""
  if d['price_usd_rough']:
    return float(d['price_usd_rough']), src
  return _CPU_PRICE[name]


def _socket_link(d: dict, src: str) -> tuple[float, str]:
  """(GB/s per direction, source) of one inter-socket link."""
  if d['socket_link_GBps_per_direction'] is None:
    # UPI 2.0 x24 at 16 GT/s: 16e9 * 24 / 8 bytes/s.
    return 16.0 * 24 / 8, src + ' (derived: 16 GT/s x 24 lanes / 8 bits)'
  return d['socket_link_GBps_per_direction'], src


def _ddr_population(name: str, per_channel: float, dimms_per_channel):
  """(speed share, USD per GB, the population and its speed in words) of
  a channel of CPU `name` holding
  `per_channel` bytes in `dimms_per_channel` DIMMs (None: the default
  population, `dimms.dimms_per_channel`)."""
  if dimms_per_channel is None:
    dimms_per_channel = float(dimms.dimms_per_channel(per_channel))
  share = float(dimms.speed_share(dimms_per_channel, dimms.speed_2dpc(name)))
  usd_per_gb = float(dimms.usd_per_gb(per_channel / dimms_per_channel))
  words = (
    f'x {share:.4g} at {dimms_per_channel:g} DIMM(s) of '
    f'{per_channel / dimms_per_channel / GB:g} GB per channel: '
    + dimms.speed_source(name)
  )
  return share, usd_per_gb, words


def soldered_gb(name: str) -> float | None:
  """The one memory capacity (GB) of catalog CPU `name` whose memory is
  soldered on its module (Grace's LPDDR5X), None for a DIMM socket."""
  gb = raw()['cpus'].get(name, {}).get('soldered_memory_gb')
  return None if gb is None else float(gb)


def cpu(
  name: str,
  ddr_capacity_gb: float | None = None,
  dimms_per_channel: float | None = None,
) -> CpuSocket:
  """The catalog CPU `name` with `ddr_capacity_gb` of DDR on the socket,
  every channel alike with `dimms_per_channel` DIMMs (default: one DIMM
  up to the largest sold, two above: `dimms.dimms_per_channel`). The DDR
  is priced per GB at its DIMM size (`dimms.usd_per_gb`) and runs at the
  CPU's speed for that many DIMMs per channel (`dimms.speed_share`).

  A part with soldered memory (`soldered_gb`: Grace) has no DIMMs: its
  memory runs at the catalog bandwidth, is priced and powered per GB as
  LPDDR5X (`ASSUMED` lpddr5x_*), and its capacity is the part's
  (default; another capacity builds the socket, which buildability's
  `soldered` rule then refuses)."""
  parts = raw()['cpus']
  if name not in parts:
    raise InputError(
      f'unknown CPU {name!r}; valid choices: ' + ', '.join(parts)
    )
  d = parts[name]
  src = _src(f'cpus.{name}', d)
  if soldered_gb(name) is not None:
    return _soldered_cpu(name, d, src, ddr_capacity_gb)
  if ddr_capacity_gb is None:
    raise InputError(f'CPU {name!r} needs a DDR capacity (its DIMMs)')
  share, usd_per_gb, population = _ddr_population(
    name, ddr_capacity_gb * GB / d['mem_channels'], dimms_per_channel
  )
  return _socket(
    name,
    d,
    src,
    {
      'ddr_bandwidth': d['ddr_bw_GBps_per_socket'] * GB * share,
      'ddr_capacity': ddr_capacity_gb * GB,
      'ddr_price': usd_per_gb / GB,
      'power': float(d['tdp_w']),
      'ddr_power': assumed('ddr_power_w_per_gb') / GB,
    },
    {
      'ddr_bandwidth': src + f' (channels x MT/s x 8 B) {population}',
      'ddr_capacity': 'platform preset choice (DIMM population)',
      'ddr_price': dimms.PRICE_SOURCE,
      'ddr_power': _assume('ddr_power_w_per_gb'),
      'access_granularity': 'x86 cache line, 64 B',
    },
  )


def _socket(name, d, src, memory: dict, memory_sources: dict) -> CpuSocket:
  """The `CpuSocket` of catalog CPU `name` (entry `d`, source `src`): the
  fields every socket takes from the catalog and the assumptions, and
  `memory`'s (its DDR or soldered memory, and the socket's power) with
  their sources."""
  price, price_src = _cpu_price(name, d, src)
  link_bw, link_src = _socket_link(d, src)
  lanes = d['pcie_lanes']
  speedup = _CPU_BF16_SPEEDUP.get(name, d.get('bf16_over_fp32', 1.0))
  fp32 = d['peak_fp32_tflops_at_base'] * TFLOPS
  return CpuSocket(
    name=name,
    peak_flops_fp32=fp32,
    peak_flops_bf16=fp32 * speedup,
    socket_links=float(d['socket_link_count']),
    socket_link_bandwidth=link_bw * GB,
    pcie_bandwidth=pcie_x16_bandwidth(d['pcie_gen']) * lanes / 16,
    gemm_efficiency=assumed('cpu_gemm_efficiency'),
    gemm_half_size=assumed('cpu_gemm_half_size'),
    gather_efficiency=assumed('cpu_gather_efficiency'),
    update_efficiency=assumed('cpu_update_efficiency'),
    kernel_overhead=assumed('cpu_kernel_overhead_us') * 1e-6,
    price=price,
    access_granularity=64,
    **memory,
    thread_speed=thread_speed(name),
    cores=float(d.get('cores', 28)),
    sources=_cpu_sources(
      src, speedup, lanes, link_src, price_src, memory_sources
    ),
  )


def _clock_ipc(d: dict) -> float:
  """A CPU entry's boost GHz times its core's instructions per clock
  relative to Skylake-SP (catalog `max_turbo_ghz`, `ipc_vs_skylake`;
  without them, its base clock and 1)."""
  ghz = d.get('max_turbo_ghz') or d['base_ghz']
  return float(ghz) * float(d.get('ipc_vs_skylake') or 1.0)


def thread_speed(name: str) -> float:
  """Single-thread speed of catalog CPU `name` relative to the part the
  host-time constants were fitted on (`hardware.REFERENCE_CPU`, 1): boost
  clock times instructions per clock, over the reference's."""
  parts = raw()['cpus']
  if 'thread_speed' in parts[name]:  # a user's part states it
    return float(parts[name]['thread_speed'])
  return _clock_ipc(parts[name]) / _clock_ipc(parts[REFERENCE_CPU])


_CPU_SOURCE_ORDER = (
  'peak_flops_fp32',
  'peak_flops_bf16',
  'ddr_bandwidth',
  'ddr_capacity',
  'socket_links',
  'socket_link_bandwidth',
  'pcie_bandwidth',
  'gemm_efficiency',
  'gemm_half_size',
  'gather_efficiency',
  'update_efficiency',
  'kernel_overhead',
  'price',
  'ddr_price',
  'power',
  'ddr_power',
  'access_granularity',
  'thread_speed',
  'cores',
)


def _cpu_sources(src, speedup, lanes, link_src, price_src, memory: dict):
  """The per-field sources of a `cpu` socket: those every socket shares,
  and `memory`'s (its DDR or soldered memory, and the socket's power)."""
  common = {
    'peak_flops_fp32': src + ' (cores x FLOP/cycle x base GHz)',
    'peak_flops_bf16': src + f' (x{speedup} for 16-bit)',
    'socket_links': src,
    'socket_link_bandwidth': link_src,
    'pcie_bandwidth': src + f' ({lanes} lanes, catalog links.pcie)',
    'gemm_efficiency': _assume('cpu_gemm_efficiency'),
    'gemm_half_size': _assume('cpu_gemm_half_size'),
    'gather_efficiency': _assume('cpu_gather_efficiency'),
    'update_efficiency': _assume('cpu_update_efficiency'),
    'kernel_overhead': _assume('cpu_kernel_overhead_us'),
    'price': price_src,
    'power': src,
    'thread_speed': src + ' (max_turbo_ghz x ipc_vs_skylake over '
    'the reference part: thread_speed_note, thread_speed_source)',
    'cores': src,
  }
  merged = {**common, **memory}
  return tuple((k, merged[k]) for k in _CPU_SOURCE_ORDER)


def _soldered_cpu(name, d, src, ddr_capacity_gb) -> CpuSocket:
  """`cpu` for a part with soldered memory (catalog entry `d`): its
  catalog bandwidth (no DIMM derating), LPDDR5X price and power per GB;
  the socket's TDP is the catalog's (which includes its memory) less the
  memory's power at the part's own capacity, so that socket and memory
  draw the catalog TDP together."""
  fixed = soldered_gb(name)
  gb = fixed if ddr_capacity_gb is None else float(ddr_capacity_gb)
  w_per_gb = assumed('lpddr5x_w_per_gb')
  return _socket(
    name,
    d,
    src,
    {
      'ddr_bandwidth': d['ddr_bw_GBps_per_socket'] * GB,
      'ddr_capacity': gb * GB,
      'ddr_price': assumed('lpddr5x_usd_per_gb') / GB,
      'power': float(d['tdp_w']) - fixed * w_per_gb,
      'ddr_power': w_per_gb / GB,
      'memory': 'soldered',
    },
    {
      'ddr_bandwidth': src + ' (soldered memory: no DIMM derating)',
      'ddr_capacity': src + f' soldered_memory_gb ({fixed:g} GB, fixed)',
      'ddr_price': _assume('lpddr5x_usd_per_gb'),
      'power': src + f' tdp_w (with its memory) less its {fixed:g} GB at '
      'the assumed LPDDR5X W/GB',
      'ddr_power': _assume('lpddr5x_w_per_gb'),
      'access_granularity': 'Arm cache line, 64 B',
    },
  )


def nic_bandwidth(gbit_per_s: float) -> float:
  """Line rate in Gb/s to B/s per direction (catalog links.network_nic)."""
  rates = raw()['links']['network_nic']['ethernet_roce_Gbps']
  if gbit_per_s not in rates:
    raise InputError(
      f'no NIC of {gbit_per_s} Gb/s in the catalog; valid: {rates}'
    )
  return gbit_per_s * 1e9 / 8
