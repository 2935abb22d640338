"""codesign: a differentiable cost model of DLRM training hardware."""

__version__ = '0.1.0'
