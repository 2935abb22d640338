"""Failures, checkpoints and the share of wall time that trains.

A synchronous job stops whenever one of its parts fails: the cluster's
failure rate is the sum of its accelerators' and nodes' rates
(`failure_rate`; per-GPU and per-node rates from Llama 3's 54-day
report, `whole_system.json` `failures`), its mean time between failures
M = 1 / rate. Every interval tau of training the job writes a checkpoint
that stalls it for delta seconds (`checkpoint_bytes` over the write
bandwidth); a failure loses the work since the last checkpoint and costs
a restart R (restarting, then reading the checkpoint back).

The interval: Young (1974), tau = sqrt(2 delta M) (`young_interval`);
Daly (2006, "A higher order estimate of the optimum checkpoint interval
for restart dumps", FGCS 22) adds the higher orders, tau = sqrt(2 delta
M) (1 + sqrt(delta / 2M) / 3 + delta / 18M) - delta for delta < 2M
(`daly_interval`). Daly's expected wall time per unit of solve time
gives the goodput (`goodput`):

  goodput = tau / (M exp(R / M) (exp((tau + delta) / M) - 1)),

in (0, 1), falling as M falls (more nodes) and rising as delta falls
(incremental checkpoints: Check-N-Run writes 6-17x fewer bytes).
Every function is smooth in the node counts and works on concrete
numbers (numpy) and traced ones (jax.numpy) alike.
"""

from codesign.model.terms.ingestion import xp
from codesign.spec import whole_system as ws
from codesign.spec import workload as wl


def checkpoint_bytes(w: wl.Workload) -> float:
  """Bytes of a full checkpoint (Python float): every table with its
  optimizer state, and the dense parameters (fp32 master weights) with
  theirs."""
  dense = wl.dense_param_count(w) * 4.0
  dense *= 1.0 + wl.optimizer_state_elems_per_param(w.optimizer)
  return float(wl.embedding_bytes(w)) + dense


def written_and_kept(w: wl.Workload, mode: str, parts=None) -> tuple:
  """(bytes written per checkpoint, bytes kept per checkpoint): a full
  checkpoint's; an incremental one's as Check-N-Run reduces them
  (`Parts.write_reduction`, `capacity_reduction`)."""
  parts = parts or ws.parts()
  full = checkpoint_bytes(w)
  if mode == 'incremental':
    return full / parts.write_reduction, full / parts.capacity_reduction
  return full, full


def failure_rate(gpus, nodes, parts=None):
  """Failures per second of a job on `gpus` accelerators in `nodes`
  nodes (either may be traced)."""
  parts = parts or ws.parts()
  return gpus * parts.gpu_fail_per_s + nodes * parts.node_fail_per_s


def young_interval(delta, mtbf):
  """Young's optimum checkpoint interval, seconds: sqrt(2 delta M)."""
  return xp(delta, mtbf).sqrt(2.0 * delta * mtbf)


def daly_interval(delta, mtbf):
  """Daly's higher-order optimum interval, seconds: sqrt(2 delta M)
  (1 + sqrt(x) / 3 + x / 9) - delta with x = delta / 2M, floored at a
  millionth of M (Daly takes M itself where delta >= 2M, a regime no
  buildable design reaches)."""
  m = xp(delta, mtbf)
  x = delta / (2.0 * mtbf)
  tau = young_interval(delta, mtbf) * (1.0 + m.sqrt(x) / 3.0 + x / 9.0)
  return m.maximum(tau - delta, 1e-6 * mtbf)


def goodput(interval, delta, restart, mtbf):
  """The share of wall time that trains (Daly's expected wall time per
  unit of solve time, inverted): tau / (M e^(R/M) (e^((tau + delta)/M)
  - 1))."""
  m = xp(interval, delta, restart, mtbf)
  lost = m.expm1((interval + delta) / mtbf)
  return interval / (mtbf * m.exp(restart / mtbf) * lost)
