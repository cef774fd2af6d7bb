"""The morning report: a real night (blockwise, experiment, partial, failure, skip) told on one page."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from spacrq.night import report_html, write_report
from spacrq.night.collect import gather
from spacrq.queue.model import Job, Queue
from spacrq.queue.store import save_queue

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = "2026-12-01T07:00:00+00:00"


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


#: a measurement that stamps per-item results: one of its four wells has no image (PARTIAL)
MEASURE = """
import pathlib, sys
from spacrq.ledger import Ledger
plate, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
ledger = Ledger("measure")
for well in ("A01", "A02", "A03", "A04"):
    if (plate / (well + ".txt")).exists():
        ledger.succeeded(well, stage="measure")
    else:
        ledger.failed(well, "no image for well " + well, stage="measure")
(out / "measurements.csv").write_text("well\\n")
ledger.stamp(out / "measurements.csv")
"""


def build_night(folder: Path) -> Path:
    """A queue holding one job of every kind and outcome, in ``folder``."""
    data = np.random.default_rng(0).random((64, 64)).astype(np.float32)
    arr = zarr.create_array(str(folder / "in.zarr"), shape=data.shape, chunks=(16, 16),
                            dtype="float32")
    arr[...] = data
    plate = folder / "plate"
    plate.mkdir()
    for well in ("A01", "A02", "A04"):
        (plate / f"{well}.txt").write_text("xxxxxxx")
    queue = Queue(name="night")
    queue.add(Job(module="blockwise", id="smooth", label="smooth the volume",
                  settings={"input": str(folder / "in.zarr"), "output": str(folder / "out.zarr"),
                            "block_shape": [16, 16], "operation": "gaussian", "sigma": 1.0,
                            "num_workers": 2, "tracking": str(folder / "track")},
                  cwd=str(folder)), validate=False)
    queue.add(Job(module="command", id="measure", label="measure the plate (A03 missing)",
                  settings={"argv": _py(MEASURE) + [str(plate), str(folder / "measured")],
                            "writes": [str(folder / "measured")]},
                  cwd=str(folder)), validate=False)
    queue.add(Job(module="experiment", id="sweep", label="the demo sweep",
                  settings={"module": "spacrq.experiments.demo_sweep", "python": sys.executable,
                            "cwd": str(folder), "run_root": str(folder / "runs"),
                            "env": {"PYTHONPATH": str(ROOT)}, "run_id": "sweep1",
                            "config": {"points": 4, "dwell": 0}},
                  cwd=str(folder)), validate=False)
    queue.add(Job(module="command", id="boom", label="fails on purpose",
                  settings={"argv": _py("raise SystemExit('no such share: /mnt/plates')")}),
              validate=False)
    queue.add(Job(module="command", id="after-boom", label="needs boom",
                  settings={"argv": _py("print('never')")}, depends_on=["boom"]), validate=False)
    path = folder / "night.queue.json"
    save_queue(queue, path)
    return path


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    folder = tmp_path_factory.mktemp("night")
    path = build_night(folder)
    done = subprocess.run([sys.executable, "-m", "spacrq", "queue", "run", str(path)],
                          capture_output=True, text=True, timeout=180, cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr  # a failure and a skip: exit 1
    return path


def test_the_report_tells_the_night_in_the_operators_order(night):
    page = report_html(night, written_at=WRITTEN)
    verdict = re.search(r'id="verdict">([^<]*)<', page).group(1)
    assert "1 failed" in verdict and "1 partial" in verdict and "1 skipped" in verdict
    order = [page.index(h) for h in ("Failures, grouped", "PARTIAL", "Timeline", "Every job",
                                     "Blockwise runs", "Experiments", "The machine",
                                     "Where the logs are")]
    assert order == sorted(order)
    assert "no such share: /mnt/plates" in page            # the failure, with its message
    assert "needs boom" not in page.split("Skipped because of them")[0].split("Failures")[-1]
    assert re.search(r"<td class=\"num\">3</td><td class=\"num\">4</td><td class=\"num\">1</td>",
                     page)                                  # PARTIAL: 3 of 4 items, 1 failed
    assert "Resource Utilization" in page or "blocks" in page.split("Blockwise runs")[1]
    assert "Ended <b>completed</b> after 4 of 4 steps" in page


def test_every_blockwise_chart_has_curves_and_the_experiment_its_plot(night):
    facts = gather(night, with_machine=False)
    smooth = next(f for f in facts.jobs if f.job.id == "smooth")
    assert smooth.blockwise.problem == "" and smooth.blockwise.series["blocks"] == 16
    page = report_html(night, written_at=WRITTEN)
    blockwise = page.split("<h2>Blockwise runs</h2>")[1].split("<h2>")[0]
    figures = re.findall(r'<figure class="chart[^"]*">.*?</figure>', blockwise)
    assert len(figures) == 4
    assert all("empty" not in f.split(">")[0] for f in figures), figures
    workers = sorted(smooth.blockwise.series["per_worker"])
    assert workers
    for worker in workers:  # each worker that did blocks has its compute and its idle line
        assert f"worker {worker} compute" in blockwise and f"worker {worker} idle" in blockwise
    points = [len(p.split()) for p in re.findall(r'points="([^"]+)"', figures[0])]
    assert sum(points) == (16 + len(workers)) * 2   # each block (and 0 first), compute and idle
    experiment = page.split("<h2>Experiments</h2>")[1].split("<h2>")[0]
    assert "<svg" in experiment and "setpoint" in experiment


def test_the_same_night_gives_the_same_bytes(night):
    assert report_html(night, written_at=WRITTEN) == report_html(night, written_at=WRITTEN)
    later = report_html(night, written_at="2026-12-02T07:00:00+00:00")
    differ = [a for a, b in zip(report_html(night, written_at=WRITTEN).splitlines(),
                                later.splitlines()) if a != b]
    assert len(differ) == 1 and "written at" in differ[0]


def test_the_page_is_self_contained(night):
    page = report_html(night, written_at=WRITTEN)
    assert "<script" not in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "@page { size: A4" in page


def test_damaged_parts_are_described_and_the_report_still_writes(night, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(night.parent, folder, symlinks=True)
    copy = folder / night.name
    # the copy's jobs still point at the original's store and run: damage the copy's own
    text = copy.read_text().replace(str(night.parent), str(folder))
    copy.write_text(text)
    (folder / "track" / "zarr.json").write_bytes(b"\xff\xfe not json")
    shutil.rmtree(folder / "runs" / "sweep1")
    for log in (folder).rglob("*boom*.log"):
        log.chmod(0)
    out = write_report(copy, tmp_path / "report.html", written_at=WRITTEN)
    page = out.read_text()
    assert "could not be fully read" in page and "zarr.json" in page
    assert "no run of it started while the job ran" in page or "sweep1" in page
    assert out.stat().st_size < 5 * 2**20


def test_cli_writes_the_report_and_refuses_a_missing_queue(night, tmp_path, capsys):
    from spacrq.cli import main
    out = tmp_path / "r.html"
    assert main(["night-report", str(night), "--out", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert main(["night-report", str(tmp_path / "nope.queue.json")]) == 2
    assert "queue file not found" in capsys.readouterr().err


def test_cli_refuses_a_file_that_is_not_a_queue_and_writes_no_page(tmp_path, capsys):
    """Bad input is exit 2 with one sentence, as 'queue status' takes it: no page saying so."""
    from spacrq.cli import main
    bad = tmp_path / "bad.queue.json"
    bad.write_text("{")
    out = tmp_path / "bad.html"
    assert main(["night-report", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not valid JSON" in err and "replace the file" in err and len(err.splitlines()) == 1
    assert not out.exists() and not (tmp_path / "bad_logs").exists()
    assert main(["queue", "status", str(bad)]) == 2  # the same verdict on the same file


def test_cli_reports_a_readable_queue_whose_night_was_damaged(night, tmp_path, capsys):
    """A queue that reads is reported, its damage told in the page (the night that needs it)."""
    from spacrq.cli import main
    folder = tmp_path / "copy"
    shutil.copytree(night.parent, folder, symlinks=True)
    copy = folder / night.name
    copy.write_text(copy.read_text().replace(str(night.parent), str(folder)))
    (folder / "track" / "zarr.json").write_bytes(b"not json")
    out = tmp_path / "damaged.html"
    assert main(["night-report", str(copy), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert "could not be fully read" in out.read_text()


def test_cli_refuses_an_out_file_in_a_folder_that_does_not_exist(night, tmp_path, capsys):
    """As 'queue add' does: one sentence, exit 2, and no folder created on the way."""
    from spacrq.cli import main
    missing = tmp_path / "no" / "such"
    assert main(["night-report", str(night), "--out", str(missing / "x.html")]) == 2
    err = capsys.readouterr().err
    assert f"folder {missing} does not exist" in err and "create it first" in err
    assert not (tmp_path / "no").exists()


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_chromium_renders_the_page_with_its_verdict_and_sections(night, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed here (.ci/run installs it with apt-get)")
    page = write_report(night, tmp_path / "report.html", written_at=WRITTEN)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120).stdout
    assert 'id="verdict"' in dom and "1 failed" in dom
    for section in ("Failures, grouped", "Timeline", "Blockwise runs", "Experiments",
                    "The machine", "Where the logs are"):
        assert f"<h2>{section}</h2>" in dom
    shot = tmp_path / "report.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=900,2400",
                    page.as_uri()], capture_output=True, timeout=120)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    keep = Path("/work/notes/shots")
    if keep.is_dir():
        shutil.copy(shot, keep / "night_report.png")


def test_the_runner_writes_the_report_when_the_queue_ends_and_names_it(night):
    from spacrq.night import default_report_path
    report = default_report_path(night)
    assert report.is_file() and "Morning report: night" in report.read_text()
    assert 'id="verdict"' in report.read_text()


def test_the_notification_names_the_report(tmp_path):
    from spacrq.queue.engine import run_queue
    env_dump = tmp_path / "env.txt"
    queue = Queue(name="told")
    queue.add(Job(module="command", id="one", settings={"argv": _py("print('hi')")}),
              validate=False)
    queue.notify_command = _py("import os, sys; open(sys.argv[1], 'w').write("
                               "os.environ.get('SPACRQ_NIGHT_REPORT', ''))") + [str(env_dump)]
    path = tmp_path / "told.queue.json"
    save_queue(queue, path)
    result = run_queue(queue, path)
    named = env_dump.read_text()
    assert named and named == result.report_path and Path(named).is_file()
    assert f" report   {named}" in result.summary()


def test_a_report_that_cannot_be_written_is_a_note_not_the_end(tmp_path, monkeypatch):
    import spacrq.night as night_mod
    from spacrq.queue.engine import run_queue

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(night_mod, "write_report", broken)
    queue = Queue(name="full")
    queue.add(Job(module="command", id="one", settings={"argv": _py("print('hi')")}),
              validate=False)
    path = tmp_path / "full.queue.json"
    save_queue(queue, path)
    result = run_queue(queue, path)
    assert result.ok and result.report_path == ""
    assert any("morning report could not be written" in n for n in result.notes)


def test_a_night_whose_runner_died_says_when_it_was_resumed(tmp_path):
    import os
    import signal
    import time
    from spacrq.queue.runner import runner_state, start_runner
    from spacrq.queue.store import load_queue as load
    queue = Queue(name="crashy")
    queue.add(Job(module="command", id="long", settings={"argv": _py("import time; time.sleep(3)")}),
              validate=False)
    queue.add(Job(module="command", id="after", settings={"argv": _py("print('after')")}),
              validate=False)
    path = tmp_path / "crashy.queue.json"
    save_queue(queue, path)
    start_runner(path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = runner_state(path) or {}
        if state.get("state") == "running" and any(j.status == "running" for j in load(path).jobs):
            break
        time.sleep(0.05)
    os.kill(int(runner_state(path)["pid"]), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while (runner_state(path) or {}).get("alive") and time.monotonic() < deadline:
        time.sleep(0.05)
    died = re.search(r'id="verdict">([^<]*)<', report_html(path, written_at=WRITTEN)).group(1)
    assert "The runner died" in died, (died, runner_state(path))
    done = subprocess.run([sys.executable, "-m", "spacrq", "queue", "resume", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    page = report_html(path, written_at=WRITTEN)
    verdict = re.search(r'id="verdict">([^<]*)<', page).group(1)
    assert verdict.startswith("All good") and "resumed at" in verdict, verdict
    assert ">died, resumed<" in page.split("<h2>Timeline</h2>")[1]


def test_every_job_that_ran_has_its_peak_memory(night):
    facts = {f.job.id: f for f in gather(night, with_machine=False).jobs}
    for job_id in ("smooth", "measure", "sweep", "boom"):
        # exact, or (a job smaller than its supervisor) bounded: never neither
        known = facts[job_id].peak_rss_bytes or facts[job_id].peak_rss_at_most_bytes
        assert known and known > 1 << 20, job_id
    assert facts["smooth"].peak_rss_bytes                     # its workers measured each block
    assert facts["after-boom"].peak_rss_bytes is None       # skipped: it never ran
    assert facts["after-boom"].peak_rss_at_most_bytes is None


def test_the_report_and_the_run_report_chart_a_run_from_the_same_zero(night):
    """Both count run time from the run's start (its runs.jsonl ``started_at``), not from the
    job's start less a second: the same block is at the same second on the page and in the
    window (the demo's 7.4 s run spanned 0-7.3 s in one and 0-8.8 s in the other)."""
    from spacrq.blockwise.report_runs import read_runs, runs_file
    from spacrq.blockwise.watch_source import RunSource
    smooth = next(f for f in gather(night, with_machine=False).jobs if f.job.id == "smooth")
    store = Path(smooth.blockwise.store)
    source = RunSource(store, runs_file(store))
    source.refresh()
    window = source.detail(None).charts  # what the Run Report pane draws for the finished run
    page = smooth.blockwise.series
    assert window["compute"] and sorted(window["compute"]) == sorted(page["compute"])
    for worker, (x, y) in window["compute"].items():
        np.testing.assert_allclose(page["compute"][worker][0], x)
        np.testing.assert_allclose(page["compute"][worker][1], y)
    np.testing.assert_allclose(page["rate"][0], window["rate"][0])
    run = read_runs(runs_file(store))[-1]
    last = max(float(x[-1]) for x, _ in page["compute"].values())
    assert 0 < last <= run.finished_at - run.started_at + 1e-6  # inside the run, from its start


def test_the_memory_chart_is_in_the_tables_binary_units():
    """"max 49.0 MiB" in the tables is 49.0 on the chart (never a decimal 51.3 MB); a run that
    peaks above 1 GiB is charted in GiB, as the tables write it."""
    from spacrq.night.charts import block_charts
    x = np.arange(1.0, 11.0)
    series = {"rss_measured": True, "measured": False, "rss": (x, np.linspace(20, 49, 10) * 2**20)}
    rss = block_charts(series)[3]
    assert rss.y_label == "peak RSS (MiB)" and rss.note == "Highest: 49.0 MiB."
    assert float(rss.lines[0].y.max()) == pytest.approx(49.0)
    series["rss"] = (x, np.linspace(1, 3, 10) * 2**30)
    rss = block_charts(series)[3]
    assert rss.y_label == "peak RSS (GiB)" and rss.note == "Highest: 3.0 GiB."
    assert float(rss.lines[0].y.max()) == pytest.approx(3.0)


def test_a_stop_is_told_in_order_and_still_told_after_the_resume(tmp_path):
    """A crash, then the operator's stop, then a resume: the report written at the stop tells
    the crash before the stop, and the final one still tells the stop, marked on the timeline
    with the resumes, no label over a bar."""
    import os
    import signal
    from waiting import reap, wait_until  # tests/waiting.py
    from spacrq.night import default_report_path
    from spacrq.queue.runner import request_stop, runner_state, start_runner
    from spacrq.queue.store import load_queue as load
    queue = Queue(name="stoppy")
    for job_id in ("long", "next"):
        queue.add(Job(module="command", id=job_id,
                      settings={"argv": _py("import time; time.sleep(1.5)")}), validate=False)
    queue.add(Job(module="command", id="last", settings={"argv": _py("print('last')")}),
              validate=False)
    path = tmp_path / "stoppy.queue.json"
    save_queue(queue, path)

    def running(job_id):
        return any(j.id == job_id and j.status == "running" for j in load(path).jobs)

    def runner_alive():
        return (runner_state(path) or {}).get("alive")

    start_runner(path)
    wait_until(lambda: runner_alive() and running("long"), 60, "the job 'long' running")
    os.kill(int(runner_state(path)["pid"]), signal.SIGKILL)  # the runner dies mid-job
    wait_until(lambda: not runner_alive(), 30, "the runner's death")
    resumed = start_runner(path, resume=True)

    def resumed_at_work():  # its own record (it clears requests older than itself first)
        state = runner_state(path) or {}
        return state.get("alive") and state.get("pid") == resumed.pid \
            and state.get("state") == "running" and state.get("current_job") is not None
    wait_until(resumed_at_work, 60, "the resumed runner at work")
    request_stop(path)  # the operator: stop after the running job
    reap(resumed.pid)
    wait_until(lambda: (runner_state(path) or {}).get("state") == "stopped", 30, "the stop")
    at_stop = default_report_path(path).read_text()  # written by the runner as it stopped
    verdict = re.search(r'id="verdict">([^<]*)<', at_stop).group(1)
    assert verdict.index("The runner died and the queue was resumed at") \
        < verdict.index("Stopped"), verdict
    assert "stopped by request after job" in verdict and "not run" in verdict
    assert re.search(r"Stopped at [\d-]+ [\d:]+: stopped by request", verdict), verdict
    assert re.findall(r'text-anchor="middle">(died, resumed|stopped)</text>',
                      at_stop.split("<h2>Timeline</h2>")[1]) == ["died, resumed", "stopped"]
    done = subprocess.run([sys.executable, "-m", "spacrq", "queue", "resume", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    page = report_html(path, written_at=WRITTEN)
    verdict = re.search(r'id="verdict">([^<]*)<', page).group(1)
    assert verdict.startswith("All good"), verdict
    died, stopped, again = (verdict.index(s) for s in ("The runner died", "Stopped at",
                                                        "Resumed at"))
    assert died < stopped < again, verdict
    assert "after job" in verdict[stopped:again] and "stopped by request" not in verdict
    timeline = page.split("<h2>Timeline</h2>")[1].split("<h2>")[0]
    labels = re.findall(r'<text x="([\d.]+)" y="([\d.]+)" fill="[^"]+" text-anchor="middle">'
                        r"([^<]+)</text>", timeline)
    assert [label for _, _, label in labels] == ["died, resumed", "stopped", "resumed"]
    first_bar = min(float(y) for y in re.findall(r'<rect x="[\d.]+" y="([\d.]+)"', timeline))
    assert all(float(y) < first_bar for _, y, _ in labels)  # above the bars, never over one
    spots = [(float(x), int(float(y)), label) for x, y, label in labels]
    for (x1, y1, a), (x2, y2, b) in zip(spots, spots[1:]):  # two labels in one lane stay apart
        # (centred labels; a character of the page's 9.5px sans is under 6px wide)
        assert y1 != y2 or abs(x2 - x1) >= (len(a) + len(b)) * 6 / 2, spots


def _polylines(svg_text: str) -> dict[str, list[tuple[float, float]]]:
    found = re.findall(r'points="([^"]+)"><title>([^<]+)</title>', svg_text)
    return {name: [tuple(map(float, p.split(","))) for p in pts.split()] for pts, name in found}


def test_idle_is_drawn_on_its_own_right_hand_scale(night):
    """Idle is a few per cent of compute: on the compute scale it was a flat line along the
    bottom; it has its own scale on the right, as in the Run Report."""
    from spacrq.night import svg
    page = report_html(night, written_at=WRITTEN)
    blockwise = page.split("<h2>Blockwise runs</h2>")[1].split("<h2>")[0]
    workers = re.findall(r'<figure class="chart">.*?</figure>', blockwise)[0]
    assert ">idle (s), dashed</text>" in workers and ">compute (s), solid</text>" in workers
    lines = _polylines(workers)
    idle = [pts for name, pts in lines.items() if name.endswith(" idle")]
    assert idle
    plot_height = svg.HEIGHT - svg._TOP - svg._BOTTOM
    top = min(y for pts in idle for _, y in pts)
    assert top == pytest.approx(svg._TOP, abs=0.5)  # the highest idle reaches the top
    assert max(y for pts in idle for _, y in pts) - top > plot_height / 2


def test_the_panels_long_note_wraps_under_its_label_instead_of_being_cut(night):
    """The Resource Utilization note was one long line behind a scrollbar (cut in print)."""
    from spacrq.night.html import PANEL_COLUMNS, _wrapped
    note = ("    note        blocks waited 9.0 ms on average (45% of the round trip) in their "
            "worker behind the blocks sent ahead of them: batches go two deep so a worker never "
            "waits for the scheduler; the scheduler's own cost is the overhead, 1.3 ms")
    table = "    wall            9.7 ms      6.5 ms      3.3 ms     27.6 ms    155.8 ms"
    lines = _wrapped("\n".join([table, note, table])).splitlines()
    assert lines[0] == lines[-1] == table  # the tables are left as they are
    wrapped = lines[1:-1]
    assert len(wrapped) > 1 and max(len(ln) for ln in lines) <= PANEL_COLUMNS
    column = note.index("blocks waited")
    assert all(ln[:column].strip() == "" and ln[column] != " " for ln in wrapped[1:])
    assert " ".join(" ".join(wrapped).split()) == " ".join(note.split())  # nothing lost
    page = report_html(night, written_at=WRITTEN)
    panel = re.search(r"<pre>(.*?)</pre>", page, re.S).group(1)
    assert max(len(ln) for ln in panel.splitlines()) <= PANEL_COLUMNS
    assert "white-space: pre-wrap" in page and "overflow-x: auto" not in page
