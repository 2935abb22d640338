"""Known answers for the host's speed: the host work of a step at the
host CPU's single-thread speed and, where the ranks' threads outnumber
the cores, its share of a core (`terms.host_speed`, `terms.op_time`).

The tiny DLRM, platform and stack are in `tests.model.fixtures`: 2
sockets of 28 cores (the default), 4 ranks a node, a step of 35 eager
operators of 10 us and a 100 us floor without graphs.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from codesign.model import cost_model
from codesign.model import terms as ct
from codesign.spec import hardware
from tests.model.fixtures import (
  OP_HOST,
  STEP_FLOOR,
  B,
  close,
  counts,
  make_plan,
  run,
  tiny_platform,
  tiny_stack,
  tiny_workload,
)


def with_cpu(p, **changes):
  return dataclasses.replace(p, cpu=dataclasses.replace(p.cpu, **changes))


def eager(**changes):
  return tiny_stack(graph_scope='none', host_overlap=0.0, **changes)


def test_a_faster_host_cpu_gives_a_shorter_host_time():
  # Twice the single-thread speed halves the floor, every operator and
  # the batch loaded on the training thread: 100 us + 35 x 10 us + 1 us
  # x 2,048 samples a rank, over 2.
  p, w = tiny_platform(), tiny_workload()
  s = eager(sample_host_time=1e-6)
  local = B / 8.0  # 2 nodes x 4 ranks
  ref = STEP_FLOOR + 35 * OP_HOST + 1e-6 * local
  st = ct.setup(p, w, s)
  assert float(st.host_speed) == 1.0  # 56 cores for 8 threads: all of one
  close(float(ct.host_time(s, counts(s), st)), ref)
  fast = with_cpu(p, thread_speed=2.0)
  st2 = ct.setup(fast, w, s)
  close(float(ct.host_time(s, counts(s), st2)), ref / 2.0)
  close(float(ct.op_time(s, st2)), OP_HOST / 2.0)
  close(float(ct.batch_loading_time(s, st2)), 1e-6 * local / 2.0)
  # In the cost model: the host term, the ceiling and a host-bound step.
  plan = make_plan()
  r1, r2 = run(p, w, plan, s), run(fast, w, plan, s)
  close(r1['breakdown']['host'], ref)
  close(r2['breakdown']['host'], ref / 2.0)
  assert r2['step'] < r1['step']
  c = cost_model.evaluate(hardware.as_arrays(fast), w, plan, s)
  close(float(c.ceiling_step_time), ref / 2.0)


def test_the_host_work_shares_cores_only_where_threads_outnumber_them():
  # 4 ranks x 2 busy threads = 8 threads a node. With 2 sockets of 2
  # cores (4 cores, half a core a thread) the host work takes twice as
  # long; with 6 cores (0.75, inside the rounded corner) 0.75 - 0.25^2
  # / 2 = 0.71875 of a core; from 12 cores (1.5 a thread) all of one.
  p, w, s = tiny_platform(), tiny_workload(), eager()
  ref = STEP_FLOOR + 35 * OP_HOST
  for cores, share in ((2.0, 0.5), (3.0, 0.71875), (6.0, 1.0), (96.0, 1.0)):
    st = ct.setup(with_cpu(p, cores=cores), w, s)
    close(float(st.host_speed), share)
    close(float(ct.host_time(s, counts(s), st)), ref / share)
  # A CPU trainer's ranks are its sockets: 2 threads a socket.
  cpu = with_cpu(tiny_platform(trainer='cpu'), cores=1.0)
  close(float(ct.setup(cpu, w, s).host_speed), 0.5)


def test_core_share_is_min_one_x_with_a_smooth_corner():
  xs = jnp.array([0.1, 0.5, 0.75, 1.0, 1.25, 1.5, 4.0])
  got = np.asarray(ct.core_share(xs))
  want = [0.1, 0.5, 0.71875, 0.875, 0.96875, 1.0, 1.0]
  np.testing.assert_allclose(got, want, rtol=1e-12)
  grads = np.asarray(jax.vmap(jax.grad(ct.core_share))(xs))
  np.testing.assert_allclose(grads, [1, 1, 0.75, 0.5, 0.25, 0, 0], atol=1e-12)


def test_host_step_gradients_are_finite_in_float64():
  # The step's gradient in the host CPU's speed and cores: finite
  # everywhere, negative in the speed where the host binds, zero in the
  # cores where they are to spare and negative where they are not.
  w, plan, s = tiny_workload(), make_plan(), eager(sample_host_time=1e-6)

  def step(speed, cores):
    p = with_cpu(tiny_platform(), thread_speed=speed, cores=cores)
    p = hardware.as_arrays(p, jnp.float64)
    return cost_model.evaluate(p, w, plan, s).step_time

  grad = jax.jit(jax.grad(step, argnums=(0, 1)))
  for speed, cores in ((1.0, 28.0), (0.5, 3.0), (3.0, 1.0)):
    gs, gc = (float(g) for g in grad(jnp.float64(speed), jnp.float64(cores)))
    assert np.isfinite(gs) and np.isfinite(gc)
    assert gs < 0.0
    if cores >= 6.0:
      assert gc == 0.0
    else:
      assert gc < 0.0
