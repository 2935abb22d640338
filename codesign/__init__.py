"""codesign: a differentiable cost model of DLRM training hardware.

The public API (see `codesign.api` and README.md, Python API): load the
four inputs of a training step (workload, platform, software stack, plan),
evaluate it, and propose the platform to build.

The names below are loaded on first use (PEP 562's module `__getattr__`):
`import codesign` and `from codesign import evaluate` work as usual, and
a script that only needs `codesign.core` (its flag parsing and error
sentences) does not import JAX, so a bad flag is answered in a fraction
of a second.
"""

import importlib

__version__ = '0.1.0'

# public name -> the module that defines it
_EXPORTS = {
  'evaluate': 'codesign.api',
  'from_torchrec': 'codesign.api',
  'load_platform': 'codesign.api',
  'load_stack': 'codesign.api',
  'load_workload': 'codesign.api',
  'make_plan': 'codesign.api',
  'propose': 'codesign.api',
  'InputError': 'codesign.core.errors',
  'CostReport': 'codesign.model.cost_model',
  'Platform': 'codesign.spec.hardware',
  'Plan': 'codesign.spec.plan',
  'Stack': 'codesign.spec.stack',
  'Table': 'codesign.spec.workload',
  'Workload': 'codesign.spec.workload',
}

__all__ = tuple(sorted(_EXPORTS))


def __getattr__(name: str):
  if name not in _EXPORTS:
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
  value = getattr(importlib.import_module(_EXPORTS[name]), name)
  globals()[name] = value  # later lookups skip this function
  return value


def __dir__():
  return sorted(set(globals()) | set(_EXPORTS))
