"""Where codesign's files are: the one data path, and the checkout."""

import pathlib

# The package's data files (catalog, calibration cases, fitted stack
# numbers, device profiles), installed with it.
DATA_DIR = pathlib.Path(__file__).parent.parent / 'data'
# The directory that holds the package: the checkout when run from one.
CHECKOUT = pathlib.Path(__file__).resolve().parents[2]
