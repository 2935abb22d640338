"""Known answers of the DIMM price and speed terms (codesign.spec.dimms),
hand-computed from their sourced numbers, and their gradients."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core.units import GB
from codesign.spec import catalog, dimms, platform_presets

SPR = 'Xeon-Platinum-8480+ (Sapphire Rapids-SP)'
GENOA = 'EPYC-9654 (Genoa)'


def test_price_per_gb_by_dimm_size():
  """2.4 $/GB for monolithic DIMMs (16-64 GB); 2.4 x 2^k at 128 GB and
  17.3 at 256 GB, k = log(17.3 / 2.4) / log(4) = 1.4248."""
  k = math.log(17.3 / 2.4) / math.log(4.0)
  assert k == pytest.approx(1.42483, abs=1e-5)
  for gb in (16, 32, 64):
    assert dimms.usd_per_gb(gb * GB) == pytest.approx(2.4, rel=1e-12)
  assert dimms.usd_per_gb(128 * GB) == pytest.approx(2.4 * 2**k, rel=1e-12)
  assert dimms.usd_per_gb(128 * GB) == pytest.approx(6.4436, abs=1e-4)
  assert dimms.usd_per_gb(256 * GB) == pytest.approx(17.3, rel=1e-12)
  # Between 64 and 128 GB: x = log2(96/64) = 0.585, 2x^2 - x^3 = 0.4843.
  x = math.log2(1.5)
  f = 2 * x**2 - x**3
  assert dimms.usd_per_gb(96 * GB) == pytest.approx(2.4 * 2 ** (k * f))


def test_dimms_per_channel_and_speed():
  """One DIMM up to 256 GB a channel, two at 512 GB; Sapphire Rapids runs
  4400/4800 of its speed at 2DPC, Genoa 3600/4800."""
  assert dimms.dimms_per_channel(64 * GB) == 1.0
  assert dimms.dimms_per_channel(256 * GB) == 1.0
  assert dimms.dimms_per_channel(512 * GB) == 2.0
  assert dimms.speed_2dpc(SPR) == pytest.approx(4400 / 4800)
  assert dimms.speed_2dpc(GENOA) == pytest.approx(0.75)
  assert dimms.speed_share(2.0, 0.75) == 0.75
  assert dimms.speed_share(1.0, 0.75) == 1.0
  assert dimms.speed_share(1.5, 0.75) == pytest.approx(0.875)


def test_catalog_socket_prices_and_bandwidth():
  """A Genoa socket with 12 x 512 GB (2 x 256 GB per channel): 6144 GB
  at 17.3 $/GB, 460.8 GB/s x 0.75 = 345.6 GB/s; with 12 x 64 GB: 2.4
  $/GB at the full 460.8 GB/s."""
  big = catalog.cpu(GENOA, 6144)
  assert big.ddr_price * GB == pytest.approx(17.3)
  assert big.ddr_bandwidth / GB == pytest.approx(345.6)
  small = catalog.cpu(GENOA, 768)
  assert small.ddr_price * GB == pytest.approx(2.4)
  assert small.ddr_bandwidth / GB == pytest.approx(460.8)
  # Two 64 GB DIMMs per channel, as the 2 TB DGX H100 host has them:
  # 2.4 $/GB, 307.2 x 4400/4800 = 281.6 GB/s.
  h100 = platform_presets.get('dgx_h100').cpu
  assert h100.ddr_price * GB == pytest.approx(2.4)
  assert h100.ddr_bandwidth / GB == pytest.approx(281.6)


def test_relaxed_terms_have_finite_gradients():
  """Price per byte and speed share are differentiable at and between the
  grid's sizes (float64: the test session enables x64)."""
  assert jax.config.jax_enable_x64

  def cost(log_gb):
    per_channel = jnp.exp(log_gb) * GB
    dpc, _, share, usd = dimms.population(per_channel, 0.75)
    return per_channel * usd * 12 + share + dpc

  sizes = jnp.log(jnp.array([16.0, 64.0, 96.0, 128.0, 256.0, 384.0, 512.0]))
  grads = jax.jit(jax.vmap(jax.grad(cost)))(sizes)
  assert np.all(np.isfinite(np.asarray(grads)))
  # Central differences agree between the grid points (96 and 384 GB).
  h = 1e-6
  values = jax.jit(jax.vmap(cost))(jnp.concatenate([sizes + h, sizes - h]))
  fd = (values[:7] - values[7:]) / (2 * h)
  for k in (2, 5):
    np.testing.assert_allclose(float(grads[k]), float(fd[k]), rtol=1e-5)
