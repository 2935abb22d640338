"""Which published measurements stand behind a design: the calibration
cases (`calibration_cases.json`, `public_cases`) of a stack, an
accelerator family (or a CPU trainer's CPU generation) and a node count,
and what a design lies outside of.

A figure the cost model gives for a design no case resembles is an
extrapolation: `coverage` names the nearest cases and says which of the
design's stack, hardware family and node count no case has measured.
"""

import functools

from codesign.calibration import public_cases
from codesign.spec import platform_presets


def family(part: str) -> str:
  """An accelerator's family ('H100-SXM5-80GB' -> 'H100'; 'GB200-...' ->
  'GB200'), or a CPU's generation ('Xeon-Platinum-8480+ (Sapphire
  Rapids-SP)' -> 'Sapphire Rapids-SP')."""
  if '(' in part:
    return part.split('(', 1)[1].rstrip(')')
  return part.split('-', 1)[0]


@functools.cache
def cases() -> tuple[dict, ...]:
  """Every calibration case as {id, stack, family, trainer, nodes}."""
  out = []
  for c in public_cases.case_keys():
    p = platform_presets.get(c.platform)
    cpu = p.trainer == 'cpu'
    own = public_cases.CASE_CPU.get(c.case_id, (p.cpu.name,))[0]
    out.append(
      {
        'id': c.case_id,
        'stack': c.stack,
        'family': family(own if cpu else p.accelerator.name),
        'trainer': p.trainer,
        'nodes': c.nodes,
      }
    )
  return tuple(out)


def coverage(stack: str, part: str, trainer: str, nodes: float) -> dict:
  """The cases behind a design of `stack` on `part` (its accelerator, or a
  CPU trainer's CPU) and `nodes` nodes.

  Returns:
    dict: `nearest` (the ids of the cases of this stack and family, else
    of this stack, else of this family; the nearest node counts first),
    `flags` (sentences: no case of this stack; of this family with this
    stack; of more than one node, or of this many nodes, with this
    stack), `extrapolated` (any flag).
  """
  fam = family(part)
  own = [c for c in cases() if c['stack'] == stack]
  both = [c for c in own if c['family'] == fam and c['trainer'] == trainer]
  same_fam = [c for c in cases() if c['family'] == fam]
  pool = both or own or same_fam
  pool = sorted(pool, key=lambda c: (abs(c['nodes'] - nodes), c['id']))
  flags = []
  if not own:
    flags.append(f'no calibration case runs {stack}')
  elif not both:
    flags.append(f'no calibration case runs {stack} on {fam}')
  if own:
    most = max(c['nodes'] for c in own)
    if nodes > most:
      flags.append(
        f'{nodes:g} nodes: the {stack} cases span at most {most:g} '
        f'node{"s" if most > 1 else ""}'
      )
  return {
    'nearest': [c['id'] for c in pool[:3]],
    'flags': flags,
    'extrapolated': bool(flags),
  }


def sentence(cov: dict) -> str:
  """A coverage as one line."""
  near = ', '.join(cov['nearest']) or 'none'
  if not cov['flags']:
    return f'calibration: nearest cases {near}; within what they measured'
  return (
    f'calibration: EXTRAPOLATED ({"; ".join(cov["flags"])}); nearest '
    f'cases {near}'
  )
