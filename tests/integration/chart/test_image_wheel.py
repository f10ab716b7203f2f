"""The images' build stage works from exactly the files their .dockerignore lets in.

The Dockerfiles copy pyproject.toml, README.md, operator/ and worker/ into the build context and
build one wheel from them. Here the same context is assembled in a temp folder (following the
.dockerignore's allow list), the wheel is built from it, installed into a fresh virtual environment,
and the console scripts the images run — `agentihooks-operator`, `agentihooks-worker boot`,
`agentihooks` — start from the installed wheel, not from this source tree.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from testsupport.helm import ROOT

pytestmark = pytest.mark.slow


def _context(dest: Path) -> Path:
    allowed = [
        line[1:].removesuffix("/**")
        for line in (ROOT / "deploy" / "Dockerfile.operator.dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    assert sorted(allowed) == [
        "LICENSE",
        "README.md",
        "operator",
        "pyproject.toml",
        "requirements.lock",
        "worker",
    ]
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in allowed:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ctx = _context(tmp_path_factory.mktemp("context"))
    out = tmp_path_factory.mktemp("dist")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ctx),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    [built] = out.glob("agentihooks_recovery-*.whl")
    return built


def test_wheel_has_the_packages_and_console_scripts(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        entry_points = next(z.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    for package in ("agentihooks_operator", "agentihooks_worker", "agentihooks_checkpoint"):
        assert f"{package}/__init__.py" in names
    assert not [n for n in names if n.startswith("operator/")], "operator/ is a source root, not a package"
    for script in ("agentihooks-operator", "agentihooks-worker", "agentihooks"):
        assert f"{script} = " in entry_points
    assert "agentihooks-demo" not in entry_points, "the demo is not part of the product"
    assert not [n for n in names if n.startswith("agentihooks_demo/")], "the demo needs a checkout"
    assert [n for n in names if n.endswith(".dist-info/licenses/LICENSE")], "the licence travels"


def test_wheel_carries_every_data_file_of_the_packages(wheel: Path) -> None:
    """Static files (ledger page, checkpoint schema, py.typed) must ship, or the image breaks at run time."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    data = [
        p.relative_to(root).as_posix()
        for root in (ROOT / "operator", ROOT / "worker")
        for p in root.rglob("*")
        if p.is_file()
        and p.suffix not in {".py", ".pyc"}
        and "__pycache__" not in p.parts
        and ".egg-info" not in str(p)
    ]
    assert data, "the packages have data files"
    assert sorted(set(data) - names) == []


def test_console_scripts_run_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    # The dependencies come from the site-packages of the interpreter running the tests (the project's
    # own virtualenv, whose base interpreter may have none of them), the project itself from the wheel.
    # A path line in a .pth adds that folder without running its .pth files, so the editable install
    # of this checkout that lives there is not seen: the wheel's packages are the only ones on the path.
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    assert deps, "the running interpreter has a site-packages folder"
    (Path(purelib) / "agentihooks-test-deps.pth").write_text("".join(f"{p}\n" for p in deps))
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    where = subprocess.run(
        [str(py), "-c", "import agentihooks_operator as m; print(m.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert str(env_dir) in where.stdout and str(ROOT) not in where.stdout
    for argv in (
        ["agentihooks-operator", "--help"],
        ["agentihooks-worker", "boot", "--help"],
        ["agentihooks", "--help"],
    ):
        res = subprocess.run(
            [str(env_dir / "bin" / argv[0]), *argv[1:]], capture_output=True, text=True, cwd=tmp_path
        )
        assert res.returncode == 0, f"{argv}: {res.stderr[-2000:]}"
        assert "usage" in res.stdout.lower()
    # Each entry point names itself and the version of the wheel it was installed from.
    shipped = wheel.name.split("-")[1]
    for command in ("agentihooks-operator", "agentihooks-worker", "agentihooks"):
        res = subprocess.run(
            [str(env_dir / "bin" / command), "--version"], capture_output=True, text=True, cwd=tmp_path
        )
        assert res.returncode == 0, f"{command}: {res.stderr[-2000:]}"
        assert res.stdout.strip() == f"{command} {shipped}", res.stdout
