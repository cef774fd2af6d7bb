"""The Experiments form's decisions, without Qt: what editor each declared type gets, what a
malformed schema is told, which options are offered, and what the environment check says."""
from __future__ import annotations

import pytest

from spacrq.experiments.form_model import (DEFAULT_GROUP, FormError, document_text,
                                           environment_text, finite_number, kind_of,
                                           options_of, parameters_of, step_for)


@pytest.mark.parametrize("dtype, options, expected", [
    ("float", None, ("float", False)),
    ("int | None", None, ("int", True)),
    ("NoneType|bool", None, ("bool", True)),
    ("Path", None, ("text", False)),
    ("yaml", None, ("document", False)),
    ("int | str", None, ("document", False)),  # two plain types: only a document holds both
    (None, None, ("document", False)),  # undeclared: anything
    ("int", ["a", "b"], ("choice", False)),  # options win over the type
])
def test_each_declared_type_gets_its_editor(dtype, options, expected):
    assert kind_of(dtype, options) == expected


def test_parameters_keep_their_group_order_bounds_and_keys():
    manifest = {"schema": {
        "default": [{"name": "exposure", "dtype": "float", "unit": "ms", "default": 5,
                     "min_value": 0, "max_value": "inf"}],
        "stage": [{"name": "speed", "dtype": "int", "value": 3, "read_only": True},
                  {"name": "mode", "options": ["fast", "slow"]}],
    }}
    got = parameters_of(manifest)
    assert [p.key for p in got] == ["exposure", "stage.speed", "stage.mode"]
    exposure, speed, mode = got
    assert (exposure.kind, exposure.unit, exposure.minimum, exposure.maximum) == ("float", "ms", 0.0, None)
    assert (speed.kind, speed.default, speed.read_only) == ("int", 3, True)
    assert (mode.kind, mode.options) == ("choice", ("fast", "slow"))
    assert exposure.group == DEFAULT_GROUP and speed.group == "stage"


@pytest.mark.parametrize("schema, words", [
    (["not", "groups"], "not a mapping of groups"),
    ({"g": "exposure"}, "group 'g' is not a list"),
    ({"g": [{"dtype": "int"}]}, "without a name"),
    ({"g": ["exposure"]}, "without a name"),
])
def test_a_malformed_schema_is_one_sentence_naming_the_fix(schema, words):
    with pytest.raises(FormError, match=words) as caught:
        parameters_of({"schema": schema})
    assert "fix the module's manifest" in str(caught.value)


def test_numbers_that_cannot_bound_a_field_are_no_bound():
    assert [finite_number(v) for v in (3, "2.5", True, None, "x", float("nan"), 1e400)] == \
        [3.0, 2.5, None, None, None, None, None]


def test_a_spin_step_is_a_tenth_of_the_scale():
    assert step_for(0, 100, None) == 10.0
    assert step_for(0, 1, None) == 0.1
    assert step_for(5, 5, None) == 1.0  # no range: a plain step
    assert step_for(-1e300, 1e300, 2.0) == 1.0  # unbounded: scaled on the default instead


def test_a_document_is_shown_as_json_every_yaml_reader_reads():
    assert document_text({"a": [1, 2]}) == '{\n  "a": [\n    1,\n    2\n  ]\n}'


def test_options_offered_are_only_those_with_a_flag_typed_as_declared():
    got = options_of({"options": [
        {"flag": "--prominence", "dtype": "float", "description": "peak height", "sets": "p"},
        {"flag": "--mode", "choices": ["a", "b"]},
        {"flag": "--spec", "dtype": "yaml"},  # a document is typed as text on a command line
        {"dtype": "int"},  # no flag: nothing to pass
        "--raw",
    ]})
    assert [(o.flag, o.kind) for o in got] == [("--prominence", "float"), ("--mode", "choice"),
                                              ("--spec", "text")]
    assert got[0].description == "peak height" and got[1].choices == ("a", "b")


def test_the_environment_check_names_what_a_run_would_lack_and_where_to_set_it():
    text, missing = environment_text([
        {"name": "STAGE_PORT", "required": True, "set": False, "description": "<serial> port"},
        {"name": "TOKEN", "required": True, "set": True},
        {"name": "DEBUG", "required": False, "set": False},
    ])
    assert missing == ["STAGE_PORT"]
    assert "&lt;serial&gt; port" in text and "<serial>" not in text  # a description is text
    assert "A run is refused until STAGE_PORT is set" in text and "declaration's env" in text
    assert environment_text([{"name": "DEBUG", "required": False, "set": False}])[1] == []

