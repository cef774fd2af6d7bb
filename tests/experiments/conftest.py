"""Fixtures for the experiments tests: plesty-lib in a Python >= 3.12 of its own.

plesty-lib needs Python >= 3.12 while spacrq runs on 3.11, which is exactly
the situation on a bench: the experiment runs in its module's interpreter
(``ExperimentSpec.python``).  The session fixture finds a Python >= 3.12
(``python3.12``/``python3.13`` on PATH, verified by running it since a pyenv
shim may exist and fail, or a pyenv version), creates a venv once under
``~/.cache/spacrq-tests/plesty-venv`` and pip-installs ``plesty-lib>=0.6``
into it from the package index; later sessions reuse it.
"""
from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("SPACRQ_TEST_CACHE", Path.home() / ".cache" / "spacrq-tests"))
PLESTY_VENV = CACHE / "plesty-venv"
PLESTY_REQUIREMENT = "plesty-lib>=0.6"


def _works(python: str) -> bool:
    try:
        done = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2] >= (3, 12))"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == "True"


def find_python312() -> str | None:
    """A working interpreter of Python >= 3.12, or None."""
    candidates = [shutil.which(name) for name in ("python3.12", "python3.13", "python3.14")]
    home = Path.home() / ".pyenv" / "versions"
    for pattern in ("3.1[2-9]*/bin/python3.1[2-9]", "3.1[2-9]*/bin/python3"):
        candidates += sorted(glob.glob(str(home / pattern)))
    for python in candidates:
        if python and _works(python):
            return python
    return None


def _has_plesty(python: Path) -> bool:
    if not python.exists():
        return False
    done = subprocess.run([str(python), "-c", "import plesty.lib.experiment"],
                          capture_output=True, timeout=120)
    return done.returncode == 0


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@pytest.fixture(scope="session")
def plesty_python() -> str:
    """The interpreter of a venv holding plesty-lib (created once, then cached)."""
    python = _venv_python(PLESTY_VENV)
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "plesty-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _has_plesty(python):
            return str(python)
        base = find_python312()
        if base is None:
            pytest.fail("plesty-lib needs Python >= 3.12 and none was found; install python3.12 "
                        "(or a pyenv 3.12+) so the plesty end-to-end tests can run")
        shutil.rmtree(PLESTY_VENV, ignore_errors=True)
        steps = ([base, "-m", "venv", str(PLESTY_VENV)],
                 [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                  PLESTY_REQUIREMENT])
        for argv in steps:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                pytest.fail(f"could not prepare the plesty-lib venv ({' '.join(argv[:4])}…): "
                            f"{(done.stderr or done.stdout).strip()[-400:]}")
        if not _has_plesty(python):
            pytest.fail(f"{PLESTY_REQUIREMENT} did not import in {PLESTY_VENV}")
    return str(python)


#: A tiny plesty-lib experiment module written with plesty-lib's own API: a
#: point scan whose step is a synchronous sleep (an instrument call that
#: cannot notice an abort), which is what spacrq's abort escalation is for.
PLESTY_MODULE = textwrap.dedent('''
    import sys, time
    from plesty.lib.device.params import ConfigParameter
    from plesty.lib.experiment import Experiment, ExperimentCLI, Manifest, Plan, Step

    class PointScan(Experiment):
        def __init__(self, config, **kw):
            super().__init__(**kw)
            self.config = config
            self.control_poll = 0.05

        def build_plan(self):
            n = int(self.config.get("points", 5))
            return Plan([Step(id=f"p{i:03d}", op="point", params={"x": i}) for i in range(n)],
                        config=dict(self.config))

        def point(self, x):
            time.sleep(float(self.config.get("dwell", 0.05)))
            return {"x": x, "y": 2.0 * x}

    cli = ExperimentCLI(Manifest(module="plscan", title="Point scan", schema={"default": [
        ConfigParameter("points", default=5, dtype=int, min_value=1, max_value=1000,
                        description="How many points."),
        ConfigParameter("dwell", default=0.05, dtype=float, unit="s", min_value=0.0,
                        description="Time per point.")]}))

    @cli.rig
    def rig(args, config, skip):
        return None

    @cli.build
    def build(args, config, run_root, devices):
        return PointScan(config, run_root=run_root, max_retries=2, retry_sleep=0.05)

    if __name__ == "__main__":
        sys.exit(cli.main())
''')


@pytest.fixture
def plesty_spec(tmp_path, plesty_python):
    """An ExperimentSpec of the plesty-lib module above, in its own checkout."""
    from spacrq.experiments import ExperimentSpec
    checkout = tmp_path / "checkout"
    (checkout / "plscan").mkdir(parents=True)
    (checkout / "plscan" / "__init__.py").write_text("")
    (checkout / "plscan" / "__main__.py").write_text(PLESTY_MODULE)
    return ExperimentSpec("plscan", "plscan", plesty_python, str(checkout), {},
                          str(tmp_path / "runs"))


@pytest.fixture
def demo_spec(tmp_path):
    """An ExperimentSpec of spacrq's demo sweep, run by spacrq's interpreter."""
    from spacrq.experiments import ExperimentSpec
    checkout = tmp_path / "demo-checkout"
    checkout.mkdir()
    return ExperimentSpec("sweep", "spacrq.experiments.demo_sweep", sys.executable, str(checkout),
                          {"PYTHONPATH": str(ROOT)}, str(tmp_path / "runs"))
