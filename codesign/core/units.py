"""The one place where boundary units are converted to SI and back.

Inside codesign every number is SI: seconds, bytes, bytes/s, FLOP/s, W, USD.
At the boundaries (JSON files, `--override`, printed tables) numbers carry
their unit in the key name, e.g. `hbm_bandwidth_gb_per_s`. Decimal prefixes
throughout (1 GB = 1e9 B), as vendors quote bandwidth and as the catalog uses;
only the capacity of a memory part sold in binary gigabytes is read as GiB
(`GIB`) where it enters.
"""

# unit suffix -> multiplier that turns a boundary value into SI.
UNITS: dict[str, float] = {
  'count': 1.0,
  'fraction': 1.0,
  'bytes': 1.0,
  'gb': 1e9,  # capacity, 1e9 bytes
  'gb_per_s': 1e9,  # bandwidth, 1e9 bytes/s per direction
  'gbit_per_s': 1e9 / 8.0,  # line rate of NICs, gigabits/s per direction
  'tflops': 1e12,  # FLOP/s
  'us': 1e-6,  # latency, microseconds
  's': 1.0,
  'usd': 1.0,
  'usd_per_gb': 1e-9,  # USD per 1e9 bytes -> USD per byte
  'w': 1.0,
  'w_per_gb': 1e-9,  # W per 1e9 bytes -> W per byte
  'usd_per_gb_per_s': 1e-9,  # USD per GB/s -> USD per byte/s
  'w_per_gb_per_s': 1e-9,  # W per GB/s -> W per byte/s
  'usd_per_gbit_per_s': 8e-9,  # USD per Gb/s -> USD per byte/s
  'w_per_gbit_per_s': 8e-9,  # W per Gb/s -> W per byte/s
}

GB = 1e9
# A binary gigabyte: memory parts are sold in it (an "80 GB" HBM stack
# holds 80 x 2^30 bytes), so a capacity quoted in a part's name is GiB.
GIB = float(2**30)
TFLOPS = 1e12


def to_si(value: float, unit: str) -> float:
  """Converts a boundary value in `unit` to SI."""
  return float(value) * UNITS[unit]


def from_si(value: float, unit: str) -> float:
  """Converts an SI value to the boundary `unit`."""
  return float(value) / UNITS[unit]


def from_si_exact(value: float, unit: str) -> float:
  """`from_si`, nudged by an ulp where needed so that `to_si` of the result
  gives `value` back bit for bit (dumped configs reproduce runs exactly)."""
  import math

  scale = UNITS[unit]
  out = float(value) / scale
  if out * scale == value:
    return out
  for cand in (math.nextafter(out, math.inf), math.nextafter(out, -math.inf)):
    if cand * scale == value:
      return cand
  return out


def on_boundary_grid(value: float, unit: str) -> float:
  """The SI value nearest `value` that a JSON file in `unit` holds exactly:
  not every double of seconds is some double of microseconds times 1e-6,
  so a fitted value is written as one that is, and a file read back
  reproduces it bit for bit."""
  return to_si(from_si(value, unit), unit)
