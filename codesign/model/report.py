"""A `CostReport` in boundary units: the result dict and a readable table."""

import math

import numpy as np

from codesign.model import cost_model, terms, whole_system
from codesign.model.cost_model import COMPONENTS, TIERS, CostReport
from codesign.spec import hardware
from codesign.spec.hardware import Platform


def _f(x) -> float:
  return float(np.asarray(x))


# The stack's ceiling binds a design that reaches this share of it:
# infinitely fast devices and links would add at most 1/0.9 - 1 = 11%.
CEILING_BINDS = 0.9
CEILING_WHAT = (
  "the step with infinitely fast devices and links: the stack's host "
  "floor, the loading of each rank's batch on its training thread "
  '(TorchRec) and eager operators'
)
# Loading that more ranks would split is worth naming above this share of
# the ceiling's step.
LOADING_NAMED = 0.05


def ceiling(r: CostReport) -> dict:
  """The `ceiling` entry of result.json: the stack's hardware-independent
  ceiling, the design's share of it and whether it binds."""
  share = _f(r.throughput) / _f(r.ceiling_throughput)
  return {
    'step_time_s': _f(r.ceiling_step_time),
    'throughput_samples_per_s': _f(r.ceiling_throughput),
    'share': share,
    'binds': share >= CEILING_BINDS,
    'loading_s': _f(r.ceiling_loading_time),
    'what': CEILING_WHAT,
  }


def ceiling_sentence(c: dict) -> str:
  """One line: the ceiling, the design's share of it, and what decides."""
  head = (
    f'stack ceiling {c["throughput_samples_per_s"]:,.0f} samples/s '
    f'(host {c["step_time_s"] * 1e3:.2f} ms/step); this design reaches '
    f'{100 * c["share"]:.0f}% of it: '
  )
  loading = c.get('loading_s', 0.0)
  if c['binds'] and loading > LOADING_NAMED * c['step_time_s']:
    return head + (
      f'host-bound: faster devices do not help, more ranks split the '
      f"{loading * 1e3:.2f} ms of loading each rank's batch; the stack "
      'decides'
    )
  if c['binds']:
    return head + 'host-bound: more hardware does not help; the stack decides'
  return head + 'the ceiling does not bind; the hardware decides'


def to_result(r: CostReport) -> dict:
  """The result.json form of a concrete report (units in key names)."""
  memory = {
    tier: {
      'required_bytes': _f(r.memory_required[tier]),
      'available_bytes': _f(r.memory_available[tier]),
      'per': 'accelerator' if tier == 'hbm' else 'node',
    }
    for tier in TIERS
  }
  overflow = [
    t for t, m in memory.items() if m['required_bytes'] > m['available_bytes']
  ]
  return {
    'step_time_s': _f(r.step_time),
    'throughput_samples_per_s': _f(r.throughput),
    'breakdown_s': {k: _f(r.breakdown[k]) for k in COMPONENTS},
    'bottleneck': r.bottleneck,
    'memory': memory,
    'feasible': bool(np.asarray(r.feasible)),
    'overflowing_tiers': overflow,
    'feasibility_margin': _f(r.feasibility_margin),
    'capex_usd': _f(r.capex),
    'power_w': _f(r.power),
    'perf_per_usd': _f(r.perf_per_usd),
    'perf_per_watt': _f(r.perf_per_watt),
    'ceiling': ceiling(r),
  }


def design_figures(p: Platform, w, plan, stack, system=None) -> dict:
  """`to_result` of a concrete design's evaluation (as experiments.evaluate)
  and what one rack must hold whole at the wall, `rack_unit_w`: a node
  with its NICs, or a scale-up domain's hosts (`terms.rack_unit_power`,
  the rack rule's), its rack units `rack_unit_u` and the rack units its
  rack class holds, `rack_space_u` (`terms.rack_unit_space`,
  `usable_rack_units`). One compiled program (`cost_model.evaluate_design`)
  serves the designs of a workload, at every skew. With a `system`
  (`whole_system.WholeSystem`) the figures are the whole system's
  (`whole_system.apply`: readers, storage, goodput) and `system` holds
  its bill and terms (`whole_system.figures_dict`)."""
  p = hardware.as_numpy(p)
  r = cost_model.evaluate_design(p, w, plan, stack)
  r, f = whole_system.apply(r, p, w, system)
  fig = to_result(r)
  fig['rack_unit_w'] = _f(terms.rack_unit_power(p))
  fig['rack_unit_u'] = _f(terms.rack_unit_space(p))
  fig['rack_space_u'] = _f(terms.usable_rack_units(p))
  if f is not None:
    fig['system'] = whole_system.figures_dict(f, fig, system)
  return fig


# Samples a time to train counts where nothing else says: the default of
# propose's --samples (no workload preset names a number of samples that
# trains it to its target quality).
DEFAULT_TRAIN_SAMPLES = 1e9
TRAIN_SAMPLES_NOTE = (
  'the workload names no target, so 1e9 samples, the default of propose '
  '--samples'
)


def duration_text(seconds: float) -> str:
  """Seconds in the largest unit that keeps a number above 1: '42 s',
  '3.5 min', '2.1 h', '4.0 d' (None or not finite: '-')."""
  if seconds is None or not math.isfinite(seconds) or seconds < 0:
    return '-'
  for unit, size in (('d', 86400.0), ('h', 3600.0), ('min', 60.0)):
    if seconds >= size:
      return f'{seconds / size:.1f} {unit}'
  return f'{seconds:.0f} s'


def time_to_train_text(throughput: float, samples: float) -> str:
  """The time to train `samples` at `throughput` samples/s, in words."""
  if not throughput or throughput <= 0:
    return '-'
  return duration_text(samples / throughput)


def table(result: dict, title: str = '') -> str:
  """A plain-text breakdown table of a `to_result` dict."""
  lines = [title] if title else []
  step = result['step_time_s']
  lines.append(f'{"component":24s} {"ms":>10s} {"% of step":>10s}')
  for k, v in sorted(result['breakdown_s'].items(), key=lambda kv: -kv[1]):
    if v < 1e-9:
      continue
    lines.append(f'{k:24s} {v * 1e3:10.3f} {100 * v / step:9.1f}%')
  lines.append(f'{"step time":24s} {step * 1e3:10.3f}')
  total = sum(result['breakdown_s'].values())
  # Components that run at the same time are each counted in full, and the
  # smooth maxima of the composition (cost_model) add a little time that
  # no component names, so the shares need not sum to 100%.
  lines.append(
    f'(% of step: each component alone, before overlap; the shares sum to '
    f'{100 * total / step:.0f}%, not 100%, as parts run at the same time)'
  )
  lines.append(
    f'throughput {result["throughput_samples_per_s"]:,.0f} samples/s; '
    f'bottleneck {result["bottleneck"]}; time to train '
    + time_to_train_text(
      result['throughput_samples_per_s'], DEFAULT_TRAIN_SAMPLES
    )
    + f' ({TRAIN_SAMPLES_NOTE})'
  )
  for tier, m in result['memory'].items():
    if m['available_bytes'] == 0 and m['required_bytes'] == 0:
      continue
    lines.append(
      f'{tier.upper():4s} {m["required_bytes"] / 1e9:10.1f} GB needed of '
      f'{m["available_bytes"] / 1e9:10.1f} GB per {m["per"]}'
    )
  feas = (
    'yes'
    if result['feasible']
    else ('NO: ' + ', '.join(result['overflowing_tiers']) + ' overflows')
  )
  lines.append(f'feasible: {feas}')
  lines.append(ceiling_sentence(result['ceiling']))
  if 'capex_breakdown' in result:
    lines.append(capex_line(result['capex_breakdown']))
  lines.append(
    f'capex ${result["capex_usd"]:,.0f}; power {result["power_w"]:,.0f} W; '
    f'{result["perf_per_usd"]:.3f} samples/s/$; '
    f'{result["perf_per_watt"]:.1f} samples/s/W'
  )
  return '\n'.join(lines)


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """(header, rows) of the step breakdown of a `to_result` dict, for
  breakdown.csv: each component's seconds per step alone (before
  overlap) and its share of the step."""
  step = result['step_time_s']
  rows = sorted(result['breakdown_s'].items(), key=lambda kv: -kv[1])
  return ['component', 'seconds', 'share_of_step'], [
    [k, v, v / step] for k, v in rows
  ]


def capex_breakdown(p: Platform, rack_w: float | None = None) -> dict:
  """The bill of a concrete platform, the network apart from the nodes
  (result.json's `capex_breakdown`): the nodes (chassis, CPUs and DDR,
  accelerators and HBM, their fabric) and the scale-out network (NICs,
  the fat tree's switches per tier, its links: optics and cables;
  `terms.switching`), USD and W each; their sums are the model's capex
  and power."""
  nodes_usd, nodes_w = terms.nodes_capex_and_power(p)
  net = terms.network_bill(p)
  tiers = terms.tiers_listing(net)
  network = {
    'nic_count': _f(p.nodes * p.nic.count),
    'nic_bandwidth_gbit_per_s': _f(p.nic.bandwidth) * 8 / 1e9,
    'switch_radix': _f(p.nic.switch_radix),
    'oversubscription': _f(p.nic.oversubscription),
    'tiers': len(tiers),
    'switches_by_tier': dict(tiers),
    'switches': int(round(_f(net['switches']))),
    'links': int(round(_f(net['links']))),
    **{k: _f(net[k]) for k in ('nic_usd', 'switch_usd', 'link_usd')},
    **{k: _f(net[k]) for k in ('nic_w', 'switch_w', 'link_w')},
    'usd': _f(net['usd']),
    'w': _f(net['w']),
  }
  fab_usd, fab_w = terms.fabric_capex_and_power(p)
  cooling = _f(terms.cooling_capex(p))
  out = {
    'nodes_usd': _f(nodes_usd),
    'nodes_w': _f(nodes_w),
    # Part of the nodes': their accelerator fabric (NVSwitch or OAM
    # baseboard, bridges), USD and W at the wall.
    'fabric_usd': _f(p.nodes * fab_usd),
    'fabric_w': _f(terms.wall_power(p.nodes * fab_w)),
    'network': network,
    # Liquid cooling beyond air, where a rack unit draws more than an
    # air-cooled rack holds (`terms.cooling_capex`).
    'cooling': 'liquid' if cooling > 0.0 else 'air',
    'cooling_usd': cooling,
    'total_usd': _f(nodes_usd) + network['usd'] + cooling,
    'total_w': _f(nodes_w) + network['w'],
  }
  if rack_w:
    out['racks'] = terms.racks(p, rack_w)
  return out


def capex_line(b: dict) -> str:
  """One line of a `capex_breakdown`: the nodes (their accelerator fabric
  named), then the network's NICs, switches per tier and links."""
  n = b['network']
  if n['switches']:
    tiers = ' + '.join(f'{c:,} {t}' for t, c in n['switches_by_tier'].items())
    switches = (
      f'switches ${n["switch_usd"]:,.0f} ({tiers}; {n["tiers"]} tier'
      f'{"s" if n["tiers"] > 1 else ""} of {n["switch_radix"]:.0f}-port '
      f'{n["nic_bandwidth_gbit_per_s"]:.0f} Gb/s switches'
      + (
        f', leaves {n["oversubscription"]:g}:1 oversubscribed'
        if n['oversubscription'] > 1.0
        else ', non-blocking'
      )
      + f'); optics and cables ${n["link_usd"]:,.0f} ({n["links"]:,} links)'
    )
  else:
    switches = 'no scale-out switches (one node or one scale-up domain)'
  fabric = ''
  if b['fabric_usd'] > 0:
    fabric = f' (their accelerator fabric ${b["fabric_usd"]:,.0f})'
  cooling = ''
  if b.get('cooling_usd'):
    cooling = (
      f'; liquid cooling ${b["cooling_usd"]:,.0f} (racks above '
      f'{terms.AIR_RACK_W / 1e3:g} kW: ${terms.LIQUID_USD_PER_W * 1e3:,.0f} '
      'per kW beyond air)'
    )
  return (
    f'capex ${b["total_usd"]:,.0f}: nodes ${b["nodes_usd"]:,.0f}{fabric}; '
    f'network ${n["usd"]:,.0f} = NICs ${n["nic_usd"]:,.0f} '
    f'({n["nic_count"]:,.0f} x {n["nic_bandwidth_gbit_per_s"]:.0f} Gb/s); '
    f'{switches}{cooling}'
  )


def _unit(r: dict) -> str:
  hosts = r['unit_hosts']
  if hosts > 1:
    return f'one scale-up domain of {hosts:g} nodes'
  return 'one node'


def racks_line(r: dict) -> str:
  """The racks of a bill (`terms.racks`), one line: how many, of which
  class, the rack units used and which of power and space sets the
  nodes per rack."""
  if not r['power_fits']:
    return (
      f'racks: OVER RACK POWER: {_unit(r)} draws {r["unit_kw"]:.1f} kW at '
      f'the wall, above the {r["rack_kw"]:g} kW of a rack (--rack_kw)'
    )
  if not r['space_fits']:
    return (
      f'racks: OVER RACK SPACE: {_unit(r)} takes {r["unit_u"]:g}U, above '
      f'the {r["usable_u"]:g}U a {r["rack_u"]:g}U rack holds for nodes'
    )
  cooling = r.get('cooling', 'air')
  limit = ' (--rack_kw)' if cooling == 'liquid' else ''
  binds = {
    'power': 'power binds',
    'space': 'space binds',
    'both': 'power and space bind',
  }[r['binds']]
  network = ''
  if r.get('network_racks'):
    network = (
      f'; {r["network_racks"]} network rack(s) for '
      f'{r["network_switches"]} switch(es)'
    )
  return (
    f'racks: {r["racks"]} {cooling}-cooled of {r["rack_kw"]:g} kW{limit} '
    f'and {r["rack_u"]:g}U ({r["usable_u"]:g}U for nodes), '
    f'{r["nodes_per_rack"]} node{"s" if r["nodes_per_rack"] > 1 else ""} '
    f'of {r["node_kw"]:.1f} kW and {r["node_u"]:g}U per rack ({binds}: '
    f'{r["units_by_power"]} by power, {r["units_by_space"]} by space)'
    + (f', {_unit(r)} per rack unit' if r['unit_hosts'] > 1 else '')
    + f'; {r["u_used"]:g}U used{network}'
  )
