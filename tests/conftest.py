"""Test configuration: deterministic hypothesis runs under CI (CI=true), no per-example deadlines.

The machines are shared and noisy, so wall-clock deadlines would make property tests flaky; under
CI the examples are derandomized so that a run is reproducible from the commit alone.
"""

import os
import sys
from pathlib import Path

from hypothesis import settings

# tests live in sub-folders that mirror the package (tests/solvers, tests/mechanisms, ...) and are
# imported with --import-mode=importlib; shared oracles (tests/oracles.py) import from here
sys.path.insert(0, str(Path(__file__).resolve().parent))

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
