"""Help ▸ Open the logs folder: when nothing on the desktop opens folders, the path is shown."""
from __future__ import annotations

from spacrq.ui import menus
from spacrq.ui.main_window import MainWindow


class _Desktop:
    """QDesktopServices as a desktop answers: ``opens`` or not; the URLs asked."""

    def __init__(self, opens: bool) -> None:
        self.opens, self.asked = opens, []

    def openUrl(self, url) -> bool:  # noqa: N802 (Qt naming)
        self.asked.append(url.toLocalFile())
        return self.opens


def _window(qtbot, workspace, guard) -> MainWindow:
    window = MainWindow(workspace, guard=guard)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.loaded, timeout=20_000):
        window.show()
    guard.setParent(window)
    return window


def test_the_logs_folder_path_is_shown_when_nothing_opens_it(qtbot, workspace, tmp_path,
                                                              monkeypatch):
    from spacrq.ui.crash import CrashGuard
    desktop = _Desktop(opens=False)
    monkeypatch.setattr(menus, "QDesktopServices", desktop)
    window = _window(qtbot, workspace, CrashGuard(tmp_path / "logs"))
    folder = str(tmp_path / "logs")
    window.menus.actions["logs"].trigger()
    assert desktop.asked == [folder]
    assert folder in window.statusBar().currentMessage()
    box = window.menus.logs_box
    assert box is not None and box.isVisible() and folder in box.text()
    assert not box.isModal()
    box.close()
    window.close()


def test_nothing_extra_is_shown_when_the_folder_opens(qtbot, workspace, tmp_path, monkeypatch):
    from spacrq.ui.crash import CrashGuard
    desktop = _Desktop(opens=True)
    monkeypatch.setattr(menus, "QDesktopServices", desktop)
    window = _window(qtbot, workspace, CrashGuard(tmp_path / "logs"))
    window.menus.actions["logs"].trigger()
    assert desktop.asked == [str(tmp_path / "logs")] and window.menus.logs_box is None
    window.close()
