"""Structured output: valid JSON, conformance to a JSON Schema (JSON or YAML answers), CSV with
the wanted columns.

Validation is the `jsonschema` package's (every draft it knows, picked from the schema's
`$schema`, 2020-12 by default); what is ours is reading the value out of model text and saying
what failed in one line ("at $.age: 'x' is not of type 'integer'").

Reading is strict on purpose: the JSON must be the whole response, optionally inside one fenced
block (```json ... ```), so a model cannot hedge with two objects or bury one in prose. NaN and
Infinity (Python's json accepts them, JSON does not) and duplicate keys are rejected; nesting
deeper than `MAX_DEPTH` and numbers too long to parse are reported, never raised.
"""
from __future__ import annotations

import csv
import functools
import io
import json
import re
from typing import Any, Mapping

from rlvr.core import GOLD_UNPARSEABLE, UNPARSED, BaseReward, Verdict

from .parser import ThinkParser

__all__ = ["parse_json", "parse_yaml", "JsonValid", "JsonSchemaMatch", "schema_from_fields",
           "schema_check", "CsvTable", "parse_csv", "MAX_DEPTH"]

MAX_DEPTH = 64          # deeper JSON is not something a model should be rewarded for
_FENCE = re.compile(r"^```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)\n?[ \t]*```$", re.DOTALL)


class _Reject(ValueError):
    pass


def _no_constants(name: str):
    raise _Reject(f"{name} is not valid JSON")


def _unique_keys(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Reject(f"duplicate key {k!r}")
        out[k] = v
    return out


def _depth_ok(s: str) -> bool:
    """Cheap upper bound on nesting (brackets inside strings count too: conservative)."""
    depth = best = 0
    for m in re.finditer(r'[\[{\]}]', s):
        depth += 1 if m.group(0) in "[{" else -1
        best = max(best, depth)
        if best > MAX_DEPTH:
            return False
    return True


def unfence(text: str, langs: tuple[str, ...] = ("", "json")) -> tuple[str, bool]:
    """The body of one fenced block spanning the whole text (language in `langs`), else the text."""
    s = text.strip()
    m = _FENCE.match(s)
    if m and m.group(1).lower() in langs and "```" not in m.group(2):
        return m.group(2), True
    return s, False


def parse_json(text: str, fence: str = "allow") -> tuple[Any, str]:
    """(value, "") or (None, what is wrong). `fence`: 'allow', 'require' or 'forbid'.

    >>> parse_json('```json\\n{"a": [1, 2]}\\n```')
    ({'a': [1, 2]}, '')
    >>> parse_json('Sure! {"a": 1}')[1]
    'not JSON: Expecting value at line 1 column 1'
    >>> parse_json('{"a": NaN}')[1]
    'not JSON: NaN is not valid JSON'
    """
    if fence not in ("allow", "require", "forbid"):
        raise ValueError(f"fence must be 'allow', 'require' or 'forbid', got {fence!r}")
    body, fenced = unfence(text)
    if fenced and fence == "forbid":
        return None, "JSON is inside a fenced block; the prompt asked for bare JSON"
    if not fenced and fence == "require":
        return None, "no ```json fenced block"
    if not body.strip():
        return None, "empty response"
    if not _depth_ok(body):
        return None, f"JSON nested deeper than {MAX_DEPTH} levels"
    try:
        return json.loads(body, parse_constant=_no_constants,
                          object_pairs_hook=_unique_keys), ""
    except _Reject as exc:
        return None, f"not JSON: {exc}"
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except (ValueError, RecursionError) as exc:     # e.g. an integer past Python's digit limit
        return None, f"not JSON: {type(exc).__name__}: {str(exc)[:120]}"


def _no_aliases_loader():
    """yaml.SafeLoader that refuses anchors and aliases: `safe_load` shares aliased nodes, but
    validating or writing the value walks every copy, so ten lines of nested aliases ("billion
    laughs") would cost billions of steps."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                raise yaml.YAMLError("aliases (*name) are not allowed")
            return super().compose_node(parent, index)
    return NoAliasLoader


def parse_yaml(text: str) -> tuple[Any, str]:
    """(value, "") or (None, what is wrong): one YAML document, optionally ```yaml fenced.

    >>> parse_yaml("name: Ada\\nage: 36")
    ({'name': 'Ada', 'age': 36}, '')
    >>> parse_yaml("a: &x [1]\\nb: *x")[1]
    'not YAML: aliases (*name) are not allowed'
    """
    import yaml
    body, _ = unfence(text, ("", "yaml", "yml"))
    if not body.strip():
        return None, "empty response"
    if not _depth_ok(body):
        return None, f"YAML nested deeper than {MAX_DEPTH} levels"
    try:
        return yaml.load(body, Loader=_no_aliases_loader()), ""
    except yaml.YAMLError as exc:
        return None, f"not YAML: {str(exc).splitlines()[0][:160]}"
    except (ValueError, RecursionError) as exc:
        return None, f"not YAML: {type(exc).__name__}: {str(exc)[:120]}"


def _path(error) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def _validator(schema: Mapping):
    """A checked validator for `schema`; cached, since checking a schema costs milliseconds and
    a training run scores the same schema many times."""
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid JSON Schema: {exc}") from None
    return _cached_validator(key)


@functools.lru_cache(maxsize=512)
def _cached_validator(key: str):
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError
    schema = json.loads(key)
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"invalid JSON Schema: {exc.message}") from None
    return cls(schema)


def schema_check(value: Any, schema: Mapping) -> tuple[float, list[str]]:
    """(fraction of the schema's constraints met, messages of the failed ones).

    Units of credit: for an object schema, the root type, each required key, each present
    property's own subschema, and "no extra keys" when `additionalProperties` is false; for any
    other schema, the whole schema is one unit. Raises ValueError for an invalid schema.

    >>> schema = {"type": "object", "properties": {"age": {"type": "integer"}},
    ...           "required": ["age", "name"], "additionalProperties": False}
    >>> schema_check({"age": "x"}, schema)
    (0.6, ["at $: 'name' is a required property", "at $.age: 'x' is not of type 'integer'"])
    """
    errors = sorted(_validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    messages = [f"at {_path(e)}: {e.message}" for e in errors]
    if schema.get("type") != "object" or not isinstance(value, dict):
        return (0.0 if errors else 1.0), messages
    props = schema.get("properties", {})
    units = 1 + len(schema.get("required", [])) + sum(1 for k in value if k in props) \
        + (schema.get("additionalProperties") is False)
    failed = set()
    for e in errors:
        path = list(e.absolute_path)
        failed.add(("prop", path[0]) if path else (e.validator, str(e.message)))
    return max(0.0, 1.0 - len(failed) / units), messages


def schema_from_fields(fields: Mapping[str, str], extra_keys: bool = False) -> dict:
    """A JSON Schema from {"key": "type"} (every key required).

    >>> schema_from_fields({"name": "string"})["required"]
    ['name']
    """
    return {"type": "object", "properties": {k: {"type": t} for k, t in fields.items()},
            "required": list(fields), "additionalProperties": extra_keys}


def _schema_of(task) -> Mapping:
    schema = task.answer if task.answer is not None else task.metadata.get("schema")
    if isinstance(schema, str):
        schema = json.loads(schema)
    if not isinstance(schema, Mapping):
        raise ValueError(f"task {task.id!r} has no JSON Schema (answer or metadata 'schema')")
    return schema


class JsonValid(BaseReward):
    """1.0 when the answer span is one JSON value (optionally fenced).

    >>> from rlvr import Task
    >>> JsonValid().score(Task("t"), '{"ok": true}').score
    1.0
    >>> JsonValid().score(Task("t"), "{'ok': True}").status
    'unparsed'
    """
    name, version = "json_valid", "1"

    def __init__(self, parser: ThinkParser | None = None, fence: str = "allow"):
        self.parser, self.fence = parser or ThinkParser(), fence

    def _score(self, task, completion):
        value, problem = parse_json(self.parser.parse(completion.text).answer, self.fence)
        if problem:
            return Verdict(0.0, UNPARSED, reason=problem)
        return Verdict(1.0, extracted=value)


class JsonSchemaMatch(BaseReward):
    """1.0 when the answer is JSON matching the task's schema (`task.answer`, a dict or JSON
    text, or metadata `schema`). `partial=True` gives the fraction of constraints met
    (`schema_check`); the default is all-or-nothing. `syntax="yaml"` reads the answer as YAML
    (anchors and aliases refused) and validates it against the same schema.

    >>> from rlvr import Task
    >>> task = Task("t", answer=schema_from_fields({"n": "integer"}))
    >>> JsonSchemaMatch().score(task, '{"n": 3}').score
    1.0
    >>> JsonSchemaMatch().score(task, '{"n": 3, "m": 4}').reason
    "at $: Additional properties are not allowed ('m' was unexpected)"
    """
    name, version = "json_schema", "1"

    def __init__(self, parser: ThinkParser | None = None, partial: bool = False,
                 fence: str = "allow", syntax: str = "json"):
        if syntax not in ("json", "yaml"):
            raise ValueError(f"syntax must be 'json' or 'yaml', got {syntax!r}")
        self.parser, self.partial, self.fence = parser or ThinkParser(), partial, fence
        self.syntax = syntax
        if syntax == "yaml":
            self.name = "yaml_schema"

    def _score(self, task, completion):
        try:
            schema = _schema_of(task)
            _validator(schema)
        except ValueError as exc:        # json.JSONDecodeError included
            return Verdict(0.0, GOLD_UNPARSEABLE, reason=f"bad schema: {exc}")
        answer = self.parser.parse(completion.text).answer
        value, problem = (parse_json(answer, self.fence) if self.syntax == "json"
                          else parse_yaml(answer))
        if problem:
            return Verdict(0.0, UNPARSED, reason=problem)
        try:
            fraction, messages = schema_check(value, schema)
        except RecursionError:
            return Verdict(0.0, reason="value too deeply nested to validate", extracted=value)
        if not messages:
            return Verdict(1.0, extracted=value)
        shown = "; ".join(messages[:5]) + (f"; ... {len(messages) - 5} more"
                                           if len(messages) > 5 else "")
        return Verdict(fraction if self.partial else 0.0, extracted=value, reason=shown)


def parse_csv(text: str) -> tuple[list[list[str]] | None, str]:
    """(rows, "") or (None, why): the whole answer (optionally ```csv fenced) as CSV.

    >>> parse_csv("a,b\\n1,2")
    ([['a', 'b'], ['1', '2']], '')
    """
    body, _ = unfence(text, ("", "csv"))
    if not body.strip():
        return None, "empty response"
    try:
        rows = [r for r in csv.reader(io.StringIO(body, newline=""), strict=True) if r]
    except csv.Error as exc:
        return None, f"not CSV: {exc}"
    widths = {len(r) for r in rows}
    if len(widths) > 1:
        bad = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
        return None, f"row {bad + 1} has {len(rows[bad])} fields, the header has {len(rows[0])}"
    return rows, ""


class CsvTable(BaseReward):
    """1.0 when the answer is a CSV table whose header is exactly the task's `columns` and which
    has `n_rows` data rows (when the task says how many).

    >>> from rlvr import Task
    >>> t = Task("t", metadata={"columns": ["name", "age"], "n_rows": 1})
    >>> CsvTable().score(t, "name,age\\nAda,36").score
    1.0
    >>> CsvTable().score(t, "age,name\\n36,Ada").reason
    "header is ['age', 'name'], wanted ['name', 'age']"
    """
    name, version = "csv_table", "1"

    def __init__(self, parser: ThinkParser | None = None):
        self.parser = parser or ThinkParser()

    def required_fields(self) -> set[str]:
        return {"columns"}

    def _score(self, task, completion):
        columns, n_rows = task.metadata.get("columns"), task.metadata.get("n_rows")
        if not isinstance(columns, list) or not columns:
            return Verdict(0.0, GOLD_UNPARSEABLE, reason="task has no 'columns' list")
        rows, problem = parse_csv(self.parser.parse(completion.text).answer)
        if problem:
            return Verdict(0.0, UNPARSED, reason=problem)
        header = [h.strip() for h in rows[0]]
        if header != columns:
            return Verdict(0.0, extracted=rows, reason=f"header is {header}, wanted {columns}")
        if n_rows is not None and len(rows) - 1 != n_rows:
            return Verdict(0.0, extracted=rows,
                           reason=f"{len(rows) - 1} data rows, wanted {n_rows}")
        return Verdict(1.0, extracted=rows)
