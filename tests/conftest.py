"""Test configuration: deterministic hypothesis runs under CI (CI=true), no per-example deadlines.

The machines are shared and noisy, so wall-clock deadlines would make property tests flaky; under
CI the examples are derandomized so that a run is reproducible from the commit alone.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
