"""Shared fixtures."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harnessgrid.plugin_system.registry import reset_registry

sys.path.insert(0, str(Path(__file__).parent))  # tests' helper modules (servers, plugin_dist)

import busy_machine  # noqa: F401 - hypothesis without clock-based verdicts (see the module)

# fixtures/ holds other packages' files, not tests of this suite: the frozen legacy plugin's own
# tests need it installed, and tests/test_api_stability.py installs it and runs them.
collect_ignore = ["fixtures"]

# Environments a developer built (~/.cache/harnessgrid/envs) must not change what the tests see:
# every session, and the CLI subprocesses it starts, get an empty store of their own.
_ENV_STORE = tempfile.mkdtemp(prefix="hg-test-envs-")
os.environ["HARNESSGRID_ENV_DIR"] = _ENV_STORE


#: The hang guard of an end-to-end test (pyproject's ``timeout`` is the fast tests'): a warm
#: start built from an empty cache plus training takes minutes, twice that on a busy machine.
SLOW_TEST_TIMEOUT_S = 1800


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_S))


def pytest_unconfigure(config: pytest.Config) -> None:
    from harnessgrid.sandboxing.scratch import remove_tree

    remove_tree(Path(_ENV_STORE))


@pytest.fixture
def env_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty environment store of this test's own."""
    from harnessgrid.sandboxing.environments import ENV_DIR_VARIABLE

    root = tmp_path / "envs"
    monkeypatch.setenv(ENV_DIR_VARIABLE, str(root))
    return root


@pytest.fixture
def on_sys_path() -> Iterator[Callable[[Path], None]]:
    """Put folders on sys.path for one test; undo it and drop the registry cache afterwards."""
    added: list[str] = []
    before = set(sys.modules)

    def add(path: Path) -> None:
        sys.path.insert(0, str(path))
        added.append(str(path))
        reset_registry()

    yield add
    for p in added:
        sys.path.remove(p)
    for name in set(sys.modules) - before:
        mod = sys.modules.get(name)
        if any(str(getattr(mod, "__file__", "") or "").startswith(p) for p in added):
            del sys.modules[name]
    reset_registry()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline tiny chat model (built once per test session)."""
    from harnessgrid.policies.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
