"""Edges a hostile tester found in the queue's commands .

``spacrq queue status FILE`` prints job ids and errors read from the queue
file as they are, so an escape sequence planted there clears the operator's
screen or retitles the terminal (``spacrq.terminal.plain`` removes them).
"""
from __future__ import annotations

import json

from spacrq.cli import main as cli_main
from spacrq.queue.model import Job, Queue
from spacrq.queue.store import save_queue


def test_queue_status_never_prints_control_characters_from_the_file(tmp_path, capsys):
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", settings={"argv": ["true"]}), validate=False)
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    doc = json.loads(path.read_text())
    doc["jobs"][0]["id"] = "a\x1b]0;owned\x07\x1b[2J"
    doc["jobs"][0]["error"] = "boom\x1b[31m"
    path.write_text(json.dumps(doc))
    for command in ("status", "plan", "validate"):
        cli_main(["queue", command, str(path)])
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out, command
        assert "a]0;owned" in out or "a" in out
