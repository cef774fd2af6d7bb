"""The manifest's command-line options and devices: checked, kept with the run, on its command line."""
from __future__ import annotations

import json
import textwrap

import pytest

from spacrq import experiments as ex
from spacrq.experiments.launch import (check_devices, check_options, devices_for, options_argv,
                                       prepare_run, run_argv)
from spacrq.runfiles import read_json

from .support import fake_module

MANIFEST = {"module": "m", "chooses_devices": True, "options": [
    {"flag": "--prominence", "dtype": "float", "description": "peak prominence"},
    {"flag": "--repeats", "dtype": "int"},
    {"flag": "--fast", "dtype": "bool"},
    {"flag": "--label", "dtype": "str"},
    {"flag": "--fit", "dtype": "str", "choices": ["gauss", "lorentz"]}]}


def test_options_are_checked_as_declared():
    chosen = {"--prominence": 3, "--repeats": 2.0, "--fast": False, "--label": "a b",
              "--fit": "gauss"}
    assert check_options(MANIFEST, chosen) == {"--prominence": 3.0, "--repeats": 2,
                                               "--label": "a b", "--fit": "gauss"}
    for bad, words in [({"--nope": 1}, "not an option the module declares"),
                       ({"--repeats": 1.5}, "whole number"), ({"--fast": "yes"}, "switch"),
                       ({"--prominence": float("nan")}, "finite number"),
                       ({"--fit": "cubic"}, "one of gauss, lorentz"), ({"--label": 3}, "text")]:
        with pytest.raises(ex.ExperimentError, match=words):
            check_options(MANIFEST, bad)
    with pytest.raises(ex.ExperimentError, match="cannot pass"):
        check_options({"options": [{"flag": "--run-root"}]}, {"--run-root": "/x"})


def test_options_argv_keeps_a_negative_value_a_value():
    assert options_argv({"--prominence": -3.5, "--fast": True, "--label": "a b",
                         "--repeats": 2}) == ["--prominence=-3.5", "--fast", "--label=a b",
                                              "--repeats=2"]
    for garbage in (["--x"], {"--resume": "r"}, {"rm -rf": 1}, {"--x": [1]}, {"--x": "a\0b"}):
        with pytest.raises(ex.ExperimentError, match="create the run again"):
            options_argv(garbage, where="created.json")


def test_devices_only_for_a_module_that_chooses_them():
    assert check_devices(MANIFEST, ["hwp", "spec", "hwp"]) == ["hwp", "spec"]
    assert check_devices(MANIFEST, None) is None
    with pytest.raises(ex.ExperimentError, match="does not choose its devices"):
        check_devices({"module": "m"}, ["hwp"])
    with pytest.raises(ex.ExperimentError, match="device names"):
        check_devices(MANIFEST, "hwp,spec")


def test_a_created_run_keeps_its_options_for_start_and_resume(tmp_path, demo_spec):
    run = prepare_run(demo_spec, "r", {"points": 2}, options={"--prominence": -1, "--fast": True},
                      devices=["hwp"], manifest=MANIFEST)
    created = read_json(run / "created.json")
    assert created["options"] == {"--prominence": -1.0, "--fast": True}
    assert created["devices"] == ["hwp"]
    for resume in (False, True):
        argv = run_argv(demo_spec, run, resume=resume)
        assert argv[-2:] == ["--prominence=-1.0", "--fast"]
        assert "--devices" not in argv  # a record, never an argument (see launch's docstring)
    (run / "created.json").write_text(json.dumps({**created, "options": {"--config": "/etc"}}))
    with pytest.raises(ex.ExperimentError, match="not an option spacrq passes"):
        run_argv(demo_spec, run, resume=False)


ECHO = """
import json, os, sys
if "--manifest" in sys.argv:
    print(json.dumps({"module": "echo", "schema": {}, "chooses_devices": True, "options": [
        {"flag": "--gain", "dtype": "float"}, {"flag": "--fast", "dtype": "bool"}]}))
    sys.exit(0)
with open(os.path.join(os.getcwd(), "argv.json"), "a") as out:
    out.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def test_the_run_starts_with_its_options(tmp_path):
    spec = fake_module(tmp_path, ECHO, name="echo")
    launched = ex.start_run(spec, "r1", {}, options={"--gain": 2.5, "--fast": False},
                            devices=["stage"])
    assert launched.wait(30) == 0
    (argv,) = [json.loads(line) for line in
               (tmp_path / "echo-checkout" / "argv.json").read_text().splitlines()]
    assert argv[-1] == "--gain=2.5" and "--fast" not in argv
    assert read_json(launched.run_dir / "spacrq-process.json")["argv"][-1] == "--gain=2.5"
    assert read_json(launched.run_dir / "created.json")["devices"] == ["stage"]
    with pytest.raises(ex.ExperimentError, match="not an option the module declares"):
        ex.start_run(spec, "r2", {}, options={"--loss": 1})
    assert not (launched.run_dir.parent / "r2").exists()


PLESTY_OPTIONS = textwrap.dedent('''
    import sys
    from plesty.lib.experiment import Experiment, ExperimentCLI, Manifest, Plan, Step

    class Scan(Experiment):
        def __init__(self, config, args, **kw):
            super().__init__(**kw)
            self.config, self.args = config, args

        def build_plan(self):
            return Plan([Step(id="p0", op="point", params={})], config=dict(self.config))

        def point(self):
            return {"prominence": self.args.prominence, "fast": self.args.fast}

    cli = ExperimentCLI(Manifest(module="plopt", title="Options scan"))
    cli.add_argument("--prominence", type=float, help="Peak prominence.", sets="fit.prominence")
    cli.add_argument("--fast", action="store_true", help="Skip settling.")

    @cli.needs
    def needs(config):
        return ["hwp", "spec"]

    @cli.rig
    def rig(args, config, skip):
        return None

    @cli.build
    def build(args, config, run_root, devices):
        return Scan(config, args, run_root=run_root)

    if __name__ == "__main__":
        sys.exit(cli.main())
''')


def test_a_plesty_module_runs_with_its_options_and_devices(tmp_path, plesty_python):
    checkout = tmp_path / "checkout"
    (checkout / "plopt").mkdir(parents=True)
    (checkout / "plopt" / "__init__.py").write_text("")
    (checkout / "plopt" / "__main__.py").write_text(PLESTY_OPTIONS)
    spec = ex.ExperimentSpec("plopt", "plopt", plesty_python, str(checkout), {},
                             str(tmp_path / "runs"))
    manifest = ex.read_manifest(spec)
    assert manifest["chooses_devices"] is True
    assert [o["flag"] for o in manifest["options"]] == ["--prominence", "--fast"]
    assert devices_for(spec, {"points": 1}) == ["hwp", "spec"]  # what the device list shows
    launched = ex.start_run(spec, "r1", {}, options={"--prominence": -2.5, "--fast": True},
                            devices=["hwp", "spec"], manifest=manifest)
    assert launched.wait(120) == 0, (launched.log.read_text())
    status = ex.status_of(launched.run_dir)
    assert status["state"] == "completed"
    (record,) = ex.records_of(launched.run_dir)
    assert record["value"] == {"prominence": -2.5, "fast": True}
