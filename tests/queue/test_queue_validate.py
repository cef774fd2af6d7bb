"""Validation at the door: every problem at once, each with its fix."""
from __future__ import annotations

import pytest

from spacrq.queue import Job, Queue, QueueError, plan, validate_job, validate_queue
from spacrq.queue.validate import add_checked


def _cmd(**kw):
    kw.setdefault("settings", {"argv": ["true"]})
    return Job(module="command", **kw)


def _errors(problems):
    return [p for p in problems if p.is_error]


def test_adding_to_a_queue_reads_no_settings_file(tmp_path):
    """The queue checks what it knows itself; the settings file is read by add_checked."""
    queue = Queue()
    queue.add(Job(module="python", id="later", settings=str(tmp_path / "written-later.csv")))
    assert queue.ids == ["later"], "added: nothing on disk was looked at"
    with pytest.raises(QueueError, match="settings file not found"):
        add_checked(queue, Job(module="python", settings=str(tmp_path / "written-later.csv")))
    assert queue.ids == ["later"], "refused: nothing added"


def test_unknown_module_is_refused_when_added():
    with pytest.raises(QueueError, match="unknown module 'maks'"):
        add_checked(Queue(), Job(module="maks"))


def test_missing_settings_file_is_refused(tmp_path):
    with pytest.raises(QueueError, match="settings file not found"):
        add_checked(Queue(), Job(module="python", settings=str(tmp_path / "nope.csv")))


def test_unreadable_settings_file_is_refused(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text("{not json")
    with pytest.raises(QueueError, match="not valid JSON"):
        add_checked(Queue(), Job(module="python", settings=str(bad)))
    csv = tmp_path / "s.csv"
    csv.write_text("a;b\n1;2\n")
    with pytest.raises(QueueError, match="Key,Value"):
        add_checked(Queue(), Job(module="python", settings=str(csv)))


def test_settings_csv_in_spacr_format_is_read(tmp_path):
    csv = tmp_path / "s.csv"
    csv.write_text("Key,Value\ntarget,json:dumps\nwrites,['/tmp/x']\n")
    queue = Queue()
    add_checked(queue, Job(module="python", settings=str(csv)))
    job = queue.jobs[0]
    from spacrq.queue import resolve_job_settings
    assert resolve_job_settings(job)["writes"] == ["/tmp/x"]


@pytest.mark.parametrize("override,needle", [
    ("nokey=1", "has no setting 'nokey'; use one of"),
    ("argv", "is not key=value"),
    ("argv=notalist", "is a list"),
])
def test_bad_overrides_are_refused(override, needle):
    with pytest.raises(QueueError, match=needle):
        add_checked(Queue(), _cmd(overrides=[override]))


def test_overrides_are_coerced_to_the_default_type():
    from spacrq.queue import resolve_job_settings
    job = _cmd(overrides=['argv=["echo", "hi"]', "env={\"A\": \"1\"}"])
    assert resolve_job_settings(job)["argv"] == ["echo", "hi"]
    assert resolve_job_settings(job)["env"] == {"A": "1"}


def test_dependency_rules_unknown_later_and_self():
    queue = Queue()
    queue.add(_cmd(id="a"))
    with pytest.raises(QueueError, match="not a job in this queue"):
        queue.add(_cmd(id="b", depends_on=["zzz"]))
    with pytest.raises(QueueError, match="depends on itself"):
        queue.add(_cmd(id="b", depends_on=["b"]))
    queue.add(_cmd(id="b", depends_on=["a"]))
    queue.move("a", +1)  # now a comes after b
    found = validate_queue(queue)
    assert any("comes later in the queue" in p.message and p.job_id == "b" for p in found)


def test_cycles_are_reported():
    queue = Queue(jobs=[_cmd(id="a", depends_on=["c"]), _cmd(id="b", depends_on=["a"]),
                        _cmd(id="c", depends_on=["b"])])
    cycles = [p for p in validate_queue(queue) if "cycle" in p.message]
    assert len(cycles) == 1 and "a -> c -> b -> a" in cycles[0].message
    assert all(p.is_error for p in cycles)


def test_shared_ids_and_empty_queue():
    assert "empty" in validate_queue(Queue())[0].message
    found = validate_queue(Queue(jobs=[_cmd(id="a"), _cmd(id="a")]))
    assert any("2 jobs share the id 'a'" in p.message for p in found)


def test_every_problem_is_reported_at_once(tmp_path):
    queue = Queue(jobs=[
        Job(module="maks", id="one"),
        _cmd(id="two", settings={"argv": ["no-such-program-xyz"]}),
        _cmd(id="three", depends_on=["ghost"]),
        Job(module="python", id="four", settings=str(tmp_path / "missing.json")),
        _cmd(id="fi/ve"),
    ])
    found = _errors(validate_queue(queue))
    assert {p.job_id for p in found} == {"one", "two", "three", "four", "fi/ve"}
    assert all(p.fix for p in found)


def test_a_missing_input_an_upstream_job_writes_is_only_a_warning(tmp_path):
    out = tmp_path / "plate1" / "masks"
    queue = Queue()
    queue.add(_cmd(id="mask", settings={"argv": ["true"], "writes": [str(tmp_path / "plate1")]}))
    job = _cmd(id="measure", settings={"argv": ["true"], "inputs": [str(out)]},
               depends_on=["mask"])
    problems = validate_job(job, queue)
    assert problems and not _errors(problems)
    assert "not exist yet" in problems[0].message or "yet" in problems[0].message
    queue.add(job)  # addable tonight


def test_deferral_is_transitive_but_never_covers_a_misspelled_path(tmp_path):
    queue = Queue()
    queue.add(_cmd(id="mask", settings={"argv": ["true"], "writes": [str(tmp_path / "plate1")]}))
    queue.add(_cmd(id="measure", depends_on=["mask"]))
    chained = _cmd(id="classify", depends_on=["measure"],
                   settings={"argv": ["true"], "inputs": [str(tmp_path / "plate1" / "db")]})
    assert not _errors(validate_job(chained, queue))
    typo = _cmd(id="typo", depends_on=["mask"],
                settings={"argv": ["true"], "inputs": [str(tmp_path / "plaet1" / "db")]})
    assert _errors(validate_job(typo, queue))
    unchained = _cmd(id="loose", settings={"argv": ["true"],
                                           "inputs": [str(tmp_path / "plate1" / "db")]})
    assert _errors(validate_job(unchained, queue))


def test_plan_lists_jobs_in_order_with_the_check():
    queue = Queue(name="night")
    queue.add(_cmd(id="a", settings={"argv": ["echo", "hi"]}, timeout=30))
    queue.add(_cmd(id="b", depends_on=["a"], overrides=['argv=["true"]'], retries=2))
    text = plan(queue)
    assert text.index(" a ") < text.index(" b ")
    assert "runs echo hi" in text and "after a" in text and "timeout 30s" in text
    assert "up to 2 retries" in text and "no problems found" in text


def test_a_chain_two_thousand_deep_validates_without_recursion_errors():
    queue = Queue()
    for i in range(2000):
        queue.add(_cmd(depends_on=[f"command-{i}"] if i else []), validate=False)
    assert not _errors(validate_queue(queue))
    queue.jobs[0].depends_on = ["command-2000"]
    assert any("cycle" in p.message for p in validate_queue(queue))


@pytest.mark.parametrize("body", [b"[" * 5000 + b"]" * 5000, b'{"diameter": NaN}',
                                  b'{"diameter": 1e400}', b'{"x": "\xff"}'])
def test_a_hostile_settings_file_is_a_sentence_not_a_traceback(tmp_path, body):
    from spacrq.queue.settings import SettingsError, load_settings_file
    path = tmp_path / "mask.json"
    path.write_bytes(body)
    with pytest.raises(SettingsError, match="mask.json"):
        load_settings_file(str(path))


def test_a_python_target_naming_a_function_its_module_lacks_is_refused_when_added(tmp_path,
                                                                                 monkeypatch):
    """'Checked now, not at 3 a.m.': the module's source is read (never imported: a
    scientist's module may do anything when imported) for the function's name."""
    lab = tmp_path / "mylab_steps.py"
    lab.write_text("import os\nTHRESHOLD = 3\n\ndef segment(settings):\n    return 0\n\n"
                   "class Stage:\n    pass\n\nraise SystemExit('importing me is a side effect')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    queue = Queue()
    for name in ("segment", "Stage", "THRESHOLD", "os"):
        add_checked(queue, Job(module="python", id=f"ok-{name}",
                               settings={"target": f"mylab_steps:{name}"}))
    with pytest.raises(QueueError, match=r"module 'mylab_steps' has no 'segmnet'.*Correct the "
                                         r"function's name"):
        add_checked(queue, Job(module="python", id="typo",
                               settings={"target": "mylab_steps:segmnet"}))
    # a module whose names are made at run time cannot be judged from its source: not refused
    (tmp_path / "mylab_dynamic.py").write_text("from os.path import *\n")
    add_checked(queue, Job(module="python", id="dyn", settings={"target": "mylab_dynamic:anything"}))
    # names bound in other ways are names too
    (tmp_path / "mylab_other.py").write_text(
        "import sys\ntry:\n    import nothing_here\nexcept ImportError as work:\n    pass\n"
        "match 1:\n    case other:\n        pass\n")
    (tmp_path / "mylab_setattr.py").write_text("import sys\nsys.modules[__name__].late = len\n")
    for name, target in (("exc", "mylab_other:work"), ("match", "mylab_other:other"),
                         ("setattr", "mylab_setattr:late")):
        add_checked(queue, Job(module="python", id=name, settings={"target": target}))
    assert [j.id for j in queue.jobs] == ["ok-segment", "ok-Stage", "ok-THRESHOLD", "ok-os", "dyn",
                                          "exc", "match", "setattr"]


def test_an_unknown_module_says_spacrs_steps_come_with_spacr_when_it_is_missing(monkeypatch):
    import spacrq.modules.spacr as spacr_modules
    monkeypatch.setattr(spacr_modules, "module_names", lambda: [])
    with pytest.raises(QueueError, match=r"spaCR's steps \(mask, measure, …\) are modules once "
                                         r"spaCR is installed"):
        add_checked(Queue(), Job(module="mask", id="m"))
    monkeypatch.setattr(spacr_modules, "module_names", lambda: ["mask"])
    with pytest.raises(QueueError) as caught:
        add_checked(Queue(), Job(module="maks", id="m"))
    assert "once spaCR is installed" not in str(caught.value)


@pytest.mark.parametrize("where", ["job", "settings"])
@pytest.mark.parametrize("name", ["A=B", "", "A\x01"])
def test_an_environment_variable_that_cannot_be_set_is_a_validation_error(tmp_path, where, name):
    """A name with '=' (or empty, or a control character) passed validate and failed the
    job at its start, exit 127: it is caught when the job is added or validated."""
    from spacrq.queue import Job, Queue, validate_queue
    job = Job(module="command", id="a", settings={"argv": ["true"]})
    if where == "job":
        job.env = {name: "x"}
    else:
        job.settings["env"] = {name: "x"}
    queue = Queue(name="night")
    queue.add(job, validate=False)
    errors = [p for p in validate_queue(queue) if p.is_error]
    assert any("cannot be set" in p.message for p in errors), errors


def test_negative_retries_and_a_file_as_working_folder_are_named(tmp_path):
    from spacrq.queue import Job, Queue, validate_queue
    (tmp_path / "f").write_text("")
    queue = Queue(name="night")
    queue.add(Job(module="command", id="a", retries=-1, cwd=str(tmp_path / "f"),
                  settings={"argv": ["true"]}), validate=False)
    messages = [p.message for p in validate_queue(queue) if p.is_error]
    assert any("retries -1 is negative" in m for m in messages), messages
    assert any("is a file, not a folder" in m for m in messages), messages


@pytest.mark.parametrize("field, value, said", [
    ("retries", 10 ** 9, "retries 1,000,000,000 is more than 1,000"),
    ("retry_delay", 1e9, "is more than a day"),
])
def test_a_retry_count_or_delay_that_would_hold_the_night_is_refused(field, value, said):
    job = _cmd(id="flaky", **{"retries": 3, **{field: value}})
    messages = [p.message for p in _errors(validate_job(job))]
    assert any(said in m for m in messages), messages
    assert not _errors(validate_job(_cmd(id="fine", retries=1000, retry_delay=86400)))


@pytest.mark.parametrize("job_id", ["bad\u202e1", "a\u200bb", "x\u2028y", "\ufeffplate"])
def test_an_id_with_an_invisible_or_reordering_character_is_refused(job_id):
    with pytest.raises(QueueError, match=r"U\+[0-9A-F]{4}"):
        Queue().add(_cmd(id=job_id))
    assert not _errors(validate_job(_cmd(id="plaque-é-1")))
