"""The whole training system around one step: readers, storage, the
front-end network, failures and checkpoints.

`apply(report, platform, workload, system)` turns the step's
`CostReport` into the system's: the throughput the trainers reach when
the readers feed them (`terms.ingestion`) and, with failures counted,
the goodput (`terms.checkpoint`); the capex and power of the reader
nodes, the storage nodes and the front-end network added to the bill.
With `readers='local'` and no failures (`WholeSystem.active` false) it
is the report as it was. `figures` is what a report prints of it.

The rule, with b the bytes of a sample (`ingestion.bytes_per_sample`),
r a reader node's samples/s (`ingestion.reader_rate`), T the trainers'
samples/s:
- readers: `auto` buys T x headroom / r of them (the step is then the
  trainers'); N readers bound the step at N r (a smooth minimum, as
  every roofline of the step); the trainers' front-end ports bound it at
  their bytes/s over b;
- storage nodes: the most of what the data's reads need (T b over a
  node's read rate), what the dataset and the kept checkpoints need
  (bytes over a node's) and what writing a checkpoint in the target time
  needs (a smooth maximum); with `local` data and failures counted,
  only the checkpoints;
- front-end network: a switch port and link share per B/s of every
  reader's, storage node's and trainer node's front-end port;
- goodput: the cluster's failure rate (its accelerators and nodes), the
  checkpoint's write time at the least of the storage's and the
  trainers' front-end rates, the restart (fixed, plus reading the
  checkpoint back), Daly's interval and his expected wall time.
Counts are continuous in a traced search and whole in a concrete report
(`ingestion.whole`): the search prices fractions of nodes.
"""

import dataclasses
from typing import NamedTuple

import numpy as np

from codesign.core import units
from codesign.model import convergence
from codesign.model.cost_model import CostReport
from codesign.model.terms import budget
from codesign.model.terms import checkpoint as ckpt
from codesign.model.terms import ingestion as ing
from codesign.spec import whole_system as ws
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform


class Figures(NamedTuple):
  """The system around one design (scalars; counts whole when concrete).

  trainer_throughput: samples/s of the step alone; fed_throughput: what
  readers and front-end ports let through; goodput: share of wall time
  that trains (1 without failures); readers, storage_nodes: node counts;
  capex and power of each: readers_usd/_w, storage_usd/_w,
  network_usd/_w; mtbf_s, interval_s, checkpoint_s, restart_s: the
  failure and checkpoint terms (0 without failures); sample_bytes;
  reader_rate: samples/s per reader node; frontend_rate: samples/s the
  trainers' front-end ports take (0 with the data local).
  """

  trainer_throughput: object
  fed_throughput: object
  goodput: object
  readers: object
  storage_nodes: object
  readers_usd: object
  readers_w: object
  storage_usd: object
  storage_w: object
  network_usd: object
  network_w: object
  mtbf_s: object
  interval_s: object
  checkpoint_s: object
  restart_s: object
  sample_bytes: float
  reader_rate: float
  frontend_rate: object


def _counts(p: Platform, concrete: bool):
  """(accelerators, nodes) of a platform (accelerators 0 on a CPU
  trainer, whose sockets fail as its nodes do)."""
  nodes = p.nodes
  gpus = 0.0 if p.trainer == 'cpu' else nodes * p.accelerators_per_node
  if concrete:
    return float(np.asarray(gpus)), float(np.asarray(nodes))
  return gpus, nodes


def _feed(thr, nodes, w: wl.Workload, s: ws.WholeSystem, parts):
  """(fed samples/s, readers, reader rate, bytes per sample, front-end
  rate: 0 with the data local)."""
  b = ing.bytes_per_sample(w, parts.format)
  rate = ing.reader_rate(w, ws.transform_of(s, w.name), parts)
  if s.local:
    return thr, 0.0 * thr, rate, b, 0.0 * thr
  front = ing.frontend_rate(nodes, parts.trainer_frontend_bps, b)
  if s.readers == 'auto':
    fed = ing.smooth_min(thr, front)
    readers = ing.whole(ing.readers_needed(fed, rate, parts.headroom))
    return fed, readers, rate, b, front
  readers = float(s.readers)
  return (
    ing.smooth_min(thr, front, readers * rate),
    readers + 0.0 * thr,
    rate,
    b,
    front,
  )


def _storage(fed, b, w: wl.Workload, s: ws.WholeSystem, parts, weight):
  """(storage nodes billed, whole when concrete; the nodes the
  checkpoints alone need, continuous): the most of the reads', the
  dataset's and, weighted by how much failures count (`weight`), the
  checkpoints' needs (their bytes kept, and writing one in the target
  time)."""
  written, kept = ckpt.written_and_kept(w, s.checkpoint, parts)
  write = written / (parts.write_target_s * parts.storage_write_bps)
  ckpt_nodes = ing.smooth_max(
    parts.retained * kept / parts.storage_bytes + 0.0 * fed, write
  )
  if s.local:
    return ing.whole(weight * ckpt_nodes), ckpt_nodes
  reads = fed * b / parts.storage_read_bps
  data = dataset_samples(w, s) * b / parts.storage_bytes
  need = ing.smooth_max(reads, data + 0.0 * fed, weight * ckpt_nodes)
  return ing.whole(need), ckpt_nodes


def dataset_samples(w: wl.Workload, s: ws.WholeSystem) -> float:
  """Samples the workload's dataset holds: its dataset's in
  `convergence.json`, else the system's `dataset_samples`."""
  c = convergence.curve(w.name)
  return c.samples_per_epoch if c is not None else s.dataset_samples


def _goodput(p, w, s: ws.WholeSystem, parts, nodes_bw, concrete: bool):
  """(goodput weighted by how much failures count, MTBF s, interval s,
  checkpoint s, restart s) with `nodes_bw` storage nodes writing and
  reading the checkpoints."""
  gpus, nodes = _counts(p, concrete)
  weight = ws.failure_weight(s, gpus)
  written, kept = ckpt.written_and_kept(w, s.checkpoint, parts)
  front = nodes * parts.trainer_frontend_bps
  write = ing.smooth_min(nodes_bw * parts.storage_write_bps, front)
  read = ing.smooth_min(nodes_bw * parts.storage_read_bps, front)
  mtbf = 1.0 / ckpt.failure_rate(gpus, nodes, parts)
  delta = written / write
  restart = parts.restart_s + kept / read
  tau = ckpt.daly_interval(delta, mtbf)
  good = ckpt.goodput(tau, delta, restart, mtbf)
  return 1.0 - weight * (1.0 - good), mtbf, tau, delta, restart


def system_figures(r: CostReport, p: Platform, w, s: ws.WholeSystem):
  """The `Figures` of the system around report `r` of design `p`."""
  parts = ws.parts()
  concrete = not _traced(r.throughput)
  thr = float(np.asarray(r.throughput)) if concrete else r.throughput
  gpus, nodes = _counts(p, concrete)
  weight = ws.failure_weight(s, gpus)
  fed, readers, rate, b, front = _feed(thr, nodes, w, s, parts)
  storage, ckpt_nodes = _storage(fed, b, w, s, parts, weight)
  nodes_bw = ing.smooth_max(storage, ckpt_nodes)
  good = _goodput(p, w, s, parts, nodes_bw, concrete)
  reader = parts.reader
  trainer_ports = nodes * parts.trainer_frontend_bps
  endpoints = (
    readers * reader.nic_bps
    + storage * parts.storage.nic_bps
    + (trainer_ports if not s.local else weight * trainer_ports)
  )
  return Figures(
    thr,
    fed,
    good[0],
    readers,
    storage,
    readers * reader.usd,
    readers * budget.wall_power(reader.w),
    storage * parts.storage_usd,
    storage * budget.wall_power(parts.storage_w),
    endpoints * parts.port_usd_per_bps,
    endpoints * parts.port_w_per_bps,
    *good[1:],
    b,
    rate,
    front,
  )


def _traced(x) -> bool:
  """Whether `x` is a tracer (inside jit, vmap or grad)."""
  import jax

  return isinstance(x, jax.core.Tracer)


def apply(r: CostReport, p: Platform, w, s: ws.WholeSystem):
  """(report, figures): `r` with the system's throughput (fed, times the
  goodput), capex and power (readers, storage and front-end network
  added) and their ratios; and the `Figures`. `r` as it is, and None,
  where the system changes nothing (`WholeSystem.active` false)."""
  if s is None or not s.active:
    return r, None
  f = system_figures(r, p, w, s)
  thr = f.fed_throughput * f.goodput
  capex = r.capex + f.readers_usd + f.storage_usd + f.network_usd
  power = r.power + f.readers_w + f.storage_w + f.network_w
  out = dataclasses.replace(
    r,
    throughput=thr,
    capex=capex,
    power=power,
    perf_per_usd=thr / capex,
    perf_per_watt=thr / power,
  )
  return out, f


def figures_dict(f: Figures, fig: dict, s: ws.WholeSystem) -> dict:
  """result.json's `system` entry: the counts, the bill of the readers,
  the storage and the front-end network with their shares of the capex
  and power of figures `fig` (the whole system's), and the goodput
  terms."""
  x = {k: float(np.asarray(v)) for k, v in f._asdict().items()}
  capex, power = fig['capex_usd'], fig['power_w']
  parts = {
    k: {
      'usd': x[f'{k}_usd'],
      'w': x[f'{k}_w'],
      'capex_share': x[f'{k}_usd'] / capex,
      'power_share': x[f'{k}_w'] / power,
    }
    for k in ('readers', 'storage', 'network')
  }
  return {
    'capex_usd': capex,
    'power_w': power,
    'trainers_usd': capex - sum(v['usd'] for v in parts.values()),
    'trainers_w': power - sum(v['w'] for v in parts.values()),
    'readers_setting': s.readers,
    'with_failures': s.with_failures,
    'checkpoint': s.checkpoint,
    'reader_nodes': x['readers'],
    'storage_nodes': x['storage_nodes'],
    'bill': parts,
    'trainer_throughput_samples_per_s': x['trainer_throughput'],
    'fed_throughput_samples_per_s': x['fed_throughput'],
    'readers_feed_samples_per_s': x['readers'] * x['reader_rate'],
    'reader_samples_per_s': x['reader_rate'],
    'frontend_samples_per_s': x['frontend_rate'],
    'trainer_frontend_gbit_per_s': units.from_si(
      ws.parts().trainer_frontend_bps, 'gbit_per_s'
    ),
    'trainer_frontend_source': dict(ws.parts().sources)['trainer_frontend'],
    'sample_bytes': x['sample_bytes'],
    'goodput': x['goodput'],
    'mtbf_s': x['mtbf_s'],
    'checkpoint_interval_s': x['interval_s'],
    'checkpoint_write_s': x['checkpoint_s'],
    'restart_s': x['restart_s'],
  }


def _assumed(source: str) -> str:
  """', an assumption' where a number's source says it is one."""
  return ', an assumption' if source.startswith('assumption') else ''


def feed_bound(sysd: dict) -> str:
  """What holds the fed throughput of a `figures_dict` down: the slowest
  of the trainers, the readers and the trainers' front-end ports (the
  fed figure is their smooth minimum, a little below the slowest)."""
  rates = {
    'the trainers': sysd['trainer_throughput_samples_per_s'],
    'the readers': sysd['readers_feed_samples_per_s'],
    "the trainers' front-end ports": sysd['frontend_samples_per_s'],
  }
  return min(rates, key=rates.get)


def lines(sysd: dict) -> list[str]:
  """The system around a design, as printed: its readers, storage and
  front-end network with their shares of capex and power, what the
  readers feed, and the goodput terms (a `figures_dict`)."""
  b = sysd['bill']

  def part(k):
    return (
      f'${b[k]["usd"]:,.0f} ({100 * b[k]["capex_share"]:.1f}% of capex, '
      f'{100 * b[k]["power_share"]:.1f}% of power)'
    )

  out = []
  if 'capex_usd' in sysd:
    out.append(
      f'system: capex ${sysd["capex_usd"]:,.0f} = trainers '
      f'${sysd["trainers_usd"]:,.0f} + readers ${b["readers"]["usd"]:,.0f} '
      f'+ storage ${b["storage"]["usd"]:,.0f} + front-end network '
      f'${b["network"]["usd"]:,.0f}; power {sysd["power_w"]:,.0f} W, the '
      f'trainers {sysd["trainers_w"]:,.0f}'
    )
  if sysd['readers_setting'] != 'local':
    out.append(
      f'readers: {sysd["reader_nodes"]:,.0f} reader node(s) '
      f'({sysd["readers_setting"]}) {part("readers")}: they feed '
      f'{sysd["readers_feed_samples_per_s"]:,.0f} samples/s '
      f'({sysd["reader_samples_per_s"]:,.0f} each, '
      f'{sysd["sample_bytes"]:,.0f} B a sample); the trainers alone reach '
      f'{sysd["trainer_throughput_samples_per_s"]:,.0f}, their front-end '
      f'ports ({sysd["trainer_frontend_gbit_per_s"]:,.0f} Gb/s a node'
      f'{_assumed(sysd["trainer_frontend_source"])}) take '
      f'{sysd["frontend_samples_per_s"]:,.0f}; the system '
      f'{sysd["fed_throughput_samples_per_s"]:,.0f} before failures, '
      f'bound by {feed_bound(sysd)}'
    )
  if sysd['storage_nodes'] > 0:
    out.append(
      f'storage: {sysd["storage_nodes"]:,.0f} storage node(s) '
      f'{part("storage")}; front-end network {part("network")}'
    )
  if sysd['mtbf_s'] > 0 and sysd['goodput'] < 1.0:
    out.append(
      f'failures: goodput {sysd["goodput"]:.4f} ({sysd["checkpoint"]} '
      f'checkpoints): MTBF {sysd["mtbf_s"] / 3600:,.1f} h, a checkpoint '
      f'written in {sysd["checkpoint_write_s"]:,.1f} s every '
      f'{sysd["checkpoint_interval_s"] / 60:,.1f} min (Young/Daly), '
      f'restart {sysd["restart_s"] / 60:,.1f} min'
    )
  return out


def goodput_of(p: Platform, w: wl.Workload, s: ws.WholeSystem) -> dict:
  """The goodput of a concrete design `p` training `w` with its data
  local and the checkpoints on the storage they need (`s`'s failures
  and checkpoint setting): goodput, storage_nodes, mtbf_s, interval_s,
  checkpoint_s and restart_s (1 and zeros where failures do not count)."""
  parts = ws.parts()
  s = dataclasses.replace(s, readers='local')
  gpus, _ = _counts(p, True)
  weight = ws.failure_weight(s, gpus)
  b = ing.bytes_per_sample(w, parts.format)
  storage, ckpt_nodes = _storage(0.0, b, w, s, parts, weight)
  nodes_bw = ing.smooth_max(storage, ckpt_nodes)
  good = _goodput(p, w, s, parts, nodes_bw, True)
  keys = ('goodput', 'mtbf_s', 'interval_s', 'checkpoint_s', 'restart_s')
  out = {k: float(np.asarray(v)) for k, v in zip(keys, good, strict=True)}
  if weight == 0.0:
    out.update(mtbf_s=0.0, interval_s=0.0, checkpoint_s=0.0, restart_s=0.0)
  return {**out, 'storage_nodes': float(storage)}
