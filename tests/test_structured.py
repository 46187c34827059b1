"""Structured-output rewards: JSON reading, JSON Schema conformance, CSV tables."""
import doctest
import json
import time

import pytest

from rlvr import Task
from rlvr.verifiers import structured
from rlvr.verifiers.structured import (
    CsvTable, JsonSchemaMatch, JsonValid, parse_csv, parse_json, parse_yaml, schema_check,
    schema_from_fields)

# (text, fence mode, expected value or None, substring of the problem)
JSON_TABLE = [
    ('{"a": 1}', "allow", {"a": 1}, ""),
    ('  ```json\n{"a": [1, 2]}\n```  ', "allow", {"a": [1, 2]}, ""),
    ('```\n[true, null]\n```', "allow", [True, None], ""),
    ('{"a": 1}', "require", None, "no ```json fenced block"),
    ('```json\n{"a": 1}\n```', "forbid", None, "inside a fenced block"),
    ('Here: {"a": 1}', "allow", None, "not JSON: Expecting value at line 1 column 1"),
    ('{"a": 1}\n{"b": 2}', "allow", None, "not JSON: Extra data"),
    ('```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```', "allow", None, "not JSON"),
    ("{'a': 1}", "allow", None, "Expecting property name enclosed in double quotes"),
    ('{"a": NaN}', "allow", None, "NaN is not valid JSON"),
    ('[Infinity]', "allow", None, "Infinity is not valid JSON"),
    ('{"a": 1, "a": 2}', "allow", None, "duplicate key 'a'"),
    ("", "allow", None, "empty response"),
    ("```json\n```", "allow", None, "empty response"),
    ("[" * 65 + "]" * 65, "allow", None, "nested deeper than 64 levels"),
    ("[" * 200_000, "allow", None, "nested deeper than 64 levels"),
    ('{"n": ' + "9" * 5000 + "}", "allow", None, "not JSON: ValueError"),
    ('{"s": "\u200b\uff11"}', "allow", {"s": "\u200b\uff11"}, ""),   # strings kept verbatim
]


@pytest.mark.parametrize("text,fence,value,problem", JSON_TABLE)
def test_parse_json_table(text, fence, value, problem):
    got, why = parse_json(text, fence)
    assert got == value
    assert (problem in why) if problem else why == ""


PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "minLength": 1},
                         "age": {"type": "integer", "minimum": 0},
                         "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age"], "additionalProperties": False}

# (response, all-or-nothing score, partial score, status, substring of the reason)
SCHEMA_TABLE = [
    ('{"name": "Ada", "age": 36}', 1.0, 1.0, "ok", ""),
    ('```json\n{"name": "Ada", "age": 36, "tags": ["x"]}\n```', 1.0, 1.0, "ok", ""),
    # units: type, 2 required keys, 2 present properties, no-extra-keys = 6; 1 failed -> 5/6
    ('{"name": "Ada", "age": -1}', 0.0, 5 / 6, "ok", "at $.age: -1 is less than the minimum of 0"),
    # units: type, 2 required, 1 present property, no-extra = 5; missing age fails 1 -> 4/5
    ('{"name": "Ada"}', 0.0, 4 / 5, "ok", "at $: 'age' is a required property"),
    # units: type, 2 required, 2 present properties, no-extra = 6; extra key fails 1 -> 5/6
    ('{"name": "Ada", "age": 3, "x": 1}', 0.0, 5 / 6, "ok",
     "Additional properties are not allowed ('x' was unexpected)"),
    # units: 1 type + 2 required + 1 present property (tags) + no-extra = 5; tags[0] wrong, and
    # both required keys missing -> 3 failed -> 2/5
    ('{"tags": [1]}', 0.0, 2 / 5, "ok", "at $.tags[0]: 1 is not of type 'string'"),
    ('[1, 2]', 0.0, 0.0, "ok", "at $: [1, 2] is not of type 'object'"),
    ("I don't know.", 0.0, 0.0, "unparsed", "not JSON"),
    ("<think>{\"name\": \"x\", \"age\": 1}", 0.0, 0.0, "unparsed", "empty response"),
]


@pytest.mark.parametrize("text,score,partial,status,reason", SCHEMA_TABLE)
def test_schema_match_table(text, score, partial, status, reason):
    task = Task("t", answer=PERSON)
    v = JsonSchemaMatch().score(task, text)
    assert (v.score, v.status) == (score, status), v.reason
    assert (reason in v.reason) if reason else v.reason == ""
    assert JsonSchemaMatch(partial=True).score(task, text).score == pytest.approx(partial)


def test_schema_from_row_text_or_metadata_and_bad_schemas():
    r = JsonSchemaMatch()
    as_text = Task("t", answer=json.dumps(PERSON))
    assert r.score(as_text, '{"name": "A", "age": 1}').score == 1.0
    in_meta = Task("t", metadata={"schema": PERSON})
    assert r.score(in_meta, '{"name": "A", "age": 1}').score == 1.0
    for bad, message in [(Task("t"), "has no JSON Schema"),
                         (Task("t", answer="{not json"), "bad schema"),
                         (Task("t", answer={"type": "no-such-type"}), "invalid JSON Schema")]:
        v = r.score(bad, '{"a": 1}')
        assert v.status == "gold_unparseable" and message in v.reason, v.reason


def test_schema_draft_comes_from_the_schema():
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}}}
    task = Task("t", answer=draft4)
    assert JsonSchemaMatch().score(task, '{"n": 5}').score == 0.0    # draft-4 boolean form
    assert JsonSchemaMatch().score(task, '{"n": 4}').score == 1.0


def test_partial_credit_by_hand():
    schema = schema_from_fields({"a": "integer", "b": "string"})
    # units: type 1 + required 2 + present properties 2 + no-extra 1 = 6; b wrong -> 5/6
    frac, messages = schema_check({"a": 1, "b": 2}, schema)
    assert frac == pytest.approx(5 / 6) and messages == ["at $.b: 2 is not of type 'string'"]


def test_json_valid():
    assert JsonValid().score(Task("t"), "<think>x</think> [1]").score == 1.0
    v = JsonValid(fence="require").score(Task("t"), "[1]")
    assert (v.score, v.status) == (0.0, "unparsed")


def test_hostile_json_is_fast_and_never_raises():
    start = time.process_time()      # CPU time: the parser's own work, whatever the load
    task = Task("t", answer=PERSON)
    for text in ["{" * 1_000_000, '{"a": "' + "x" * 2_000_000, "```json\n" * 100_000,
                 '{"name": "' + "\u200b" * 500_000 + '", "age": 1}']:
        v = JsonSchemaMatch().score(task, text)
        assert v.status in ("ok", "unparsed") and v.score in (0.0, 1.0)
    assert time.process_time() - start < 5


@pytest.mark.parametrize("text,score,status,reason", [
    ("name: Ada\nage: 36", 1.0, "ok", ""),
    ("```yaml\nname: Ada\nage: 36\n```", 1.0, "ok", ""),
    ("name: Ada\nage: x", 0.0, "ok", "at $.age: 'x' is not of type 'integer'"),
    ("name: 2020-01-01\nage: 3", 0.0, "ok", "is not of type 'string'"),      # YAML dates
    ("a: &x [1, 2]\nb: *x", 0.0, "unparsed", "aliases (*name) are not allowed"),
    ("!!python/object/apply:os.system ['true']", 0.0, "unparsed", "could not determine a constructor"),
    ("a: [1", 0.0, "unparsed", "not YAML"),
    ("- " * 5000 + "x", 0.0, "unparsed", "not YAML"),
    ("", 0.0, "unparsed", "empty response"),
])
def test_yaml_answers_against_a_schema(text, score, status, reason):
    task = Task("t", answer=schema_from_fields({"name": "string", "age": "integer"}))
    v = JsonSchemaMatch(syntax="yaml").score(task, text)
    assert (v.score, v.status) == (score, status), v.reason
    assert (reason in v.reason) if reason else v.reason == ""


def test_billion_laughs_is_refused_fast():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    start = time.process_time()
    assert "aliases" in parse_yaml("\n".join(lines))[1]
    assert time.process_time() - start < 1


CSV_TASK = Task("t", metadata={"columns": ["name", "age"], "n_rows": 2})


@pytest.mark.parametrize("text,score,reason", [
    ("name,age\nAda,36\nAlan,41", 1.0, ""),
    ("```csv\nname,age\nAda,36\nAlan,41\n```", 1.0, ""),
    ('name,age\n"Lovelace, Ada",36\nAlan,41', 1.0, ""),
    ("name,age\nAda,36", 0.0, "1 data rows, wanted 2"),
    ("name,age,x\nAda,36,1\nAlan,41,2", 0.0, "header is ['name', 'age', 'x']"),
    ("name,age\nAda\nAlan,41", 0.0, "row 2 has 1 fields, the header has 2"),
    ('name,age\n"Ada,36', 0.0, "not CSV"),
    ("", 0.0, "empty response"),
])
def test_csv_table(text, score, reason):
    v = CsvTable().score(CSV_TASK, text)
    assert v.score == score
    assert (reason in v.reason) if reason else v.reason == ""


def test_parse_csv_keeps_quoted_commas():
    assert parse_csv('a,b\n"x, y",2')[0] == [["a", "b"], ["x, y", "2"]]


def test_doctests():
    assert doctest.testmod(structured).failed == 0
