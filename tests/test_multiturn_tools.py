"""Tools: the Hermes tool-call parser on a fixture table, schemas, and every way a call fails."""
import time

import pytest

from rlvr.pool import WorkerPool
from rlvr.verifiers.tools import Toolbox, calculator, parse_tool_calls, tool_schema


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


def explode(x: int) -> str:
    """Always fails.

    Args:
        x: Anything.
    """
    raise ValueError(f"cannot handle {x}")


def hang(x: int) -> str:
    """Never returns.

    Args:
        x: Anything.
    """
    time.sleep(600)
    return "late"


CALL = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
# (text, expected content, [(name, arguments, error substring)])
PARSER_TABLE = [
    ("no calls at all", "no calls at all", []),
    (CALL, "", [("add", {"a": 1, "b": 2}, "")]),
    (f"Let me add.\n{CALL}\nDone.", "Let me add.\n\nDone.", [("add", {"a": 1, "b": 2}, "")]),
    (CALL + CALL.replace("1", "5"), "", [("add", {"a": 1, "b": 2}, ""),
                                          ("add", {"a": 5, "b": 2}, "")]),
    ('<tool_call>\n{"name": "add", "arguments": "{\\"a\\": 3, \\"b\\": 4}"}\n</tool_call>', "",
     [("add", {"a": 3, "b": 4}, "")]),                       # OpenAI wire form: a JSON string
    ('<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>', "",
     [("", {}, "not valid JSON")]),
    ('<tool_call>{"arguments": {"a": 1}}</tool_call>', "", [("", {}, "JSON object")]),
    ('<tool_call>["add", 1, 2]</tool_call>', "", [("", {}, "JSON object")]),
    ('<tool_call>{"name": "add", "arguments": [1, 2]}</tool_call>', "",
     [("add", {}, "'arguments' must be")]),
    ('I call <tool_call>{"name": "add", "argu', "I call", [("", {}, "unclosed")]),
    ('<tool_call>{"name": "nope", "arguments": {}}</tool_call>', "", [("nope", {}, "")]),
]


@pytest.mark.parametrize("text,content,expected", PARSER_TABLE)
def test_parser_fixture_table(text, content, expected):
    got_content, calls = parse_tool_calls(text)
    assert got_content == content
    assert [(c.name, c.arguments) for c in calls] == [(n, a) for n, a, _ in expected]
    for call, (_, _, error) in zip(calls, expected):
        assert (error in call.error) if error else call.error == ""


def test_schema_comes_from_hints_and_docstring():
    schema = tool_schema(add)["function"]
    assert schema["name"] == "add"
    assert schema["description"] == "Add two integers."
    assert schema["parameters"]["properties"]["a"] == {"type": "integer",
                                                       "description": "The first integer."}
    assert schema["parameters"]["required"] == ["a", "b"]


def test_calculator_is_exact_and_refuses_code():
    assert calculator("123456789 * 987654321") == str(123456789 * 987654321)
    assert calculator("(7 - 10) // 2") == "-2"
    for bad in ("__import__('os')", "2 ** 1000000", "1.5 * 2", "x + 1"):
        with pytest.raises((ValueError, SyntaxError)):
            calculator(bad)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(2) as p:
        yield p


def test_every_failure_becomes_a_counted_tool_message(pool):
    box = Toolbox([add, explode, hang], deadline_s=2.0, pool=pool)
    text = "".join([
        '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 40}}</tool_call>',
        '<tool_call>{"name": "add", "arguments": {"a": 2}}</tool_call>',
        '<tool_call>{"name": "add", "arguments": {"a": "2", "b": 3}}</tool_call>',
        '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3, "c": 4}}</tool_call>',
        '<tool_call>{"name": "sub", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "explode", "arguments": {"x": 7}}</tool_call>',
        '<tool_call>{"name": add}</tool_call>'])
    _, calls = parse_tool_calls(text)
    results = box.run(calls)
    assert [r.kind for r in results] == ["", "bad_arguments", "bad_arguments", "bad_arguments",
                                         "unknown_tool", "raised", "malformed"]
    assert results[0].content == "42" and not results[0].error
    assert all(r.error and r.content.startswith("Error:") for r in results[1:])
    assert "missing a required argument: 'b'" in results[1].content
    assert "must be integer" in results[2].content
    assert "available: add, explode, hang" in results[4].content
    assert "ValueError: cannot handle 7" in results[5].content


def test_a_hanging_tool_is_stopped_at_its_deadline_and_the_pool_goes_on(pool):
    box = Toolbox([add, hang], deadline_s=1.5, pool=pool)
    _, calls = parse_tool_calls('<tool_call>{"name": "hang", "arguments": {"x": 1}}</tool_call>'
                                '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}'
                                '</tool_call>')
    hung, fine = box.run(calls)
    assert hung.kind == "timeout" and "did not finish within 1.5 s" in hung.content
    assert fine.content == "2" and not fine.error
    assert box.run(calls[1:])[0].content == "2"      # the killed worker was replaced


def test_long_results_are_truncated(pool):
    box = Toolbox([calculator], max_result_chars=50, pool=pool)
    _, calls = parse_tool_calls('<tool_call>{"name": "calculator", "arguments": '
                                '{"expression": "7 * 10**1"}}</tool_call>')
    assert box.run(calls)[0].kind == "raised"          # ** is not offered
    _, calls = parse_tool_calls('<tool_call>{"name": "calculator", "arguments": '
                                '{"expression": "99999999999999999999 * 99999999999999999999 * '
                                '99999999999999999999 * 99999999999999999999"}}</tool_call>')
    out = box.run(calls)[0].content
    assert out.startswith("9999") and "[truncated, 80 chars]" in out
