"""DDR as it is bought: DIMMs of a size, one or two per channel.

Two facts of the market and of the memory controllers decide what host
DDR costs and how fast it runs:
- price per GB rises with the DIMM's size: up to `MONOLITHIC_DIMM_GB` a
  registered DIMM is built from single DRAM dies (commodity price); a
  larger one stacks dies in TSV (3DS) packages, `height` = size /
  `MONOLITHIC_DIMM_GB` dies high, and its price per GB grows as
  `height ** STACK_PRICE_EXPONENT` (`usd_per_gb`);
- two DIMMs on a channel (2DPC) run the channel slower than one: each
  CPU's 2DPC speed over its 1DPC speed is `SPEED_2DPC` (the vendors'
  memory population guides), so a socket's DDR bandwidth is its 1DPC
  bandwidth x `speed_share`.

Every function is smooth in its traced arguments (no branches: `jnp`
clips and polynomials), exact at the sizes sold, so the relaxed search
sees a price and a bandwidth with finite gradients between them.
"""

import math

import jax.numpy as jnp
import numpy as np

from codesign.core.units import GB

# A 2-rank x4 RDIMM of 36 packages of single 16 Gb dies holds 64 GB of data
# (36 x 2 GB, 4 of the 36 for ECC): the largest DIMM without stacked dies.
# TrendForce (Q2 2023): 128 GB DDR5 RDIMMs need TSV packages since DDR5
# monolithic dies are mostly 16 Gb (https://crn.pl/aktualnosci/
# problem-z-pamieciami-do-serwerow-to-sie-odbije-na-cenach/, medium).
MONOLITHIC_DIMM_GB = 64.0
# USD per GB of a monolithic-die RDIMM: the catalog's DDR5 price
# (links.memory_price.ddr5_usd_per_GB, DRAMeXchange spot Oct 2023, low),
# agreeing with TrendForce's 32 GB DDR5 RDIMM contract price of $80-90 in
# Q2 2023 ($2.5-2.8/GB; crn.pl above, medium).
MONOLITHIC_USD_PER_GB = 2.4
# USD per GB of a 256 GB DDR5 RDIMM (4 dies high): Nemix's kit of 16 x
# 256 GB DDR5-6400 RDIMMs at $70,800, $17.3/GB (TechPowerUp via
# https://3dnews.ru/1134567/, Dec 2025, low: one seller, a DRAM shortage).
STACKED_256_USD_PER_GB = 17.3
# Price per GB grows as height ** this: 2.4 x 4 ** k = 17.3 (derived from
# the two prices above); 128 GB (2 high) then costs 6.4 $/GB.
STACK_PRICE_EXPONENT = math.log(
  STACKED_256_USD_PER_GB / MONOLITHIC_USD_PER_GB
) / math.log(256.0 / MONOLITHIC_DIMM_GB)
# The largest DIMM bought (`buildability.DIMM_GB`); more per channel is
# two DIMMs.
LARGEST_DIMM_GB = 256.0

# CPU -> (1DPC MT/s, 2DPC MT/s, source, confidence): the DDR speed of a
# channel with one and with two RDIMMs.
_SPEEDS = {
  'Xeon-Platinum-8180 (Skylake-SP)': (
    2666,
    2666,
    'https://frankdenneman.nl/2023/02/28/sapphire-rapids-memory-'
    'configuration/ (Skylake-SP: no speed lost between 1 and 2 DPC)',
    'medium',
  ),
  'Xeon-Platinum-8280 (Cascade Lake-SP)': (
    2933,
    2666,
    'assumption: Cascade Lake-SP runs DDR4-2933 at 1DPC and 2666 at 2DPC '
    "(server vendors' population guides as recalled; not retrieved)",
    'low',
  ),
  'Xeon-Platinum-8380H (Cooper Lake-SP)': (
    3200,
    2933,
    'catalog cpus mem_type: DDR4-3200 (1DPC) / 2933 (2DPC)',
    'medium',
  ),
  'Xeon-Platinum-8480+ (Sapphire Rapids-SP)': (
    4800,
    4400,
    'https://frankdenneman.nl/2023/02/28/sapphire-rapids-memory-'
    'configuration/ (DDR5-4800 at 1DPC, 4400 at 2DPC)',
    'medium',
  ),
  'EPYC-7742 (Rome)': (
    3200,
    2933,
    'assumption: AMD EPYC 7002 population guide, DDR4-3200 at 1DPC and '
    '2933 at 2DPC (Dell PowerEdge manuals list 3200/2933/2666 MT/s; the '
    'per-DPC split as recalled)',
    'low',
  ),
  'EPYC-7763 (Milan)': (
    3200,
    2933,
    'assumption: as Rome (same SP3 memory controller speeds)',
    'low',
  ),
  'EPYC-9654 (Genoa)': (
    4800,
    3600,
    'assumption: AMD EPYC 9004 memory population guide as issue 21 '
    'reads it, DDR5-4800 at 1DPC and 3600 at 2DPC (4400 on some '
    'platforms; the lower taken); not retrieved',
    'low',
  ),
}


def speed_2dpc(cpu_name: str) -> float:
  """The CPU's 2DPC DDR speed over its 1DPC speed (1.0 for a CPU not
  listed: no loss assumed)."""
  if cpu_name not in _SPEEDS:
    return 1.0
  one, two, _, _ = _SPEEDS[cpu_name]
  return two / one


def speed_source(cpu_name: str) -> str:
  """Where `speed_2dpc` of the CPU comes from, with its confidence."""
  if cpu_name not in _SPEEDS:
    return 'assumption: no 2DPC speed known, none lost'
  one, two, src, conf = _SPEEDS[cpu_name]
  return f'{one} MT/s 1DPC, {two} 2DPC: {src} ({conf})'


def _xp(*xs):
  """numpy for concrete numbers (exact float64 prices for presets and
  snapped designs), jax.numpy for arrays that may be traced."""
  concrete = all(isinstance(x, (int, float, np.floating)) for x in xs)
  return np if concrete else jnp


def _smoothstep(t, xp):
  """3t^2 - 2t^3 of t clipped to [0, 1]: 0 and 1 at the ends with zero
  slope there."""
  t = xp.clip(t, 0.0, 1.0)
  return t * t * (3.0 - 2.0 * t)


def dimms_per_channel(per_channel_bytes):
  """DIMMs on a channel holding `per_channel_bytes`: one up to the
  largest DIMM, two at twice it (two of the largest), smooth between
  (in log size)."""
  xp = _xp(per_channel_bytes)
  c = xp.maximum(per_channel_bytes, 1.0)
  t = xp.log2(c / (LARGEST_DIMM_GB * GB))
  return 1.0 + _smoothstep(t, xp)


def speed_share(dpc, share_2dpc):
  """A channel's speed over its 1DPC speed at `dpc` DIMMs per channel
  (1 to 2): 1 at one DIMM, `share_2dpc` at two, linear between."""
  return 1.0 - (dpc - 1.0) * (1.0 - share_2dpc)


def _stack_doublings(x, xp):
  """0 for x <= 0 (monolithic), x for x >= 1, 2x^2 - x^3 between: C1
  (slope 0 at 0 and 1 at 1), in doublings of the DIMM size past
  `MONOLITHIC_DIMM_GB`."""
  t = xp.clip(x, 0.0, 1.0)
  return t * t * (2.0 - t) + xp.maximum(x - 1.0, 0.0)


def usd_per_gb(dimm_bytes):
  """USD per GB of a DIMM of `dimm_bytes`: `MONOLITHIC_USD_PER_GB` up to
  `MONOLITHIC_DIMM_GB`, x height ** `STACK_PRICE_EXPONENT` above (height
  = size / `MONOLITHIC_DIMM_GB`: 2.4 $/GB at 64 GB, 6.4 at 128, 17.3 at
  256); smooth between 64 and 128 GB."""
  xp = _xp(dimm_bytes)
  size = xp.maximum(dimm_bytes, 1.0)
  x = xp.log2(size / (MONOLITHIC_DIMM_GB * GB))
  return MONOLITHIC_USD_PER_GB * xp.exp2(
    STACK_PRICE_EXPONENT * _stack_doublings(x, xp)
  )


PRICE_SOURCE = (
  f'dimms.usd_per_gb: {MONOLITHIC_USD_PER_GB} USD/GB up to '
  f'{MONOLITHIC_DIMM_GB:g} GB DIMMs (catalog links.memory_price, '
  'TrendForce 32 GB RDIMM $80-90 Q2 2023), rising as TSV stack height '
  f'** {STACK_PRICE_EXPONENT:.3f} to {STACKED_256_USD_PER_GB} USD/GB at '
  '256 GB (Nemix 256 GB DDR5 RDIMM kit, Dec 2025); low confidence'
)


def population(per_channel_bytes, share_2dpc):
  """(DIMMs per channel, DIMM bytes, speed share, USD per byte) of a
  channel holding `per_channel_bytes` (traced or not)."""
  dpc = dimms_per_channel(per_channel_bytes)
  dimm = per_channel_bytes / dpc
  return dpc, dimm, speed_share(dpc, share_2dpc), usd_per_gb(dimm) / GB
