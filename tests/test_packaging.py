"""Packaging: the import package assembled from top-level folders works as a wheel, and the
command line starts without heavy imports."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = {"harnessgrid": "core", "harnessgrid.plugins": "plugins",
                "harnessgrid.trainer": "trainer", "harnessgrid.evaluation": "evaluation"}


def _packages_on_disk() -> set[str]:
    found = set()
    for package, folder in PACKAGE_DIRS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]))
    return found


def test_pyproject_lists_every_package_folder() -> None:
    """A folder with an __init__.py that pyproject.toml forgets would be missing from wheels."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    assert _packages_on_disk() <= listed
    # the rest are data folders (no __init__.py), each with its package data declared
    for data in listed - _packages_on_disk():
        assert _folder(data).is_dir(), data
        assert data in config["package-data"], data


def _folder(package: str) -> Path:
    """Where a package of the import tree lives in the checkout."""
    top = max((t for t in PACKAGE_DIRS if package == t or package.startswith(t + ".")), key=len)
    return ROOT / PACKAGE_DIRS[top] / Path(*package.removeprefix(top).split(".")[1:])


def test_wheel_imports_every_subpackage(tmp_path: Path) -> None:
    """Build a real wheel, unpack it, and import every subpackage from it (not the checkout)."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-v", "-w", str(tmp_path / "dist"), str(ROOT)],
                           check=True, capture_output=True, text=True)
    # issue 43: a folder of package data that is not a listed package makes setuptools warn
    # "Package would be ignored" on every install
    assert "would be ignored" not in built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("harnessgrid-*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import importlib, json, pkgutil, harnessgrid\n"
        "mods = [m.name for m in pkgutil.walk_packages(harnessgrid.__path__, 'harnessgrid.')]\n"
        "import harnessgrid.plugins, harnessgrid.trainer, harnessgrid.evaluation\n"
        "for p in (harnessgrid.plugins, harnessgrid.trainer, harnessgrid.evaluation):\n"
        "    mods += [m.name for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.')]\n"
        "files = {m: importlib.import_module(m).__file__ for m in mods if '__main__' not in m}\n"
        "print(json.dumps({'root': harnessgrid.__file__, 'files': files}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["root"].startswith(str(site))
    assert all(f.startswith(str(site)) for f in data["files"].values())
    assert _packages_on_disk() <= set(data["files"]) | {"harnessgrid"}
    assert (site / "harnessgrid" / "py.typed").exists()
    # The pretrained micro base travels as package data, byte for byte.
    from harnessgrid.plugins.micro.pretraining import BASE_SHA256, MODEL_FILES

    shipped = site / "harnessgrid" / "plugins" / "micro" / "base"
    assert sorted(p.name for p in shipped.iterdir()) == sorted([*MODEL_FILES, "recipe.json"])
    for name, digest in BASE_SHA256.items():
        assert hashlib.sha256((shipped / name).read_bytes()).hexdigest() == digest
    # so does the demo's shipped warm start, with its recipe
    warm = site / "harnessgrid" / "trainer" / "demo_warm_start"
    recipe = json.loads((warm / "recipe.json").read_text())
    assert recipe["sha256"]
    for name, digest in recipe["sha256"].items():
        assert hashlib.sha256((warm / name).read_bytes()).hexdigest() == digest


def test_help_does_not_import_heavy_libraries() -> None:
    """`harnessgrid --help` must stay fast: no torch, transformers, litellm, numpy, oapackage,
    nor even asyncio (15 ms with ssl) or jsonschema."""
    script = (
        "import sys\n"
        "sys.argv = ['harnessgrid', '--help']\n"
        "from harnessgrid.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'torch', 'transformers', 'litellm', 'trl', 'anthropic', 'openai', 'numpy', "
        "'oapackage', 'matplotlib', 'asyncio', 'jsonschema'})\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert "Usage" in out.stdout
    assert out.stdout.strip().endswith("HEAVY []")


def test_import_harnessgrid_is_light() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import sys, harnessgrid as hg; hg.FactorSpace.default(); "
         "print(sorted(m for m in ('torch', 'numpy', 'litellm', 'pydantic') if m in sys.modules))"],
        capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['pydantic']"


def test_public_names_resolve_to_objects_not_modules() -> None:
    """`hg.compose` etc. must be the function, even after its module was imported."""
    import types

    import harnessgrid as hg

    for name in hg.__all__:
        assert not isinstance(getattr(hg, name), types.ModuleType), name


def test_source_cites_only_documents_in_the_repository() -> None:
    """Docstrings once cited sections of a design document that is not in this repository;
    a reader had nothing to follow. The code cites README.md, CONTRIBUTING.md,
    docs/architecture.md and benchmarks/ instead. Tests are searched too (this one spells the
    marker in two pieces so that it does not cite it)."""
    root = Path(__file__).resolve().parents[1]
    marker = "DESIGN" + " \N{SECTION SIGN}"
    sources = [path for folder in ("core", "plugins", "trainer", "evaluation", "benchmarks",
                                   "tests")
               for path in sorted((root / folder).rglob("*.py"))]
    sources += [*sorted((root / "scripts").glob("*.sh")), root / "pyproject.toml"]
    cited = [f"{path.relative_to(root)}:{n}" for path in sources
             for n, line in enumerate(path.read_text().splitlines(), 1) if marker in line]
    assert not cited, cited
