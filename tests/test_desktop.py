"""Resources shipped with spacrq, and the menu entry ``spacrq install-desktop`` puts in place."""
from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from spacrq.cli import main as cli_main
from spacrq.desktop import DesktopError, desktop_exec, entry_for, install_desktop, remove_desktop
from spacrq.resources import ICON_SIZES, RESOURCES, resource_path

ROOT = Path(__file__).resolve().parents[1]


def validate_desktop(path: Path) -> str:
    """desktop-file-validate's complaints about ``path`` ('' when clean)."""
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        pytest.fail("desktop-file-validate is missing: apt-get install -y desktop-file-utils")
    proc = subprocess.run([tool, str(path)], capture_output=True, text=True, timeout=30)
    return (proc.stdout + proc.stderr).strip() if proc.returncode or proc.stdout.strip() else ""


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


# ---- what ships ------------------------------------------------------------------------------

def test_every_package_folder_ships_in_the_wheel():
    """The package list is written out (resources/ is mapped in); a new package must be added."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "spacrq").rglob("__init__.py")
               if "__pycache__" not in p.parts}
    assert set(config["packages"]) == on_disk | {"spacrq.resources"}
    assert config["package-dir"] == {"spacrq.resources": "resources"}
    assert (ROOT / "resources" / "__init__.py").is_file()


def test_this_install_finds_every_resource():
    assert (ROOT / "resources").resolve() == RESOURCES  # the editable install maps the folder
    assert resource_path("spacrq.svg").read_text().startswith("<svg")
    assert resource_path("spacrq.desktop").is_file()
    for size in ICON_SIZES:
        assert png_size(resource_path(f"icons/{size}x{size}/spacrq.png")) == (size, size)


def test_a_missing_resource_says_to_reinstall():
    with pytest.raises(FileNotFoundError, match="reinstall spacrq"):
        resource_path("no-such-icon.png")


def test_the_window_icon_comes_from_resources():
    src = (ROOT / "spacrq" / "ui" / "app.py").read_text()
    assert "spacrq.resources" in src and 'files("spacrq") / "resources"' not in src


def test_the_desktop_template_is_valid():
    assert validate_desktop(resource_path("spacrq.desktop")) == ""


def test_the_running_window_is_matched_to_its_menu_entry(qapp):
    """A dock groups the window under the entry's icon: the entry's StartupWMClass is the
    window class Qt gives the window (the application's name), and the app id Wayland
    sees is the entry's file name."""
    from spacrq.ui.app import name_application
    entry = dict(line.split("=", 1) for line in
                 resource_path("spacrq.desktop").read_text().splitlines() if "=" in line)
    before = qapp.applicationName(), qapp.desktopFileName()
    try:
        name_application(qapp)
        assert entry["StartupWMClass"] == qapp.applicationName() == "spacrq"
        assert f"{qapp.desktopFileName()}.desktop" == "spacrq.desktop"
    finally:
        qapp.setApplicationName(before[0])
        qapp.setDesktopFileName(before[1])


# ---- the menu entry --------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["/opt/spacrq/spacrq"],
    ["/home/lab user/venv/bin/python", "-m", "spacrq", "gui"],
    ["/srv/100%/spacrq", "--workspace", "/data/$night \"a\" `x`\\y"],
])
def test_install_desktop_writes_a_valid_entry_and_every_icon(tmp_path, argv):
    env = {"HOME": str(tmp_path)}
    written = install_desktop(env, argv)
    data = tmp_path / ".local" / "share"
    entry = data / "applications" / "spacrq.desktop"
    assert written[-1] == entry
    assert validate_desktop(entry) == ""
    text = entry.read_text()
    assert f"Exec={desktop_exec(argv)}\n" in text and "Icon=spacrq\n" in text
    assert text.count("\nExec=") == 1 and "\nTryExec=" in text
    svg = data / "icons" / "hicolor" / "scalable" / "apps" / "spacrq.svg"
    assert svg.read_bytes() == resource_path("spacrq.svg").read_bytes()
    for size in ICON_SIZES:
        png = data / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "spacrq.png"
        assert png_size(png) == (size, size)
    assert sorted(remove_desktop(env)) == sorted(written)
    assert not entry.exists() and not svg.exists()


def test_exec_quoting_follows_the_desktop_entry_spec():
    assert desktop_exec(["/usr/bin/spacrq-gui"]) == "/usr/bin/spacrq-gui"
    assert desktop_exec(["/a b/spacrq", "50%"]) == '"/a b/spacrq" 50%%'
    # inside quotes " ` $ \ are backslash-escaped, and the value escapes backslashes once more
    assert desktop_exec(['a"b$c']) == '"a\\\\"b\\\\$c"'


def test_entry_keeps_the_template_and_names_the_program():
    text = entry_for(["/x/spacrq"], "[Desktop Entry]\nName=spacrq\nExec=old\nTryExec=old\n")
    assert text == "[Desktop Entry]\nName=spacrq\nTryExec=/x/spacrq\nExec=/x/spacrq\n"


def test_xdg_data_home_is_honoured(tmp_path):
    env = {"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data")}
    install_desktop(env, ["/x/spacrq"])
    assert (tmp_path / "data" / "applications" / "spacrq.desktop").is_file()
    assert not (tmp_path / "home").exists()


def test_install_desktop_never_writes_through_a_link(tmp_path):
    apps = tmp_path / ".local" / "share" / "applications"
    apps.mkdir(parents=True)
    elsewhere = tmp_path / "someone-elses.desktop"
    elsewhere.write_text("keep me")
    (apps / "spacrq.desktop").symlink_to(elsewhere)
    with pytest.raises(DesktopError, match="symbolic link.*remove the link, and spacrq writes "
                                           "a file of its own there"):
        install_desktop({"HOME": str(tmp_path)}, ["/x/spacrq"])
    assert elsewhere.read_text() == "keep me"
    # refused before anything was written: no icon either
    assert not (tmp_path / ".local" / "share" / "icons").exists()


def test_install_desktop_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert cli_main(["install-desktop"]) == 0
    entry = tmp_path / ".local" / "share" / "applications" / "spacrq.desktop"
    assert "installed" in capsys.readouterr().out
    assert validate_desktop(entry) == ""
    # the entry starts this environment's window command
    assert f"Exec={Path(sys.executable).with_name('spacrq-gui')}" in entry.read_text()
    assert cli_main(["install-desktop", "--remove"]) == 0
    assert not entry.exists()


def test_install_desktop_without_home_is_one_sentence(monkeypatch, capsys):
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert cli_main(["install-desktop"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HOME is not set" in err and "Traceback" not in err


def test_install_desktop_script_runs_the_command(tmp_path):
    """packaging/install-desktop.sh is kept as a shim for the command."""
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(["bash", str(ROOT / "packaging" / "install-desktop.sh"),
                           str(Path(sys.executable).parent.parent)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / ".local" / "share" / "applications" / "spacrq.desktop").is_file()


def test_remove_desktop_leaves_a_link_it_did_not_make(tmp_path):
    apps = tmp_path / ".local" / "share" / "applications"
    apps.mkdir(parents=True)
    mine = tmp_path / "my-own.desktop"
    mine.write_text("[Desktop Entry]\n")
    (apps / "spacrq.desktop").symlink_to(mine)
    assert remove_desktop({"HOME": str(tmp_path)}) == []
    assert (apps / "spacrq.desktop").is_symlink() and mine.read_text() == "[Desktop Entry]\n"
