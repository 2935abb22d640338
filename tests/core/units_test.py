"""Boundary units: a value written in its unit reads back bit for bit."""

import math

from codesign.calibration import public_cases
from codesign.core import units


def test_a_value_off_the_microsecond_grid_is_written_as_one_on_it():
  # A fitted step floor no double of microseconds gives back exactly.
  off = 0.00456197112808657
  x = units.from_si_exact(off, 'us')
  assert units.to_si(x, 'us') != off
  on = units.on_boundary_grid(off, 'us')
  assert abs(on - off) <= 2 * math.ulp(off)
  assert units.to_si(units.from_si_exact(on, 'us'), 'us') == on


def test_the_fit_file_holds_stack_values_its_readers_give_back_exactly():
  fit = public_cases.stack_fit_json(
    {p.name: 0.00456197112808657 for p in public_cases.FIT_PARAMETERS},
    ['C1'],
    {},
  )
  for fields in fit['stacks'].values():
    for name, entry in fields.items():
      unit = public_cases.STACK_UNITS[name]
      if unit:
        v = entry['value']
        assert units.to_si(units.from_si_exact(v, unit), unit) == v, name
