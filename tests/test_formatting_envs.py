"""The formatting environments: contract, splits, rows in the IFEval format, combination with
a math environment, and `rlvr score` on the shipped samples."""
import doctest
import importlib
import json
from collections import Counter
from pathlib import Path

import pytest

from rlvr import Environment, Task, check_env, load_env
from rlvr.cli import main
from rlvr.envs.arithmetic import ArithmeticSource
from rlvr.envs.ifeval import ifeval_tasks
from rlvr.envs.ifeval_generator import KINDS
from rlvr.envs.registry import JUNK
from rlvr.envs.think_format import with_format_reward
from rlvr.verifiers import NumericMatch, ThinkParser
from rlvr.verifiers.format import R1Format

DATA = Path(__file__).resolve().parent.parent / "rlvr" / "data"


@pytest.fixture(scope="module")
def ifeval():
    return load_env("ifeval-style")


@pytest.mark.parametrize("name", ["ifeval-style", "json-schema", "think-format"])
def test_gold_scores_one_and_junk_zero_on_both_splits(name):
    env = load_env(name)                      # the registry's contract check runs here too
    for split in ("train", "test"):
        for task in env.sample(60, split=split):
            gold = env.reward.score(task, env.gold(task))
            assert (gold.score, gold.status) == (1.0, "ok"), (task.id, gold.reason)
            for junk in JUNK:
                assert env.reward.score(task, junk).score == 0.0, (task.id, junk)


def test_json_schema_partial_credit_passes_the_contract():
    env = load_env("json-schema", partial=True)
    task = next(t for t in env.sample(20) if len(t.answer["required"]) >= 2)
    broken = dict(task.metadata["reference"])
    broken.pop(task.answer["required"][0])
    assert 0.0 < env.reward.score(task, json.dumps(broken)).score < 1.0


def test_ifeval_loose_mode_and_partial_credit_pass_the_contract():
    env = load_env("ifeval-style", mode="loose", partial=True, max_constraints=5)
    check_env(env, n=20)
    task = next(t for t in env.sample(50) if len(t.metadata["instruction_id_list"]) >= 4)
    n = len(task.metadata["instruction_id_list"])
    keyword = task.metadata["kwargs"][0]["keywords"][0]
    # on topic, one instruction followed (the keyword) out of n -> 1/n; off topic -> 0 (gated)
    v = env.reward.score(task, f"{keyword}\n******\n{keyword}")
    assert v.extracted[0] and 0 < v.score < 1 and v.score == pytest.approx(sum(v.extracted) / n)
    assert env.reward.score(task, "Short, off topic.").score == 0.0


def test_ifeval_tasks_regenerate_from_ids_and_splits_do_not_share_requests(ifeval):
    train, test = ifeval.sample(150), ifeval.sample(60, split="test")
    for task in train[:20] + test[:20]:
        again = ifeval.get_task(task.id)
        assert (again.prompt, again.metadata) == (task.prompt, task.metadata)
    first_line = lambda t: t.metadata["instruction"].split(" Use the word")[0]  # noqa: E731
    assert not {first_line(t) for t in train} & {first_line(t) for t in test}
    assert [t.id for t in ifeval.sample(5, seed=1)] != [t.id for t in ifeval.sample(5)]
    assert ifeval.sample(5, seed=1)[0].prompt != ifeval.sample(5)[0].prompt


def test_ifeval_draws_every_kind_and_states_it_in_the_prompt(ifeval):
    tasks = ifeval.sample(300)
    seen = Counter(i for t in tasks for i in t.metadata["instruction_id_list"][1:])
    assert set(seen) == set(KINDS)
    sizes = Counter(len(t.metadata["instruction_id_list"]) - 1 for t in tasks)
    assert set(sizes) == {1, 2, 3}            # 1-3 sampled, plus the topic keyword
    for t in tasks[:50]:
        ids, kwargs = t.metadata["instruction_id_list"], t.metadata["kwargs"]
        assert ids[0] == "keywords:existence"
        prompt = t.prompt[0]["content"]
        for iid, k in zip(ids[1:], kwargs[1:]):
            assert KINDS[iid].describe(k) in prompt


def test_ifeval_reward_names_what_failed(ifeval):
    task = next(t for t in ifeval.sample(200)
                if "punctuation:no_comma" in t.metadata["instruction_id_list"])
    v = ifeval.reward.score(task, task.metadata["reference"] + "\nOne, two.")
    assert v.score == 0.0 and "punctuation:no_comma: " in v.reason
    assert v.components.keys() == {"instructions_strict", "instructions_loose"}
    lean = load_env("ifeval-style", log_other_mode=False)
    assert lean.reward.score(task, task.metadata["reference"]).components == {
        "instructions_strict": 1.0}


IFEVAL_ROW = {"key": 7, "prompt": "Say hi in lowercase.",
              "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]}


@pytest.mark.parametrize("row", [
    dict(IFEVAL_ROW),                                                           # top level
    {**IFEVAL_ROW, "kwargs": json.dumps(IFEVAL_ROW["kwargs"])},                 # kwargs as text
    {"id": "x", "answer": {"instruction_id_list": ["change_case:english_lowercase"],
                           "kwargs": [{}]}},                                    # in the answer
    {"id": "x", "answer": json.dumps({"instruction_id_list": ["change_case:english_lowercase"],
                                      "kwargs": [{"num_words": None}]})},       # hub nulls
])
def test_rows_carrying_their_own_instructions(ifeval, row):
    task = ifeval.task_from_row(row)
    assert ifeval.reward.score(task, "hi there").score == 1.0
    assert ifeval.reward.score(task, "Hi there").score == 0.0


def test_rows_by_generated_id_and_bad_rows(ifeval):
    task = ifeval.sample(1, split="test")[0]
    assert ifeval.task_from_row({"id": task.id}).metadata == task.metadata
    with pytest.raises(KeyError, match="bad ifeval-style task id"):
        ifeval.task_from_row({"id": "ifeval-style/dev/0/1"})
    with pytest.raises(KeyError, match="neither instruction_id_list"):
        ifeval.task_from_row({"completion": "x", "answer": "unrelated"})
    # an unrelated answer field does not hide the task id
    assert ifeval.task_from_row({"id": task.id, "answer": "x"}).metadata == task.metadata


def test_ifeval_data_file(tmp_path):
    path = tmp_path / "ifeval.jsonl"
    path.write_text("\n".join(json.dumps({**IFEVAL_ROW, "key": k}) for k in range(3)))
    env = load_env("ifeval-style", data=str(path))   # contract: junk-only (rows carry no reference)
    assert env.gold is None and env.junk == ("", "<think>")
    tasks = env.sample(5)
    assert [t.id for t in tasks] == ["ifeval/0", "ifeval/1", "ifeval/2"]
    assert env.reward.score(tasks[0], "<think>Hmm.</think>hi").score == 1.0
    with pytest.raises(ValueError, match="row 0 has no instruction_id_list"):
        ifeval_tasks([{"prompt": "x"}])


def test_ifeval_data_from_a_saved_datasets_directory(tmp_path):
    import datasets
    # the hub copy's shape: every kwargs dict carries every argument, unused ones null
    rows = [{**IFEVAL_ROW, "key": 1, "kwargs": [{"num_words": None, "keywords": None}]}]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ds"))
    env = load_env("ifeval-style", data=str(tmp_path / "ds"))
    task = env.sample(1)[0]
    assert env.reward.score(task, "hi").score == 1.0


def test_rlvr_score_on_raw_ifeval_rows_keyed_by_key(tmp_path):
    src = tmp_path / "responses.jsonl"
    src.write_text(json.dumps({**IFEVAL_ROW, "response": "hello there"}) + "\n"
                   + json.dumps({**IFEVAL_ROW, "key": 8, "response": "Hello"}) + "\n")
    out = tmp_path / "scored.jsonl"
    assert main(["score", "--env", "ifeval-style", str(src), "-o", str(out), "--id-field", "key",
                 "--completion-field", "response", "--workers", "0", "--no-progress"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["score"] for r in rows] == [1.0, 0.0]
    assert "1 capital letter (first 'H' at char 0)" in rows[1]["reason"]


def test_json_schema_rows_may_bring_their_schema():
    env = load_env("json-schema")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    for given in (schema, json.dumps(schema)):
        task = env.task_from_row({"id": "mine", "schema": given})
        assert env.reward.score(task, '{"n": 2}').score == 1.0
        v = env.reward.score(task, '{"n": "2"}')
        assert v.score == 0.0 and "at $.n: '2' is not of type 'integer'" in v.reason
    generated = env.sample(1)[0]
    assert env.task_from_row({"id": generated.id}).answer == generated.answer


# (completion, score, reason) for the strict R1 shape
R1_TABLE = [
    ("<think>a</think><answer>4</answer>", 1.0, ""),
    ("  <think>\na\n</think>\n<answer> 4 </answer>\n", 1.0, ""),
    ("<think></think><answer>4</answer>", 1.0, ""),                 # empty thinking is allowed
    ("<think>a</think> <answer>4</answer> Done!", 0.0, "text after </answer>"),
    ("<think>a</think> So: <answer>4</answer>", 0.0, "text between </think> and <answer>"),
    ("<think>a</think> <answer> </answer>", 0.0, "empty <answer> block"),
    ("<think>a</think> <answer>4</answer><answer>5</answer>", 0.0, "2 <answer> and 2 </answer>"),
    ("<think>a</think> <answer>4", 0.0, "1 <answer> and 0 </answer> tags"),
    ("<think>a</think> 4", 0.0, "no <answer> block after </think>"),
    ("<think>a", 0.0, "think block never closed"),
    ("<answer>4</answer>", 0.0, "no think block"),
    ("hi <think>a</think><answer>4</answer>", 0.0, "text before the think block"),
    ("<think>a</think><think>b</think><answer>4</answer>", 0.0, "2 opening and 2 closing"),
    ("", 0.0, "no think block"),
]


@pytest.mark.parametrize("text,score,reason", R1_TABLE)
def test_r1_format_table(text, score, reason):
    v = R1Format().score(Task("t"), text)
    assert v.score == score
    assert (reason in v.reason) if reason else v.reason == ""


def test_think_format_base_prompt_style_is_prefilled():
    env = load_env("think-format", prompt_style="base")
    task = env.sample(1)[0]
    assert task.prompt.endswith("<think>")
    assert env.reward.score(task, " hmm</think> <answer>1</answer>").score == 1.0
    assert env.reward.score(task, "<think>hmm</think> <answer>1</answer>").score == 0.0


def test_think_format_scores_rows_without_a_generated_id():
    env = load_env("think-format")
    task = env.task_from_row({"id": "anything-1", "completion": "x"})
    assert env.reward.score(task, "<think>a</think><answer>b</answer>").score == 1.0


def test_math_env_with_think_format_at_weight_02_reports_both_components():
    parser = ThinkParser()
    env = Environment("arith+format", ArithmeticSource(), parser=parser,
                      rewards=[(NumericMatch(parser), 0.8), (R1Format(parser), 0.2)])
    check_env(env)
    task = env.sample(1)[0]
    right = f"<think>sum it</think> <answer>{task.answer}</answer>"
    sloppy = f"<think>sum it</think> <answer>{task.answer}</answer> Hope that helps!"
    wrong = "<think>sum it</think> <answer>nope</answer>"
    # score = 0.8 * numeric + 0.2 * format
    for text, numeric, fmt in [(right, 1.0, 1.0), (sloppy, 1.0, 0.0), (wrong, 0.0, 1.0)]:
        v = env.reward.score(task, text)
        assert v.components == {"numeric_match": numeric, "r1_format": fmt}
        assert v.score == pytest.approx(0.8 * numeric + 0.2 * fmt)
    # the registered forms: arithmetic's own knob, and think-format wrapped around any env
    v = load_env("arithmetic", format_weight=0.2).reward.score(task, right)
    assert v.components == {"numeric_match": 1.0, "think_format": 1.0} and v.score == 1.2
    wrapped = load_env("think-format", base="arithmetic", weight=0.2)
    v = wrapped.reward.score(task, sloppy)
    assert v.components == {"numeric_match": 1.0, "think_format": 1.0, "r1_format": 0.0}
    assert v.score == pytest.approx(0.8)
    with pytest.raises(ValueError, match="already has a 'r1_format' reward"):
        with_format_reward(wrapped, 0.1)


def test_with_format_reward_rejects_bad_weight():
    with pytest.raises(ValueError, match=r"weight must be in \[0, 1\]"):
        load_env("think-format", base="arithmetic", weight=1.5)


def _score(tmp_path, env, sample, workers="0"):
    out = tmp_path / f"{sample}.out.jsonl"
    rc = main(["score", "--env", env, str(DATA / sample), "-o", str(out), "--workers", workers,
               "--no-progress"])
    return rc, [json.loads(line) for line in out.read_text().splitlines()]


def test_rlvr_score_on_the_shipped_samples(tmp_path, capsys):
    rc, rows = _score(tmp_path, "ifeval-style", "ifeval_sample.jsonl", workers="2")
    assert rc == 0 and [r["score"] for r in rows] == [1.0, 0.0] * 6 + [1.0, 0.0, 1.0, 1.0]
    assert all(r["status"] == "ok" and r["reason"] for r in rows if r["score"] == 0.0)
    assert "4 bullets, wanted exactly 3" in rows[13]["reason"]
    rc, rows = _score(tmp_path, "json-schema", "json_schema_sample.jsonl")
    assert rc == 0 and [r["score"] for r in rows] == [1.0, 0.0] * 5
    assert rows[-1]["status"] == "unparsed"
    rc, rows = _score(tmp_path, "think-format", "think_format_sample.jsonl")
    assert rc == 0 and [r["score"] for r in rows] == [1.0, 0, 0, 0, 0, 1.0]


def test_rlvr_score_math_env_with_the_format_reward(tmp_path):
    out = tmp_path / "arith_fmt.jsonl"
    assert main(["score", "--env", "think-format", "--env-arg", "base=arithmetic",
                 "--env-arg", "weight=0.2", str(DATA / "arithmetic_sample.jsonl"), "-o", str(out),
                 "--workers", "0", "--no-progress"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 200
    for r in rows:
        c = r["components"]
        assert c.keys() == {"numeric_match", "think_format", "r1_format"}
        if r["status"] == "ok":
            assert r["score"] == pytest.approx(0.8 * c["numeric_match"] + 0.2 * c["r1_format"])


@pytest.mark.parametrize("module", ["rlvr.envs.ifeval", "rlvr.envs.json_schema",
                                    "rlvr.envs.think_format", "rlvr.envs.common",
                                    "rlvr.verifiers.format"])
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
