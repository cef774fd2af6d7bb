"""The bundle runs the whole night: the dispatcher, module_argv, and (with SPACRQ_TEST_BUNDLE=1) a real build.

The first part runs with the normal suite: the dispatcher is plain Python and
is driven here as the bundle drives it.  The second part builds the one-folder
PyInstaller bundle (about a minute on two cores), opens its window offscreen
and runs the demo queue through it to the end; ``.ci/run`` runs it with
``SPACRQ_TEST_BUNDLE=1``.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from spacrq import procs
from waiting import wait_until  # tests/waiting.py (tests/ is on the path)

ROOT = Path(__file__).resolve().parents[1]
BUILD = os.environ.get("SPACRQ_TEST_BUNDLE") == "1"
needs_build = pytest.mark.skipif(not BUILD, reason="builds the bundle: SPACRQ_TEST_BUNDLE=1 (.ci/run sets it)")
DISPATCH = ("import sys\nfrom spacrq.frozen import dispatch\nsys.exit(dispatch(sys.argv[1:]))")


def dispatcher(*args: str, env=None, cwd=None) -> subprocess.CompletedProcess:
    """The dispatcher, in a fresh interpreter, as the bundle's executable would run it."""
    return subprocess.run([sys.executable, "-c", DISPATCH, *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd)


# ---- one function gives every child's argv ---------------------------------------------------

def test_module_argv_in_python_and_in_a_bundle(monkeypatch):
    assert procs.module_argv("spacrq.run", "python", 3) == [sys.executable, "-m", "spacrq.run", "python", "3"]
    assert procs.code_argv("print(1)", "x") == [sys.executable, "-c", "print(1)", "x"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/spacrq/spacrq")
    assert procs.module_argv("spacrq", "queue", "run", "n.queue.json") == \
        ["/opt/spacrq/spacrq", "queue", "run", "n.queue.json"]
    assert procs.module_argv("spacrq.blockwise.worker", "3", "4") == \
        ["/opt/spacrq/spacrq", "-m", "spacrq.blockwise.worker", "3", "4"]
    assert procs.interpreter() == "/opt/spacrq/spacrq"
    from spacrq.experiments.declarations import _default_python
    from spacrq.experiments.demo import demo_spec
    assert _default_python() == "/opt/spacrq/spacrq"  # built-in experiments run in the bundle
    assert demo_spec(Path("/ws")).python == "/opt/spacrq/spacrq"


def _starts_with_sys_executable(node: ast.AST) -> bool:
    """A list display ``[sys.executable, …]``: a child started without asking module_argv."""
    return (isinstance(node, ast.List) and node.elts
            and isinstance(node.elts[0], ast.Attribute) and node.elts[0].attr == "executable"
            and isinstance(node.elts[0].value, ast.Name) and node.elts[0].value.id == "sys")


def test_every_child_start_asks_module_argv():
    """A frozen build has no python: only spacrq.procs may put sys.executable at the head of an argv."""
    offenders = []
    for path in sorted((ROOT / "spacrq").rglob("*.py")):
        if path.name == "procs.py" and path.parent.name == "spacrq":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree)
                      if _starts_with_sys_executable(n)]
    assert offenders == []


# ---- the dispatcher --------------------------------------------------------------------------

def test_dispatcher_runs_modules_like_python_m(tmp_path):
    proc = dispatcher("-m", "spacrq.run", "--list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "command" in proc.stdout and "python" in proc.stdout
    (tmp_path / "labcode.py").write_text("import sys\nprint('lab', sys.argv[1:])\n")
    proc = dispatcher("-m", "labcode", "a", "b", cwd=tmp_path)  # the folder is on the path, as for -m
    assert proc.stdout == "lab ['a', 'b']\n", proc.stderr
    proc = dispatcher("-m", "no_such_lab_module", cwd=tmp_path)
    assert proc.returncode == 1 and "No module named no_such_lab_module" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_dispatcher_runs_code_like_python_c():
    proc = dispatcher("-u", "-c", "import sys; print(sys.argv); raise SystemExit(3)", "x")
    assert (proc.returncode, proc.stdout) == (3, "['-c', 'x']\n")
    assert dispatcher("-c").returncode == 2


def test_dispatcher_is_the_spacrq_command():
    proc = dispatcher("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("spacrq ")
    proc = dispatcher("queue", "status", "/nonexistent/n.queue.json")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("home", [None, "/nonexistent/home", "/proc"], ids=["unset", "missing", "unwritable"])
def test_no_writable_home_is_one_sentence_and_exit_2(home):
    env = {k: v for k, v in os.environ.items() if k != "HOME"}
    if home is not None:
        env["HOME"] = home
    proc = dispatcher(env=env)  # no arguments: the window, which keeps its state in the home folder
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("spacrq: ")
    assert "HOME" in proc.stderr and "Traceback" not in proc.stderr


def test_children_get_the_operators_library_path():
    code = "import os; print(os.environ.get('LD_LIBRARY_PATH'))"
    env = dict(os.environ, LD_LIBRARY_PATH="/bundle/_internal", LD_LIBRARY_PATH_ORIG="/usr/lab/lib")
    boot = "import sys\nfrom spacrq.frozen import _restore_library_path\n_restore_library_path()\n" + code
    proc = subprocess.run([sys.executable, "-c", boot], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stdout == "/usr/lab/lib\n"


# ---- the real bundle -------------------------------------------------------------------------

@pytest.fixture(scope="session")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle")
    started = time.monotonic()
    proc = subprocess.run(["bash", str(ROOT / "packaging" / "build.sh"), str(out / "dist")],
                          env=dict(os.environ, PYTHON=sys.executable,
                                   SPACRQ_BUILD_WORK=str(out / "work")),
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    exe = out / "dist" / "spacrq" / "spacrq"
    assert exe.is_file()
    print(f"bundle built in {time.monotonic() - started:.0f}s")
    return exe


def bundle_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV")) and k not in ("SPACRQ_WORKSPACE",)}
    env.update(HOME=str(home), QT_QPA_PLATFORM="offscreen", **extra)
    return env


@needs_build
@pytest.mark.timeout(1500)
def test_the_bundle_opens_its_window_and_runs_the_demo_night(bundle, tmp_path):
    from spacrq.queue.runner import runner_state
    from spacrq.queue.store import load_queue
    home = tmp_path / "home"
    home.mkdir()
    workspace = home / "spacrq-workspace"
    window = subprocess.Popen([str(bundle)], env=bundle_env(home), cwd=home,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        demo = workspace / "queues" / "demo.queue.json"
        wait_until(lambda: demo.is_file() or window.poll() is not None, 180, "the window to seed the demo")
        assert window.poll() is None, window.stdout.read().decode(errors="replace")
        started = subprocess.run([str(bundle), "queue", "run", str(demo), "--detach"],
                                 env=bundle_env(home), capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr
        wait_until(lambda: (runner_state(demo) or {}).get("state") in ("finished", "crashed"), 600,
                 "the demo night to end")
        wait_until(lambda: not runner_state(demo)["alive"], 60, "the runner to exit")
        assert runner_state(demo)["state"] == "finished"
        assert runner_state(demo).get("keeper"), "the bundle's runner ran without its keeper"
        queue = load_queue(demo)
        statuses = {job.id: job.status for job in queue.jobs}
        assert "running" not in statuses.values() and "pending" not in statuses.values(), statuses
        assert "not_run" not in statuses.values(), statuses
        assert "success" in statuses.values()
        for job in queue.jobs:
            if job.status != "success":
                continue
            header = Path(job.log_path).read_text(errors="replace").splitlines()[:6]
            argv = next(line for line in header if line.startswith("# argv "))
            if job.module != "command":  # module jobs run as <bundle> -m spacrq.run …
                assert argv.startswith(f"# argv ['{bundle}', '-m', 'spacrq.run'"), argv
            assert job.ran_with["python"] == str(bundle)
        worker_logs = list((workspace / "runs").glob("*/logs/worker-*.log"))
        if any(job.module == "blockwise" for job in queue.jobs):
            assert worker_logs, "no block worker ran"
        from spacrq.experiments.errors import PROCESS_FILE
        runs = list((workspace / "experiments").glob(f"*/runs/*/{PROCESS_FILE}"))
        if any(job.module == "experiment" for job in queue.jobs):  # experiments: <bundle> -m MODULE
            assert runs and all(json.loads(p.read_text())["argv"][:2] == [str(bundle), "-m"]
                                for p in runs)
        assert window.poll() is None  # the window lived through the night
    finally:
        window.terminate()
        try:
            window.wait(timeout=30)
        except subprocess.TimeoutExpired:
            window.kill()
            window.wait(timeout=10)
        window.stdout.close()


@needs_build
@pytest.mark.timeout(1500)
def test_the_bundle_without_a_writable_home_says_so(bundle):
    env = bundle_env(Path("/proc"))
    del env["HOME"]
    for home in (None, "/proc"):
        if home:
            env["HOME"] = home
        proc = subprocess.run([str(bundle)], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "HOME" in proc.stderr and "Traceback" not in proc.stderr


@needs_build
@pytest.mark.timeout(1500)
def test_the_bundle_carries_resources_and_its_own_dispatcher(bundle, tmp_path):
    code = ("from spacrq.resources import RESOURCES, resource_path; import spacrq.autostart as a; "
            "print(resource_path('icons/256x256/spacrq.png')); print(a.autostart_argv())")
    proc = subprocess.run([str(bundle), "-c", code], env=bundle_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    icon, argv = proc.stdout.splitlines()
    assert Path(icon).is_relative_to(bundle.parent) and Path(icon).is_file()
    assert argv == repr([str(bundle), "autostart", "run", "--wait", "120"])  # the autostart starts the bundle
    desk = subprocess.run([str(bundle), "install-desktop"], env=bundle_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert desk.returncode == 0, desk.stderr
    entry = (tmp_path / ".local" / "share" / "applications" / "spacrq.desktop").read_text()
    assert f"Exec={bundle}\n" in entry


@needs_build
@pytest.mark.timeout(600)
def test_the_wheel_ships_resources_as_spacrq_resources(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    import shutil
    for folder in ("spacrq", "resources"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                           str(tmp_path / "w"), str(src)], capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheel = next((tmp_path / "w").glob("spacrq-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"spacrq/resources/__init__.py", "spacrq/resources/spacrq.svg",
            "spacrq/resources/spacrq.desktop", "spacrq/resources/icons/16x16/spacrq.png",
            "spacrq/resources/icons/256x256/spacrq.png"} <= names
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    probe = (f"import sys; sys.path.insert(0, {str(unpacked)!r}); "
             "from spacrq.resources import resource_path; print(resource_path('spacrq.svg'))")
    found = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == str(unpacked / "spacrq" / "resources" / "spacrq.svg"), found.stderr
