"""Whatever the mix of journalled transitions and checkpoints, loading gives what the runner saw."""
from __future__ import annotations

import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacrq.queue import Job, Queue, load_queue, run_queue, save_queue
from spacrq.queue.store import Journal

STATUSES = ["pending", "running", "success", "failed", "skipped", "not_run"]
steps = st.lists(st.one_of(
    st.tuples(st.just("set"), st.integers(0, 4), st.sampled_from(STATUSES),
              st.integers(-1, 3), st.booleans()),
    st.tuples(st.just("checkpoint")),
    st.tuples(st.just("reopen")),
), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_load_after_any_history_equals_the_runners_view(tmp_path_factory, steps):
    path = tmp_path_factory.mktemp("q") / "night.queue.json"
    queue = Queue(name="night")
    for _ in range(5):
        queue.add(Job(module="command", settings={"argv": ["true"]}), validate=False)
    save_queue(queue, path)
    journal = Journal(queue, path)
    for step in steps:
        if step[0] == "set":
            _, i, status, code, sync = step
            job = queue.jobs[i]
            job.status, job.exit_code = status, code
            journal.job(job, ["status", "exit_code"], sync=sync)
        elif step[0] == "checkpoint":
            journal.checkpoint()
        else:  # a new runner picks the file up (resume) and journals on from there
            journal.close()
            queue = load_queue(path)
            journal = Journal(queue, path)
    journal.close()
    loaded = load_queue(path)
    assert [(j.status, j.exit_code) for j in loaded.jobs] == \
        [(j.status, j.exit_code) for j in queue.jobs]


def test_the_queue_file_always_parses_while_a_queue_runs(tmp_path):
    queue = Queue(name="night", max_consecutive_failures=0)
    for _ in range(300):
        queue.add(Job(module="command", settings={"argv": ["true"]}), validate=False)
    path = tmp_path / "night.queue.json"
    save_queue(queue, path)
    done = threading.Event()
    seen, errors = [], []

    def reader():
        while not done.is_set():
            try:
                seen.append(sum(j.status == "success" for j in load_queue(path).jobs))
            except Exception as exc:  # any failure to parse is the bug under test
                errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        run_queue(queue, path, runner=lambda job, s, log: 0)
    finally:
        done.set()
        thread.join()
    assert not errors and len(seen) > 1
    assert seen == sorted(seen)  # progress as read from disk never goes backwards
    assert sum(j.status == "success" for j in load_queue(path).jobs) == 300
