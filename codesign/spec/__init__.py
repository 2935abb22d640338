"""Layer 2, spec: the four inputs of a training step, their presets and
their JSON.

  workload          the DLRM trained (tables, MLPs, batch); counters
  hardware          the platform: a pytree of differentiable numbers
  stack             the software stack that trains it
  plan              where tables live and how they are sharded
  *_presets         named workloads, platforms and stacks, with sources
  catalog           real parts, prices and power (data/catalog.json)
  dimms             DDR as bought: price per GB by DIMM size, 2DPC speed
  schema            the inputs as JSON, in boundary units, and back
  whole_system      the system around the trainers: readers, storage,
                    failures and checkpoints (data/whole_system.json)
  facility          rack classes and the rack units of a node
                    (data/facility.json)

Imports: core.
"""
