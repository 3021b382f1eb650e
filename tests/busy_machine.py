"""A pytest plugin: hypothesis settings for a shared machine that other jobs keep busy.

Hypothesis fails a test whose inputs come slowly (the ``too_slow`` health check) or whose one
example runs past a deadline; on a loaded 2-core CI machine both happen without any fault in
the code under test. This suite loads it (conftest.py), and so does every pytest process a test
starts for an outside package's own tests (a plugin's generated tests, CONTRIBUTING's
templates, the frozen legacy plugin): ``pytest -p busy_machine`` with this folder on
``PYTHONPATH`` (:data:`PYTEST_ARGS`, :func:`pythonpath`). The properties are checked as before;
only the clock is no longer part of the verdict.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings

settings.register_profile("busy-machine", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("busy-machine")

#: Arguments that load this plugin in a pytest process started by a test.
PYTEST_ARGS = ("-p", "busy_machine")


def pythonpath(*first: str) -> str:
    """``PYTHONPATH`` for such a process: ``first``, then this folder."""
    return os.pathsep.join([*first, str(Path(__file__).parent)])
