"""Run a command on a pseudo-terminal, as a scientist's ssh session would, and keep what it drew."""
from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios


def run_on_pty(argv, *, env=None, cwd=None, cols: int = 200, rows: int = 40,
               timeout: float = 120) -> tuple[int, str]:
    """``(exit code, everything written to the terminal)`` of ``argv`` run on a pty ``cols`` wide."""
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(argv, stdout=child, stderr=child, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd)
    os.close(child)
    data = b""
    try:
        while True:
            try:
                chunk = os.read(parent, 65536)
            except OSError:  # EIO: the command closed its end
                break
            if not chunk:
                break
            data += chunk
    finally:
        os.close(parent)
        code = proc.wait(timeout=timeout)
    return code, data.decode(errors="replace")
