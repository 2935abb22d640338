"""codesign: a differentiable cost model of DLRM training hardware.

The public API (see `codesign.api` and README.md, Python API): load the
four inputs of a training step (workload, platform, software stack, plan),
evaluate it, and propose the platform to build.
"""

from codesign.api import evaluate as evaluate
from codesign.api import load_platform as load_platform
from codesign.api import load_stack as load_stack
from codesign.api import load_workload as load_workload
from codesign.api import make_plan as make_plan
from codesign.api import propose as propose
from codesign.core.errors import InputError as InputError
from codesign.model.cost_model import CostReport as CostReport
from codesign.spec.hardware import Platform as Platform
from codesign.spec.plan import Plan as Plan
from codesign.spec.stack import Stack as Stack
from codesign.spec.workload import Table as Table
from codesign.spec.workload import Workload as Workload

__version__ = '0.1.0'

__all__ = (
  'CostReport',
  'InputError',
  'Plan',
  'Platform',
  'Stack',
  'Table',
  'Workload',
  'evaluate',
  'load_platform',
  'load_stack',
  'load_workload',
  'make_plan',
  'propose',
)
