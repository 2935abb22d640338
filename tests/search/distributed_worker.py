"""One process of the multi-process search test
(tests/search/distributed_test.py).

    python3 tests/search/distributed_worker.py OUT.json PROCESS_ID \
      NUM_PROCESSES PORT

With NUM_PROCESSES > 1 it joins `jax.distributed` (coordinator on
localhost:PORT, process 0 hosts it) before any JAX work; the search then
shards its starts over the global device list. Every process writes the
best buildable design and the continuous optimum to OUT.json (floats as
hex, so the parent compares bits). Local devices: JAX_NUM_CPU_DEVICES.
"""

import json
import sys

import jax

# Importing codesign touches no backend, so it may precede initialize (as
# README's multi-host note says); a JAX computation may not.
from codesign.search import design_space as ds
from codesign.search import gradient
from codesign.spec import stack_presets
from codesign.spec import workload_presets as wp


def main(out, process_id, num_processes, port):
  jax.config.update('jax_enable_x64', True)  # as tests/conftest.py
  if num_processes > 1:
    jax.distributed.initialize(
      coordinator_address=f'localhost:{port}',
      num_processes=num_processes,
      process_id=process_id,
      initialization_timeout=60,
    )
  w = wp.get('rm1')
  space = ds.make_space(
    w,
    max_nodes=4,
    plan_mode='optimize',
    accelerators=('A100-SXM4-80GB', 'H100-SXM5-80GB'),
    cpus=('EPYC-7742 (Rome)', 'Xeon-Platinum-8480+ (Sapphire Rapids-SP)'),
  )
  problem = gradient.Problem(
    space,
    w,
    stack_presets.get('torchrec'),
    'throughput',
    budget_usd=400e3,
    power_w=20e3,
  )
  config = gradient.Config(starts=8, steps=20, chunk=10, snap_top=2, block=2)
  res = gradient.gradient_search(problem, config)
  record = {
    'process_index': jax.process_index(),
    'process_count': jax.process_count(),
    'device_count': jax.device_count(),
    'local_device_count': jax.local_device_count(),
    'best_index': [int(i) for i in res.best_index],
    'best_plan_z': [float(x).hex() for x in res.best_plan_z],
    'best_value': float(res.best_value).hex(),
    'best_feasible': res.best_feasible,
    'continuous_z': [float(x).hex() for x in res.continuous_z],
    'continuous_value': float(res.continuous_value).hex(),
    'evaluations': res.evaluations,
  }
  with open(out, 'w') as f:
    json.dump(record, f, indent=1)
  if num_processes > 1:
    jax.distributed.shutdown()


if __name__ == '__main__':
  main(sys.argv[1], *(int(a) for a in sys.argv[2:5]))
