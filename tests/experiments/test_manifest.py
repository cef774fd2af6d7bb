"""Asking a module for its manifest: good answers, and a hang, junk or a crash as one sentence."""
from __future__ import annotations

import pytest

from spacrq import experiments as ex
from spacrq.experiments import ExperimentError

from .support import fake_module


def test_demo_module_manifest_has_units_bounds_and_options(demo_spec):
    manifest = ex.read_manifest(demo_spec)
    assert manifest["title"] == "Simulated instrument sweep"
    fields = dict(ex.fields_of(manifest))
    assert fields["dwell"]["unit"] == "s" and fields["dwell"]["min_value"] == 0.0
    assert fields["detector.mode"]["options"] == ["photodiode", "pmt"]
    assert fields["points"]["default"] == 50
    assert ex.manifest_defaults(manifest)["detector"]["readings"] == 4


def test_manifest_that_hangs_times_out(tmp_path):
    spec = fake_module(tmp_path, "import time\ntime.sleep(60)\n")
    with pytest.raises(ExperimentError, match="did not answer .* within 0.5 s"):
        ex.read_manifest(spec, timeout=0.5)


def test_manifest_that_prints_junk_is_refused(tmp_path):
    spec = fake_module(tmp_path, "print('hello, I am not JSON')\n")
    with pytest.raises(ExperimentError, match="printed no manifest .*hello, I am not JSON"):
        ex.read_manifest(spec)


def test_manifest_that_prints_a_list_is_refused(tmp_path):
    spec = fake_module(tmp_path, "print('[1, 2]')\n")
    with pytest.raises(ExperimentError, match="not a manifest object"):
        ex.read_manifest(spec)


def test_manifest_with_a_bad_schema_is_refused(tmp_path):
    spec = fake_module(tmp_path, "print('{\"module\": \"m\", \"schema\": {\"g\": [{\"unit\": \"s\"}]}}')\n")
    with pytest.raises(ExperimentError, match="a parameter has no 'name'"):
        ex.read_manifest(spec)


def test_manifest_exiting_non_zero_says_what_it_said(tmp_path):
    spec = fake_module(tmp_path, "import sys\nsys.stderr.write('no driver for stage B\\n')\n"
                                 "sys.exit(3)\n")
    with pytest.raises(ExperimentError, match="exited with code 3 saying: no driver for stage B"):
        ex.read_manifest(spec)


def test_manifest_after_log_lines_is_found(tmp_path):
    spec = fake_module(tmp_path, "print('INFO loading')\nprint('{\"module\": \"x\", "
                                 "\"schema\": {}}')\n")
    assert ex.read_manifest(spec)["module"] == "x"


def test_missing_interpreter_and_folder_are_named(tmp_path):
    spec = fake_module(tmp_path, "print('{}')\n")
    with pytest.raises(ExperimentError, match="interpreter .* does not exist"):
        ex.read_manifest(spec, python=str(tmp_path / "no-python"))
    with pytest.raises(ExperimentError, match="working folder"):
        ex.read_manifest(spec, cwd=str(tmp_path / "nowhere"))


def test_read_devices(tmp_path):
    spec = fake_module(tmp_path, "import sys\nprint('{\"devices\": [\"hwp\", \"spec\"]}' "
                                 "if '--devices' in sys.argv else '{}')\n")
    assert ex.read_devices(spec, None, None, "c.yaml") == ["hwp", "spec"]
    spec = fake_module(tmp_path, "print('{\"devices\": null}')\n", name="alldev")
    assert ex.read_devices(spec, None, None, "c.yaml") is None
    spec = fake_module(tmp_path, "print('nothing')\n", name="nodev")
    with pytest.raises(ExperimentError, match="no device list"):
        ex.read_devices(spec, None, None, "c.yaml")


def test_run_environment_layers_bench_then_dotenv_then_declaration(tmp_path):
    spec = ex.ExperimentSpec("a", "m", "py", str(tmp_path), {"STAGE": "B"}, "")
    (tmp_path / ".env").write_text("# deployment\nSTAGE=A\nexport ADDR='tcp://x:1'\nEMPTY=\n")
    dotenv = ex.read_dotenv(tmp_path / ".env")
    assert dotenv == {"STAGE": "A", "ADDR": "tcp://x:1", "EMPTY": ""}
    env = ex.run_environment(spec, {"PATH": "/bin", "ADDR": "bench"}, dotenv)
    assert env == {"PATH": "/bin", "ADDR": "tcp://x:1", "STAGE": "B", "EMPTY": ""}
    assert ex.read_dotenv(tmp_path / "missing") == {}
