"""Runs the local default: `python -m devstack run` (what `make run` calls)."""

import sys

from devstack.launcher import run

sys.exit(run())
