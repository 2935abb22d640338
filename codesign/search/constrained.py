"""Augmented-Lagrangian Adam: the one optimizer loop of every search.

Minimizes loss(z) subject to g(z) <= 0 over the box z in [0, 1]^D with
the augmented Lagrangian
  L = loss + sum_i (max(0, lam_i + mu g_i)^2 - lam_i^2) / (2 mu)
(Nocedal and Wright, Numerical Optimization, 2nd ed., eq. 17.65), Adam
on a cosine-decayed step (`optax.adam`, `optax.cosine_decay_schedule`)
and `optax.projections.projection_box` onto [0, 1]. Every `al_every`
steps the multipliers move, lam <- max(0, lam + mu g), and the penalty mu
grows by `mu_growth` up to `mu_max`.

As optax does, state is explicit and the functions are pure: `init`
builds a `State` for one start, `step` advances it by one step given the
problem as a function `assess(z) -> (loss, g, aux)`. Callers `vmap` over
starts and `scan` over steps (`codesign.search.gradient`,
`codesign.search.multi_search`).

`config` is any object with the fields `learning_rate`, `steps`,
`final_lr_fraction`, `al_every`, `mu_init`, `mu_growth` and `mu_max`
(`codesign.search.gradient.Config`).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


class State(NamedTuple):
  """One start of the search.

  z: (D,) the point; opt: its Adam state; lam: (C,) multipliers; mask:
  (D,) 1 where a coordinate moves, 0 where it is frozen; step: () steps
  taken (the state stops moving at `config.steps`, so chunks of steps may
  overrun).
  """

  z: jax.Array
  opt: Any
  lam: jax.Array
  mask: jax.Array
  step: jax.Array


def make_optimizer(config) -> optax.GradientTransformation:
  """Adam with a cosine-decayed learning rate over `config.steps`."""
  schedule = optax.cosine_decay_schedule(
    config.learning_rate, config.steps, alpha=config.final_lr_fraction
  )
  return optax.adam(schedule)


def penalty_weight(config, step):
  """The penalty mu at `step`: it grows by `mu_growth` every `al_every`
  steps, up to `mu_max`."""
  k = step // config.al_every
  return jnp.minimum(config.mu_init * config.mu_growth**k, config.mu_max)


def init(config, z0, mask, num_constraints: int) -> State:
  """The state of one start at z0 (D,), moving the coordinates where
  `mask` (D,) is 1, with `num_constraints` multipliers at zero."""
  z0 = jnp.asarray(z0)
  return State(
    z=z0,
    opt=make_optimizer(config).init(z0),
    lam=jnp.zeros((num_constraints,), z0.dtype),
    mask=jnp.asarray(mask, z0.dtype),
    step=jnp.zeros((), jnp.int32),
  )


def lagrangian(loss, g, lam, mu):
  """The augmented Lagrangian of `loss` under g <= 0."""
  pen = jnp.sum(jnp.maximum(0.0, lam + mu * g) ** 2 - lam**2) / (2.0 * mu)
  return loss + pen


def step(assess: Callable, config, state: State):
  """One step of one start. Pure; `vmap` it over starts.

  Args:
    assess: z (D,) -> (loss (), g (C,), aux), differentiable in z.
    config: the loop's settings (see the module docstring).
    state: the start's `State`.

  Returns:
    (new state, metrics at the state's z before the step: `loss`, `aux`
    and `violation`, the largest constraint violation max(0, max g)).
  """
  tx = make_optimizer(config)
  mu = penalty_weight(config, state.step)

  def objective(z):
    loss, g, aux = assess(z)
    return lagrangian(loss, g, state.lam, mu), (loss, g, aux)

  (_, (loss, g, aux)), grad = jax.value_and_grad(objective, has_aux=True)(
    state.z
  )
  grad = jnp.where(jnp.isfinite(grad), grad, 0.0) * state.mask
  updates, opt = tx.update(grad, state.opt, state.z)
  z = optax.projections.projection_box(
    optax.apply_updates(state.z, updates), 0.0, 1.0
  )
  active = state.step < config.steps
  update_lam = active & ((state.step + 1) % config.al_every == 0)
  lam = jnp.where(update_lam, jnp.maximum(0.0, state.lam + mu * g), state.lam)
  new = State(
    z=jnp.where(active, z, state.z),
    opt=jax.tree.map(lambda a, b: jnp.where(active, a, b), opt, state.opt),
    lam=lam,
    mask=state.mask,
    step=state.step + 1,
  )
  viol = jnp.max(jnp.maximum(g, 0.0))
  return new, {'loss': loss, 'aux': aux, 'violation': viol}


def steps_then_assess(assess: Callable, config, state: State, length: int):
  """`length` steps (a scan) and one more that assesses where they end
  without moving: its value and gradient already evaluate the model
  there, so a program that wants the assessment holds one copy of the
  forward model, not two.

  Returns:
    (the state after `length` steps, metrics of shape (length + 1,): the
    steps' and, last, the assessment at the final z).
  """

  def body(s, i):
    moved, m = step(assess, config, s)
    keep = i < length  # the extra step assesses, it does not move
    return jax.tree.map(lambda a, b: jnp.where(keep, a, b), moved, s), m

  return jax.lax.scan(body, state, jnp.arange(length + 1))
