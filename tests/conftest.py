"""Test-wide JAX settings: float64 available, fast compiles."""

import jax

jax.config.update('jax_enable_x64', True)
