"""The window remembers its layout and workspaces; a damaged settings file is set aside with a note."""
from __future__ import annotations

import pytest
from hostile import HOSTILE
from PySide6.QtWidgets import QSplitter

from spacrq.ui import app
from spacrq.ui.main_window import MainWindow
from spacrq.ui.state import WindowState

WAIT = 20_000


def open_window(qtbot, workspace, state) -> MainWindow:
    window = MainWindow(workspace, state=state)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.loaded, timeout=WAIT):
        window.show()
    return window


def test_geometry_splitters_last_pane_and_column_widths_come_back(qtbot, workspace, tmp_path):
    ini = tmp_path / "settings.ini"
    window = open_window(qtbot, workspace, WindowState(ini))
    window.show_pane("Experiments")
    queue = window.panes["Queue"]
    splitter = queue.findChildren(QSplitter)[0]
    sizes = splitter.sizes()
    splitter.setSizes([sizes[0] + sizes[1] - 150, 150])
    wanted_split = splitter.sizes()
    queue.table.horizontalHeader().resizeSection(1, 211)
    window.close()

    again = open_window(qtbot, workspace, WindowState(ini))
    assert again.tabs.tabText(again.tabs.currentIndex()) == "Experiments"
    got = again.panes["Queue"].findChildren(QSplitter)[0].sizes()
    # the same proportions (a splitter scales its sizes when its pane is laid out again)
    assert abs(got[0] / sum(got) - wanted_split[0] / sum(wanted_split)) < 0.02, (got, wanted_split)
    assert abs(got[0] / sum(got) - sizes[0] / sum(sizes)) > 0.05  # and not the default
    assert again.panes["Queue"].table.horizontalHeader().sectionSize(1) == 211
    again.close()


def test_window_geometry_comes_back(qtbot, tmp_path):
    """On a plain window: the offscreen screen is 800x600 and a full window is clamped to it."""
    from PySide6.QtWidgets import QMainWindow, QTabWidget
    state = WindowState(tmp_path / "s.ini")
    window = QMainWindow()
    qtbot.addWidget(window)
    window.resize(520, 410)
    window.move(30, 40)
    window.show()
    state.save_window(window, QTabWidget(), {})
    state.sync()
    again = QMainWindow()
    qtbot.addWidget(again)
    WindowState(tmp_path / "s.ini").restore_window(again)
    assert (again.width(), again.height()) == (520, 410)
    window.close()


def test_recent_workspaces_newest_first_without_repeats(tmp_path):
    state = WindowState(tmp_path / "s.ini")
    for name in ("a", "b", "a", "c"):
        state.remember_workspace(tmp_path / name)
    state.sync()
    again = WindowState(tmp_path / "s.ini")
    assert again.recent_workspaces() == [str(tmp_path / n) for n in ("c", "a", "b")]
    assert again.last_workspace() == str(tmp_path / "c")
    again.forget_workspace(tmp_path / "c")
    assert again.last_workspace() is None and str(tmp_path / "c") not in again.recent_workspaces()


def test_a_last_workspace_that_is_gone_is_not_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACRQ_WORKSPACE", str(tmp_path / "default"))
    state = WindowState(tmp_path / "s.ini")
    state.remember_workspace(tmp_path / "unmounted-share")
    ws, notes = app._open_chosen(None, state)
    assert ws.root == (tmp_path / "default").resolve()
    assert "not there any more" in notes[0]
    assert not (tmp_path / "unmounted-share").exists()
    assert state.recent_workspaces() == []


def test_a_last_workspace_that_became_unusable_falls_back_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACRQ_WORKSPACE", str(tmp_path / "default"))
    stranger = tmp_path / "was-a-workspace"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("")
    state = WindowState(tmp_path / "s.ini")
    state.remember_workspace(stranger)
    ws, notes = app._open_chosen(None, state)
    assert ws.root == (tmp_path / "default").resolve() and "not a spacrq workspace" in notes[0]
    with pytest.raises(app.WorkspaceError):  # but a folder the operator names is an error
        app._open_chosen(str(stranger), state)


@pytest.mark.parametrize("name", ["binary", "non_utf8", "torn"])
def test_a_damaged_settings_file_is_set_aside_with_a_note(qtbot, workspace, tmp_path, name):
    ini = tmp_path / "settings.ini"
    ini.write_bytes(HOSTILE[name] if name != "torn" else b"[window\ngeometry=@ByteArray(\xff")
    state = WindowState(ini)
    assert state.note and str(ini) in state.note and "defaults" in state.note
    assert (tmp_path / "settings.ini.damaged").read_bytes()[:10] == ini.with_suffix(".ini.damaged").read_bytes()[:10]
    window = open_window(qtbot, workspace, state)
    assert "was ignored" in window.statusBar().currentMessage()
    window.close()
    assert WindowState(ini).note == ""  # a fresh file was written on close


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_any_settings_file_lets_the_window_open(qtbot, workspace, tmp_path, name):
    ini = tmp_path / "settings.ini"
    ini.write_bytes(HOSTILE[name])
    window = open_window(qtbot, workspace, WindowState(ini))
    assert window.is_loaded()
    window.close()


def test_values_of_the_wrong_kind_are_ignored_one_by_one(qtbot, workspace, tmp_path):
    ini = tmp_path / "settings.ini"
    ini.write_text("[window]\ngeometry=banana\nstate=12\npane=7\n[workspace]\nrecent=42\n"
                   "[pane_queue]\ncolumns0=a, b\nsplitter0=x\n")
    state = WindowState(ini)
    assert state.note == ""
    window = open_window(qtbot, workspace, state)
    assert window.tabs.currentIndex() == 0
    assert state.recent_workspaces() == ["42"] or state.recent_workspaces() == []
    window.close()


def test_a_folder_in_place_of_the_settings_file_is_a_note(qtbot, workspace, tmp_path):
    ini = tmp_path / "settings.ini"
    ini.mkdir()
    state = WindowState(ini)
    assert "not a plain file" in state.note
    window = open_window(qtbot, workspace, state)
    window.close()  # saving is skipped, nothing raises
    assert ini.is_dir()


def test_the_recent_workspaces_menu_lists_others_and_opens_one(qtbot, workspace, tmp_path):
    state = WindowState(tmp_path / "s.ini")
    other, _ = app.open_workspace(tmp_path / "other", demo=False)
    state.remember_workspace(other.root)
    state.remember_workspace(workspace.root)
    window = open_window(qtbot, workspace, state)
    window.menus.fill_recent()
    listed = [a.text() for a in window.menus.recent.actions()]
    assert listed == [str(other.root)]  # the open one is not offered
    with qtbot.waitSignal(window.loaded, timeout=WAIT):
        window.menus.recent.actions()[0].trigger()
    assert window.workspace.root == other.root
    window.close()


def test_the_plot_choice_of_each_experiment_comes_back(qtbot, workspace, tmp_path):
    ini = tmp_path / "settings.ini"
    window = open_window(qtbot, workspace, WindowState(ini))
    qtbot.waitUntil(lambda: hasattr(window.panes["Experiments"], "plot_choices"), timeout=WAIT)
    window.panes["Experiments"].detail.plot.remembered["sweep"] = ("value.setpoint_mV", "value.signal")
    window.close()
    again = open_window(qtbot, workspace, WindowState(ini))
    qtbot.waitUntil(lambda: hasattr(again.panes["Experiments"], "plot_choices"), timeout=WAIT)
    assert again.panes["Experiments"].plot_choices()["sweep"] == ("value.setpoint_mV", "value.signal")
    again.close()


def test_a_garbled_plot_choice_is_left_out():
    from spacrq.ui.state import _plot_choices
    assert _plot_choices('{"a": ["x", "y"], "b": [1, 2], "c": "xy"}') == {"a": ("x", "y")}
    assert _plot_choices("not json") == {} and _plot_choices("[1]") == {}
