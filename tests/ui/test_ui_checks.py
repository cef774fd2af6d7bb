"""The UI tests' own checks: the GUI-thread I/O guard flags spacrq code reading a file in a slot
and nothing else; the leftover check names a timer and a thread still going."""
from __future__ import annotations

import threading
from functools import partial

from PySide6.QtCore import QObject, QTimer, Signal

from spacrq import runfiles


class _Done(QObject):
    fired = Signal()


def test_spacrq_reading_a_file_in_a_slot_is_flagged_with_its_line(qtbot, tmp_path, gui_io_flags):
    path = tmp_path / "settings.json"
    path.write_text("{}")  # the test's own I/O, outside any event: not flagged
    done = _Done()
    with qtbot.waitSignal(done.fired, timeout=5000):
        QTimer.singleShot(0, partial(runfiles.read_json, path, {}))  # spacrq code, in a slot
        QTimer.singleShot(0, done.fired.emit)
    found = list(gui_io_flags.flags)
    gui_io_flags.reset()
    assert [(f.what, f.target) for f in found] == [("open", str(path))]
    assert found[0].where.startswith("spacrq/runfiles.py:")
    assert "to " in found[0].during  # the Qt event being delivered, and to what


def test_a_tests_own_check_in_a_slot_and_reads_outside_events_are_not_flagged(
        qtbot, tmp_path, gui_io_flags):
    path = tmp_path / "seen.txt"
    path.write_text("x")
    runfiles.read_json(tmp_path / "missing.json", {})  # not in an event: the test body
    done = _Done()
    seen = []
    done.fired.connect(lambda: seen.append(path.read_text()))  # the test's own, in a slot
    with qtbot.waitSignal(done.fired, timeout=5000):
        QTimer.singleShot(0, done.fired.emit)
    assert seen == ["x"] and gui_io_flags.flags == []


def test_the_leftover_check_names_a_running_timer_and_a_thread_of_ours(qtbot):
    from PySide6.QtCore import QCoreApplication
    from qtgarbage import StartedDuringTest, threads_still_alive

    before = {t.ident for t in threading.enumerate()}
    release = threading.Event()
    with StartedDuringTest() as started:
        timer = QTimer(QCoreApplication.instance())
        timer.start(60_000)
        thread = threading.Thread(target=lambda: release.wait(10.0), name="left-behind")
        thread.start()
        try:
            [found] = started.still_going()
            assert found.startswith("active QTimer QTimer (60000 ms) started at "
                                    "tests/ui/test_ui_checks.py:")
            alive = threads_still_alive(before, grace=0.0)
            assert len(alive) == 1 and alive[0].startswith("thread 'left-behind' alive at ")
        finally:
            timer.stop()
            timer.setParent(None)
            timer.deleteLater()
            release.set()
            thread.join(5.0)
        assert started.still_going() == [] and threads_still_alive(before) == []
