"""``spacrq report``: what it prints for each kind of PATH, and one sentence + exit 2 for bad input."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spacrq import cli
from spacrq.blockwise import report as rp
from spacrq.blockwise import report_cli


def _store_helpers():
    """The store-writing helpers of test_report_store.py, loaded by path (tests/ is no package)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).with_name("test_report_store.py")
    spec = importlib.util.spec_from_file_location("spacrq_tests_report_store", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_helpers = _store_helpers()
fill_blocks, make_store, run_line = _helpers.fill_blocks, _helpers.make_store, _helpers.run_line


@pytest.fixture
def report_cmd():
    """Run ``spacrq report`` in-process, through the top-level command."""
    assert "spacrq.blockwise.report_cli" in cli.GROUPS

    def run(*argv):
        return cli.main(["report", *map(str, argv)])
    return run


@pytest.fixture
def runs_dir(tmp_path):
    """A workspace runs/ folder: one tracked store, one plain log folder, and clutter."""
    runs = tmp_path / "ws" / "runs"
    g = make_store(runs / "smooth")
    fill_blocks(g, [(0, 0), (0, 1), (1, 1)], start=100.5, wall=[0.1, 0.2, 0.3])
    rp.append_run(rp.runs_file(runs / "smooth"), run_line("smooth", started_at=100.0))
    rp.append_run(rp.runs_file(runs / "threshold"), run_line("threshold", started_at=50.0))
    (runs / "notes").mkdir()
    return runs


def test_report_of_a_folder_prints_every_task(report_cmd, runs_dir, capsys):
    assert report_cmd(runs_dir) == 0
    out = capsys.readouterr().out
    assert out.startswith("Resource Utilization")
    assert "  smooth  4 blocks, 1 worker" in out and "  threshold  4 blocks, 1 worker" in out
    assert "peak RSS" in out  # the store's measurements


def test_default_path_is_the_workspace_runs_folder(report_cmd, runs_dir, monkeypatch, capsys):
    monkeypatch.setenv("SPACRQ_WORKSPACE", str(runs_dir.parent))
    assert report_cmd() == 0
    assert "threshold" in capsys.readouterr().out
    monkeypatch.delenv("SPACRQ_WORKSPACE")
    assert report_cmd("--workspace", runs_dir.parent, "--task", "smooth") == 0
    out = capsys.readouterr().out
    assert "smooth" in out and "threshold" not in out


def test_a_workspace_folder_as_path_means_its_runs(report_cmd, runs_dir, capsys):
    (runs_dir.parent / "workspace.json").write_text("{}")
    assert report_cmd(runs_dir.parent) == 0
    assert "threshold" in capsys.readouterr().out


def test_json_output_round_trips(report_cmd, runs_dir, capsys):
    assert report_cmd(runs_dir / "threshold" / "runs.jsonl", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["schema"], doc["kind"]) == (1, "report")
    back = rp.RunReport.from_dict(doc["tasks"])
    assert back["threshold"] == run_line("threshold", started_at=50.0)


def test_store_path_and_block_drill_down(report_cmd, runs_dir, capsys):
    assert report_cmd(runs_dir / "smooth", "--block", "0,1") == 0
    out = capsys.readouterr().out
    assert out.startswith("block 1 of smooth at (0, 1): done")
    assert "200.0 ms" in out and "1000 B" in out
    assert report_cmd(runs_dir, "--task", "smooth", "--block", "5", "--json") == 0
    assert json.loads(capsys.readouterr().out)["block"]["coord"] == [1, 1]


def test_nothing_measured_is_said_in_words_not_zeros(report_cmd, tmp_path, capsys):
    store = tmp_path / "plain"
    g = make_store(store, task_id="plain", tracking=False)
    g["done"][0, 0] = True
    assert report_cmd(store) == 0
    out = capsys.readouterr().out
    assert "Resource Utilization" not in out
    assert "Nothing was measured" in out and "plain  1 block" in out


def test_empty_runs_folder(report_cmd, tmp_path, capsys):
    assert report_cmd(tmp_path) == 0
    assert "No blockwise runs in" in capsys.readouterr().out


def test_torn_runs_file_shows_the_runs_before_it(report_cmd, tmp_path, capsys):
    path = tmp_path / "runs.jsonl"
    rp.append_run(path, run_line(started_at=7.0))
    with open(path, "a") as f:
        f.write('{"task_id": "smooth", "blo')
    assert report_cmd(path, "--json") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["tasks"]["smooth"]["started_at"] == 7.0
    assert "cut off" in captured.err


@pytest.mark.parametrize("argv, message", [
    (["{tmp}/missing"], "does not exist"),
    (["{tmp}/garbage.jsonl"], "holds no readable run report (1 damaged line(s))"),
    (["{runs}", "--task", "nope"], "there is no task 'nope'"),
    (["{runs}", "--block", "1"], "add --task ID"),
    (["{runs}/smooth", "--block", "99"], "outside the task's 12 blocks"),
    (["{runs}/smooth", "--block", "x,y"], "neither a spatial id nor a grid coordinate"),
    (["{runs}/threshold", "--block", "1"], "has no tracking store"),
    (["--workspace", "{tmp}/nowhere"], "there is no runs folder"),
    (["{runs}", "--max-workers", "-1"], "--max-workers must be 0 or more"),
])
def test_bad_input_is_one_sentence_and_exit_2(report_cmd, runs_dir, tmp_path, capsys, argv, message):
    (tmp_path / "garbage.jsonl").write_text("nothing here\n")
    argv = [a.format(tmp=tmp_path, runs=runs_dir) for a in argv]
    assert report_cmd(*argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.err.startswith("spacrq: ") and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err and captured.out == ""


def test_a_broken_store_in_a_folder_is_a_note_not_the_end(report_cmd, runs_dir, capsys):
    broken = runs_dir / "broken"
    make_store(broken)
    (broken / "done" / "zarr.json").write_text("{garbage")
    assert report_cmd(runs_dir) == 0
    captured = capsys.readouterr()
    assert "smooth" in captured.out and "broken" in captured.err


def test_the_command_runs_as_a_process(runs_dir):
    """End to end through ``python -m spacrq`` once."""
    done = subprocess.run([sys.executable, "-m", "spacrq", "report", str(runs_dir / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "does not exist" in done.stderr
    done = subprocess.run([sys.executable, "-m", "spacrq", "report", str(runs_dir), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and set(json.loads(done.stdout)["tasks"]) == {"smooth", "threshold"}


def test_register_adds_the_report_subcommand():
    import argparse
    parser = argparse.ArgumentParser()
    report_cli.register(parser.add_subparsers())
    args = parser.parse_args(["report", "x", "--json", "--task", "t"])
    assert (args.path, args.json, args.task, args.handler) == ("x", True, "t", report_cli.run_report)


def test_history_lists_every_run_oldest_first(report_cmd, runs_dir, capsys):
    later = run_line("smooth", started_at=200.0, finished_at=260.0, skipped=3)
    later.outcome = {"state": "failed", "failed": 1}
    rp.append_run(rp.runs_file(runs_dir / "smooth"), later)
    assert report_cmd(runs_dir, "--history") == 0
    out = capsys.readouterr().out
    smooth = out[out.index("  smooth  2 runs"):]
    rows = [line for line in smooth.splitlines()[2:4]]
    assert rows[0].split()[2:4] == ["10.00", "s"] and rows[1].split()[2:4] == ["1m", "00s"]
    assert rows[1].split()[-1] == "failed" and rows[0].split()[-1] == "—"
    assert "  threshold  1 run\n" in out
    assert report_cmd(runs_dir, "--history", "--json", "--task", "smooth") == 0
    history = json.loads(capsys.readouterr().out)["tasks"]["smooth"]
    assert [r["started_at"] for r in history] == [100.0, 200.0]
    assert history[1]["outcome"]["state"] == "failed"


def test_history_of_a_store_with_no_finished_run(report_cmd, tmp_path, capsys):
    g = make_store(tmp_path / "live")
    fill_blocks(g, [(0, 0)], start=5.0, wall=[0.1])
    assert report_cmd(tmp_path / "live", "--history") == 0
    assert "no finished run yet" in capsys.readouterr().out


@pytest.mark.parametrize("body, why", [(b"\x00\xff garbage\n", "1 damaged line(s)"),
                                       (b'{"task_id": "t", "bloc', "its last line is cut off")])
def test_a_runs_file_with_no_readable_report_says_what_its_lines_are(tmp_path, capsys, body, why):
    """It said 'holds no run report', as for an empty file, and hid that its lines were damaged."""
    path = tmp_path / "runs.jsonl"
    path.write_bytes(body)
    assert cli.main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"holds no readable run report ({why})" in err and err.count("\n") == 1


def test_history_shows_the_run_that_was_killed_before_it_wrote_its_line(report_cmd, tmp_path,
                                                                         capsys):
    """A run killed mid-way writes no runs.jsonl line: the history left the night out."""
    from spacrq.blockwise.run_state import scheduler_record
    from spacrq.runfiles import write_progress
    store = tmp_path / "smooth"
    g = make_store(store)
    fill_blocks(g, [(0, 0)], start=101.0, wall=[0.3])
    rp.append_run(rp.runs_file(store), run_line("smooth", started_at=100.0, finished_at=110.0))
    dead = dict(scheduler_record(), started=1.0)  # (this pid, but not the process that started then)
    write_progress(store / "progress.json", {"state": "running", "started_at": 200.0,
                                             "run_id": "r2", "scheduler": dead,
                                             "task": {"total": 12, "done": 3}})
    fill_blocks(g, [(2, 0), (2, 1)], start=201.0, wall=[0.2, 0.2], worker=5)
    assert report_cmd(store, "--history") == 0
    out = capsys.readouterr().out
    assert "  smooth  2 runs" in out and out.splitlines()[-1].split()[-1] == "interrupted"
    assert report_cmd(store, "--history", "--json") == 0
    history = json.loads(capsys.readouterr().out)["tasks"]["smooth"]
    assert [r["started_at"] for r in history] == [100.0, 200.0]
    assert history[1]["outcome"]["state"] == "interrupted"



@pytest.mark.parametrize("when", [1e12 * 1e6, 253402300800.0, 1e300])
def test_history_of_a_run_stamped_beyond_any_calendar_is_no_traceback(report_cmd, tmp_path,
                                                                       capsys, when):
    from spacrq.blockwise.report_format import format_time
    assert format_time(when) == "—"
