"""A user's own parts (`--catalog=my_parts.json`), joined to the catalog.

A parts file holds `accelerators` and `cpus`, each an object of part
name -> its numbers, with units in the keys (as the platform JSON):

  {"accelerators": {"X1-OAM-192GB": {
     "source": "vendor datasheet (https://...)", "year": 2025,
     "peak_flops_fp32_tflops": 160, "peak_flops_bf16_tflops": 1300,
     "hbm_capacity_gb": 192, "hbm_bandwidth_gb_per_s": 6000,
     "fabric_links": 8, "fabric_link_bandwidth_gb_per_s": 64,
     "max_per_node": 8, "pcie_gen": 5, "power_w": 900,
     "price_usd": 25000}},
   "cpus": {...}}

`ACCELERATOR_KEYS` and `CPU_KEYS` list every key with its unit, whether
it is required and what it means. What a part does not give is the
catalog's (`catalog.ASSUMED`: GEMM, gather and update efficiencies,
kernel overhead, HBM $/GB; the PCIe x16 rate of its generation), as for
a shipped part. An accelerator's `max_per_node` is the most on its
fabric (a switch, or a full mesh: `buildability.FABRICS`); its `boards`
(optional) are the boards it is sold on (`buildability.BOARDS`), each
`{"accelerators_per_node": [4, 8], "sockets_per_node": [2], "cpus":
["EPYC-9654", ...]}` (CPU names or their beginnings; without
`sockets_per_node`, the CPU's own socket rules): without boards, any
count up to `max_per_node` on any host is allowed. Parts with soldered
memory or an NVLink-C2C host link (Grace, GH200) are not taken.

`load(d)` checks a file's parts (unknown or missing keys, types, a name
that a shipped part has) and then each part as built
(`part_problems`: every number within `hardware.BOUNDS` in its key's
unit, the same check the shipped parts pass), and returns them as
`catalog.UserParts` for `catalog.using`. Every problem of the file is
named in one `InputError`.
"""

import json
import math

from codesign.core.errors import InputError, printable, raise_problems
from codesign.core.units import GB, UNITS
from codesign.spec import catalog, hardware
from codesign.spec import stack as stack_lib

# key -> (required, unit or None, what it is). Numbers in the key's unit.
ACCELERATOR_KEYS = {
  'source': (True, None, 'where the numbers come from (text, or a list)'),
  'year': (True, None, 'first year sold (--available_by)'),
  'vendor': (False, None, 'maker, one of ' + ', '.join(stack_lib.VENDORS)),
  'confidence': (False, None, 'how far to trust the numbers (words)'),
  'peak_flops_fp32_tflops': (True, 'tflops', 'dense fp32 peak'),
  'peak_flops_tf32_tflops': (False, 'tflops', 'dense tf32 peak (fp32)'),
  'peak_flops_bf16_tflops': (False, 'tflops', 'dense bf16 peak (tf32)'),
  'hbm_capacity_gb': (True, 'gb', "HBM capacity as sold (HBM's GB are GiB)"),
  'hbm_bandwidth_gb_per_s': (True, 'gb_per_s', 'HBM bandwidth'),
  'fabric_links': (True, None, 'scale-up links per accelerator'),
  'fabric_link_bandwidth_gb_per_s': (
    True,
    'gb_per_s',
    'per link per direction',
  ),
  'max_per_node': (True, None, 'most accelerators on its fabric per node'),
  'pcie_gen': (True, None, 'PCIe generation of its host link, 3 to 6'),
  'power_w': (True, 'w', 'module TDP'),
  'price_usd': (True, 'usd', 'one part as bought, with its HBM'),
  'boards': (False, None, 'the boards it is sold on (see the module doc)'),
}
CPU_KEYS = {
  'source': ACCELERATOR_KEYS['source'],
  'year': ACCELERATOR_KEYS['year'],
  'vendor': ACCELERATOR_KEYS['vendor'],
  'confidence': ACCELERATOR_KEYS['confidence'],
  'peak_flops_fp32_tflops': (True, 'tflops', 'fp32 peak at base clock'),
  'peak_flops_bf16_tflops': (False, 'tflops', '16-bit peak (fp32)'),
  'ddr_bandwidth_gb_per_s': (True, 'gb_per_s', 'all channels, one DIMM'),
  'ddr_channels': (True, None, 'DDR channels per socket'),
  'max_ddr_gb': (True, 'gb', 'most DDR per socket'),
  'min_sockets': (False, None, 'fewest sockets per node (1)'),
  'max_sockets': (True, None, 'most sockets per node'),
  'socket_links': (True, None, 'inter-socket links per socket'),
  'socket_link_bandwidth_gb_per_s': (True, 'gb_per_s', 'per link, per way'),
  'socket_links_take_pcie_lanes': (
    False,
    None,
    'true where the socket links use PCIe lanes, 16 a link (xGMI)',
  ),
  'pcie_gen': ACCELERATOR_KEYS['pcie_gen'],
  'pcie_lanes': (True, None, 'PCIe lanes per socket'),
  'power_w': (True, 'w', 'socket TDP'),
  'price_usd': (True, 'usd', 'one socket'),
  'cores': (False, None, 'cores per socket (28)'),
  'thread_speed': (
    False,
    None,
    "one core's single-thread speed over the Xeon Platinum 8280's (1)",
  ),
}
KEYS = {'accelerators': ACCELERATOR_KEYS, 'cpus': CPU_KEYS}
# Whole numbers and their ranges (inclusive), beyond `hardware.BOUNDS`.
INTEGERS = {
  'year': (1990, 2100),
  'max_per_node': tuple(hardware.BOUNDS['accelerators_per_node']),
  'fabric_links': tuple(hardware.BOUNDS['fabric.links_per_accelerator']),
  'pcie_gen': (3, 6),
  'ddr_channels': (1, 24),
  'min_sockets': tuple(hardware.BOUNDS['sockets_per_node']),
  'max_sockets': tuple(hardware.BOUNDS['sockets_per_node']),
  'socket_links': tuple(hardware.BOUNDS['cpu.socket_links']),
  'pcie_lanes': (16, 1024),
  'cores': tuple(hardware.BOUNDS['cpu.cores']),
}
# The catalog's lane count per inter-socket link that takes PCIe lanes.
XGMI = 'xGMI (user part: its links take PCIe lanes)'


def load(d, label: str = 'parts') -> catalog.UserParts:
  """The parts of a parts file's JSON object `d`, checked; `label` (the
  file) heads every problem.

  Raises:
    InputError: naming every problem of the file at once.
  """
  if not isinstance(d, dict):
    raise InputError(f'{label} must be a JSON object of accelerators and cpus')
  problems = [
    f'unknown key {printable(k)!r} (valid keys: accelerators, cpus)'
    for k in d
    if k not in KEYS
  ]
  entries = {}
  for table in KEYS:
    parts = d.get(table, {})
    if not isinstance(parts, dict):
      problems.append(f'{table} must be an object of part name -> numbers')
      continue
    for name, part in parts.items():
      entry, found = _entry(table, name, part)
      problems += found
      if entry is not None:
        entries[(table, name)] = entry
  if not entries and not problems:
    problems.append('holds no parts (accelerators or cpus)')
  raise_problems(problems, label, 'parts')
  parts = _resolved_boards(entries, label)
  with catalog.using(parts):
    problems = [p for t, n, _ in parts for p in part_problems(t, n)]
  raise_problems(problems, label, 'parts')
  return parts


def _entry(table: str, name: str, part) -> tuple[dict | None, list[str]]:
  """(the catalog entry of one part, or None; its problems)."""
  what = f'{table[:-1]} {printable(name)!r}'
  if not name.strip() or name != name.strip():
    return None, [
      f'{what}: a part name must be non-blank, without spaces at its ends'
    ]
  if name in catalog.raw()['accelerators'] or name in catalog.raw()['cpus']:
    return None, [f'{what} is a shipped part; give yours another name']
  if not isinstance(part, dict):
    return None, [f'{what} must be an object of its numbers']
  keys = KEYS[table]
  problems = [
    f'{what}: unknown key {printable(k)!r} (valid keys: {", ".join(keys)})'
    for k in part
    if k not in keys
  ]
  problems += [
    f'{what}: missing key {k}'
    for k, (required, _, _) in keys.items()
    if required and k not in part
  ]
  for k, value in part.items():
    if k in keys:
      problems += [f'{what}: {p}' for p in _value_problems(k, value)]
  if problems:
    return None, problems
  build = _accelerator if table == 'accelerators' else _cpu
  return build(part), []


def _value_problems(key: str, value) -> list[str]:
  """One sentence if `value` is not of its key's type or range."""
  if key == 'source':
    ok = (isinstance(value, str) and value.strip()) or (
      isinstance(value, list)
      and value
      and all(isinstance(x, str) and x.strip() for x in value)
    )
    return [] if ok else ['source must be non-blank text or a list of it']
  if key == 'confidence':
    return [] if isinstance(value, str) else ['confidence must be text']
  if key == 'vendor':
    if value in stack_lib.VENDORS:
      return []
    return [f'vendor must be one of {", ".join(stack_lib.VENDORS)}']
  if key == 'boards':
    return _board_problems(value)
  if key == 'socket_links_take_pcie_lanes':
    return [] if isinstance(value, bool) else [f'{key} must be true or false']
  number = isinstance(value, int | float) and not isinstance(value, bool)
  if not number or not math.isfinite(value) or value <= 0:
    return [f'{key} must be a positive number, got {printable(repr(value))}']
  if key in INTEGERS:
    lo, hi = INTEGERS[key]
    if not float(value).is_integer() or not lo <= value <= hi:
      return [f'{key} must be a whole number in [{lo:g}, {hi:g}], got {value}']
  return []


def _board_problems(boards) -> list[str]:
  if not isinstance(boards, list) or not boards:
    return ['boards must be a list of boards']
  out = []
  for i, b in enumerate(boards):
    valid = {'name', 'accelerators_per_node', 'sockets_per_node', 'cpus'}
    if not isinstance(b, dict) or set(b) - valid:
      out.append(f'boards.{i} must be an object of ' + ', '.join(sorted(valid)))
      continue
    for k in ('accelerators_per_node', 'sockets_per_node'):
      counts = b.get(k, [1] if k == 'sockets_per_node' else None)
      if (
        not isinstance(counts, list)
        or not counts
        or not all(
          isinstance(c, int) and not isinstance(c, bool) and c >= 1
          for c in counts
        )
      ):
        out.append(f'boards.{i}.{k} must be a list of whole numbers')
    cpus = b.get('cpus')
    if (
      not isinstance(cpus, list)
      or not cpus
      or not all(isinstance(c, str) and c.strip() for c in cpus)
    ):
      out.append(f'boards.{i}.cpus must be a list of CPU names')
  return out


def _common(part: dict) -> dict:
  source = part['source']
  return {
    'year': int(part['year']),
    'source': [source] if isinstance(source, str) else list(source),
    'confidence': part.get('confidence', 'user part'),
    'price_usd_rough': float(part['price_usd']),
    'tdp_w': float(part['power_w']),
    'pcie_gen': int(part['pcie_gen']),
    **({'user_vendor': part['vendor']} if 'vendor' in part else {}),
    'user_part': True,
  }


def _accelerator(part: dict) -> dict:
  """The catalog entry (catalog.json's keys) of a user's accelerator."""
  fp32 = float(part['peak_flops_fp32_tflops'])
  tf32 = float(part.get('peak_flops_tf32_tflops', fp32))
  bf16 = float(part.get('peak_flops_bf16_tflops', tf32))
  gen = int(part['pcie_gen'])
  x16 = catalog.raw()['links']['pcie'][f'gen{gen}_x16']['GBps_per_direction']
  return {
    **_common(part),
    'fp32_tflops': fp32,
    'tf32_tflops_dense': tf32,
    'bf16_tflops_dense': bf16,
    'fp16_tflops_dense': bf16,
    'hbm_capacity_vendor_gb': float(part['hbm_capacity_gb']),
    'hbm_bw_GBps': float(part['hbm_bandwidth_gb_per_s']),
    'link_count': int(part['fabric_links']),
    'link_bw_GBps_per_direction': float(part['fabric_link_bandwidth_gb_per_s']),
    'host_link_GBps_per_direction': x16,
    'user_fabrics': {'switch': int(part['max_per_node'])},
    **(
      {'user_boards': [dict(b) for b in part['boards']]}
      if 'boards' in part
      else {}
    ),
  }


def _cpu(part: dict) -> dict:
  """The catalog entry (catalog.json's keys) of a user's CPU."""
  fp32 = float(part['peak_flops_fp32_tflops'])
  xgmi = part.get('socket_links_take_pcie_lanes', False)
  return {
    **_common(part),
    'peak_fp32_tflops_at_base': fp32,
    'bf16_over_fp32': float(part.get('peak_flops_bf16_tflops', fp32)) / fp32,
    'ddr_bw_GBps_per_socket': float(part['ddr_bandwidth_gb_per_s']),
    'mem_channels': int(part['ddr_channels']),
    'max_mem_per_socket_TB': float(part['max_ddr_gb']) / 1000.0,
    'min_sockets': int(part.get('min_sockets', 1)),
    'max_sockets': int(part['max_sockets']),
    'socket_link_type': XGMI if xgmi else 'user part',
    'socket_link_count': int(part['socket_links']),
    'socket_link_GBps_per_direction': float(
      part['socket_link_bandwidth_gb_per_s']
    ),
    'pcie_lanes': int(part['pcie_lanes']),
    'cores': int(part.get('cores', 28)),
    'thread_speed': float(part.get('thread_speed', 1.0)),
  }


def _resolved_boards(entries: dict, label: str) -> catalog.UserParts:
  """The parts with their boards' CPU names resolved (a name or the
  beginning of one, shipped or the user's): `catalog.UserParts`."""
  cpus = list(catalog.raw()['cpus']) + [n for t, n in entries if t == 'cpus']
  problems = []
  for (table, name), entry in entries.items():
    for i, b in enumerate(entry.get('user_boards', [])):
      names = []
      for given in b['cpus']:
        hits = [c for c in cpus if c.lower().startswith(given.lower())]
        if not hits:
          problems.append(
            f'accelerator {printable(name)!r}: boards.{i}.cpus names no '
            f'CPU {printable(given)!r} (valid: {", ".join(cpus)})'
          )
        names += hits
      entry['user_boards'][i] = [
        b.get('name', f'{name} board {i}'),
        b['accelerators_per_node'],
        b.get('sockets_per_node'),
        sorted(set(names)),
      ]
  raise_problems(problems, label, 'parts')
  return tuple(
    sorted(
      (table, name, json.dumps(entry, sort_keys=True))
      for (table, name), entry in entries.items()
    )
  )


def as_json(parts: catalog.UserParts) -> dict:
  """The parts as result.json records them: table -> name -> catalog
  entry (the keys of codesign/data/catalog.json)."""
  out = {}
  for table, name, text in parts:
    out.setdefault(table, {})[name] = json.loads(text)
  return out


def from_json(d: dict | None) -> catalog.UserParts:
  """`catalog.UserParts` of what `as_json` wrote (None or {}: none)."""
  return tuple(
    sorted(
      (table, name, json.dumps(entry, sort_keys=True))
      for table, parts in (d or {}).items()
      for name, entry in parts.items()
    )
  )


# ---- the check every part passes, shipped or the user's --------------------


def _out_of_bounds(where: str, x: float, path: str, unit: str | None):
  """The sentence when `x` (SI) is outside `hardware.BOUNDS[path]`, in
  the key's unit; None inside."""
  lo, hi = hardware.BOUNDS[path]
  scale = UNITS[unit] if unit else 1.0
  if lo * (1 - 1e-12) <= x <= hi * (1 + 1e-12):
    return None
  return (
    f'{where} must lie in [{lo / scale:g}, {hi / scale:g}]'
    f'{" " + unit if unit else ""}, got {x / scale:g}'
  )


def part_problems(table: str, name: str) -> list[str]:
  """Every number of catalog part `name` (`table`: accelerators or cpus)
  as the model builds it, against `hardware.BOUNDS` (in the key's unit);
  an accelerator's price less its HBM at the assumed $/GB as the board's.
  One sentence each; the shipped parts pass it, a user's must."""
  if table == 'accelerators':
    return _accelerator_problems(name)
  what = f'cpu {printable(name)!r}'
  d = catalog.raw()['cpus'][name]
  c = catalog.cpu(name, 64)
  checks = [
    ('peak_flops_fp32_tflops', c.peak_flops_fp32, 'cpu.peak_flops_fp32'),
    ('peak_flops_bf16_tflops', c.peak_flops_bf16, 'cpu.peak_flops_bf16'),
    ('ddr_bandwidth_gb_per_s', c.ddr_bandwidth, 'cpu.ddr_bandwidth'),
    ('max_ddr_gb', d['max_mem_per_socket_TB'] * 1e12, 'cpu.ddr_capacity'),
    (
      'socket_link_bandwidth_gb_per_s',
      c.socket_link_bandwidth,
      'cpu.socket_link_bandwidth',
    ),
    ('power_w', c.power, 'cpu.power'),
    ('price_usd', c.price, 'cpu.price'),
    ('thread_speed', c.thread_speed, 'cpu.thread_speed'),
  ]
  out = [
    _out_of_bounds(f'{what}: {key}', float(x), path, _unit(key))
    for key, x, path in checks
  ]
  if d.get('min_sockets', 1) > d['max_sockets']:
    out.append(f'{what}: min_sockets is more than max_sockets')
  return [x for x in out if x]


def _accelerator_problems(name: str) -> list[str]:
  what = f'accelerator {printable(name)!r}'
  d = catalog.raw()['accelerators'][name]
  a = catalog.accelerator(name)
  checks = [
    (
      'peak_flops_fp32_tflops',
      a.peak_flops_fp32,
      'accelerator.peak_flops_fp32',
    ),
    (
      'peak_flops_tf32_tflops',
      a.peak_flops_tf32,
      'accelerator.peak_flops_tf32',
    ),
    (
      'peak_flops_bf16_tflops',
      a.peak_flops_bf16,
      'accelerator.peak_flops_bf16',
    ),
    # As the vendor states it: a part's "256 GB" of HBM is 256 GiB.
    (
      'hbm_capacity_gb',
      d['hbm_capacity_vendor_gb'] * GB,
      'accelerator.hbm_capacity',
    ),
    ('hbm_bandwidth_gb_per_s', a.hbm_bandwidth, 'accelerator.hbm_bandwidth'),
    ('power_w', a.power, 'accelerator.power'),
  ]
  if d['link_count']:  # 0: a PCIe card without a fabric of its own (L40S)
    checks += [
      ('fabric_links', d['link_count'], 'fabric.links_per_accelerator'),
      (
        'fabric_link_bandwidth_gb_per_s',
        d['link_bw_GBps_per_direction'] * GB,
        'fabric.link_bandwidth',
      ),
    ]
  out = [
    _out_of_bounds(f'{what}: {key}', float(x), path, _unit(key))
    for key, x, path in checks
  ]
  board = _out_of_bounds(
    f'{what}: price_usd less its HBM at the assumed $/GB (the board)',
    float(a.price),
    'accelerator.price',
    'usd',
  )
  return [x for x in [*out, board] if x]


def _unit(key: str) -> str | None:
  """The unit suffix of a parts-file key, None for a count."""
  for unit in ('gb_per_s', 'tflops', 'gb', 'usd', 'w'):
    if key.endswith('_' + unit):
      return unit
  return None
