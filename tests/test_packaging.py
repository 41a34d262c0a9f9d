"""What ``pip install eagle-tui`` puts on a machine: one import name, and working verbs.

The built wheel is installed into a fresh virtual environment whose only other packages are
this environment's dependencies (added as a plain path, so this checkout's editable finder
is not active there); the verbs then run from the wheel alone, outside the checkout.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _declared_packages() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(config["tool"]["setuptools"]["packages"])


def test_every_folder_with_code_is_a_declared_package() -> None:
    folders = {
        "eagle_tui." + ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("core", "tui")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert folders | {"eagle_tui.themes"} == _declared_packages(), (
        "pyproject.toml [tool.setuptools] packages must list every folder with an __init__.py"
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, timeout=600)
    return next(out.glob("eagle_tui-*.whl"))


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    env = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.run([str(env / "bin" / "python"), "-c", where], check=True,
                               capture_output=True, text=True).stdout.strip())
    before = set(p.name for p in site.iterdir())
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=300)
    added = {p.name for p in site.iterdir()} - before
    (env / "added.txt").write_text("\n".join(sorted(added)), encoding="utf-8")
    # Our dependencies, as a path: the .pth files in that directory (our editable finder among
    # them) are not processed when it is added this way.
    (site / "zz_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return env


def test_the_wheel_installs_one_import_name(fresh_env: Path) -> None:
    added = (fresh_env / "added.txt").read_text(encoding="utf-8").split()
    import_names = {name for name in added if not name.endswith(".dist-info")}
    assert import_names == {"eagle_tui"}, added


def test_the_wheel_ships_its_data_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in ("eagle_tui/themes/eagle-dark.toml", "eagle_tui/tui/styles/app.tcss",
                     "eagle_tui/core/tokenizer/assets/kimi-k2.5-tiny/tokenizer.json"):
        assert expected in names, f"{expected} missing from {wheel.name}"
    assert not any(name.startswith(("core/", "tui/", "themes/", "tests/")) for name in names)


@pytest.mark.parametrize("argv", [["--help"], ["sim", "--help"], ["capture", "--help"]])
def test_the_verbs_run_from_the_wheel(fresh_env: Path, tmp_path: Path, argv: list[str]) -> None:
    done = subprocess.run([str(fresh_env / "bin" / "eagle-tui"), *argv], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage: eagle-tui" in done.stdout


def test_the_package_comes_from_the_wheel_not_the_checkout(fresh_env: Path,
                                                           tmp_path: Path) -> None:
    probe = "import eagle_tui.core.sim, eagle_tui.tui.cli; print(eagle_tui.core.sim.__file__)"
    done = subprocess.run([str(fresh_env / "bin" / "python"), "-c", probe], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120, check=True)
    assert done.stdout.startswith(str(fresh_env)), done.stdout
