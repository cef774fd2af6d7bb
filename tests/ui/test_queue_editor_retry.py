"""The editor's retry delay: typed as a duration, kept with the job, given back by Same again."""
from __future__ import annotations

from spacrq.queue import Job
from spacrq.ui.queue_editor import JobEditor


def test_the_retry_delay_is_read_as_a_duration_and_given_back(qtbot):
    editor = JobEditor()
    qtbot.addWidget(editor)
    editor.module.setCurrentText("command")
    editor.main.setText("rsync -a A B")
    editor.retries.setValue(3)
    editor.retry_delay.setText("2m")
    job, problem = editor.job()
    assert problem is None and (job.retries, job.retry_delay) == (3, 120.0)
    editor.retry_delay.setText("soon")
    job, problem = editor.job()
    assert job is None and problem.startswith("the retry delay 'soon' is not a duration")
    editor.retry_delay.clear()
    editor.fill_from(Job(module="command", settings={"argv": ["true"]}, retries=1, retry_delay=45))
    assert editor.retry_delay.text() == "45s" and editor.retries.value() == 1
