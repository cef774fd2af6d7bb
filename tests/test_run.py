"""``python -m spacrq.run``: settings layering and the 0/1/2 exit-code contract."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spacrq.queue import classify_failure
from spacrq.run import main


def test_settings_are_layered_defaults_file_overrides(tmp_path, capsys):
    csv = tmp_path / "s.csv"
    csv.write_text('Key,Value\ntarget,json:dumps\nwrites,"[""/a""]"\n')
    assert main(["python", "--settings", str(csv), "--set", 'writes=["/b"]', "--dry-run"]) == 0
    out = capsys.readouterr().out
    resolved = json.loads(out[:out.rindex("}") + 1])
    assert resolved == {"target": "json:dumps", "inputs": [], "writes": ["/b"]}


def test_json_settings_file(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"argv": ["true"]}))
    assert main(["command", "--settings", str(f)]) == 0


@pytest.mark.parametrize("argv,needle", [
    (["nosuch"], "unknown module 'nosuch'"),
    (["command", "--set", "nokey=1"], "has no setting 'nokey'; use one of: argv, cwd"),
    (["command", "--set", "argv=notalist"], "is a list"),
    (["command", "--settings", "/nope/s.csv"], "settings file not found"),
    (["command"], "argv must be a non-empty list"),
    ([], "name a module to run"),
    (["command", "--bogus"], "unrecognized arguments"),
])
def test_bad_arguments_exit_2_with_one_sentence(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.startswith("error: ") and err.count("\n") == 1


def test_list_and_describe(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "command" in out and "python" in out
    assert main(["command", "--describe"]) == 0
    assert "argv = []" in capsys.readouterr().out


def test_a_module_that_raises_exits_1_with_an_error_line_the_queue_reads(tmp_path):
    log = tmp_path / "job.log"
    with open(log, "w") as fh:
        code = subprocess.call([sys.executable, "-m", "spacrq.run", "python", "--set",
                                "target=json:loads"], stdout=fh, stderr=subprocess.STDOUT)
    assert code == 1
    text = log.read_text()
    assert "Traceback" in text
    assert text.strip().splitlines()[-1].startswith("error: TypeError: ")
    assert classify_failure(code, log)[0] == "TypeError"


def test_a_failing_command_exits_1_naming_its_code(capsys):
    assert main(["command", "--set", 'argv=["sh", "-c", "exit 4"]']) == 1
    assert "error: CommandFailed: sh exited with code 4" in capsys.readouterr().err


def test_a_ledger_left_unstamped_is_stamped_in_the_first_output_folder(tmp_path, monkeypatch):
    from spacrq.ledger import read_run_status
    mod = tmp_path / "runhelp_partial.py"
    mod.write_text("def go(settings, ctx):\n"
                   "    ctx.ledger.succeeded('a')\n    ctx.ledger.failed('b', 'lost')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    assert main(["python", "--set", "target=runhelp_partial:go", "--set",
                 f'writes=["{out}"]']) == 0
    stamps = read_run_status(out / "python")
    assert stamps[0]["n_failed"] == 1 and stamps[0]["status"] == "partial"


def test_the_context_reports_an_abort_but_not_a_plain_stop(tmp_path, monkeypatch):
    from spacrq.run import Context
    from spacrq.runfiles import ask
    monkeypatch.setenv("SPACRQ_JOB_LOG", str(tmp_path / "01_x.log"))
    ctx = Context("x", str(tmp_path))
    assert not ctx.stop_requested()
    ask(tmp_path, stop="after_job")
    assert not ctx.stop_requested()
    ask(tmp_path, stop="abort")
    assert ctx.stop_requested()
