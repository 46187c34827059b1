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
    assert ifeval.reward.score(task, "hi there, this is the answer and it is in english").score == 1.0
    assert ifeval.reward.score(task, "Hi there, this is the answer and it is in english").score == 0.0


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
    assert env.reward.score(tasks[0], "<think>Hmm.</think>hi, this is the answer and it is in english").score == 1.0
    with pytest.raises(ValueError, match="row 0 has no instruction_id_list"):
        ifeval_tasks([{"prompt": "x"}])


def test_ifeval_data_from_a_saved_datasets_directory(tmp_path):
    import datasets
    # the hub copy's shape: every kwargs dict carries every argument, unused ones null
    rows = [{**IFEVAL_ROW, "key": 1, "kwargs": [{"num_words": None, "keywords": None}]}]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ds"))
    env = load_env("ifeval-style", data=str(tmp_path / "ds"))
    task = env.sample(1)[0]
    assert env.reward.score(task, "hi, this is the answer and it is in english").score == 1.0


def test_rlvr_score_on_raw_ifeval_rows_keyed_by_key(tmp_path):
    src = tmp_path / "responses.jsonl"
    src.write_text(json.dumps({**IFEVAL_ROW, "response": "hello there, this is the answer and it is in english"}) + "\n"
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


# --------------------------------------------------------------------------- IFEval's own rows
# tests/fixtures/ifeval_*.jsonl: 23 rows of IFEval's input_data.jsonl, GPT-4's responses to them
# from Google's response file, and Google's checker's verdicts (see ifeval_native.md there).
FIXTURES = Path(__file__).resolve().parent / "fixtures"
IFEVAL_INPUT = FIXTURES / "ifeval_input_data.jsonl"
# Instructions where rlvr deliberately differs from Google's checker: (key, id) -> our verdict.
DEPARTURES = {
    (1954, "length_constraints:nth_paragraph_first_word"): True,   # "Summary:" is "summary"
    (1381, "length_constraints:number_sentences"): False,   # we count line breaks: 15, not 5
    (1823, "length_constraints:number_sentences"): True,    # 40 lines, 20 punkt sentences
    (3195, "language:response_language"): False,     # a 10-word haiku: unsure, not Italian
}


def _jsonl(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def _google_follow(mode):
    """Google's follow lists per key, with our departures; '#'/'!' (keys 1122, 1129), which
    Google's checker swaps for a random letter, counted as the prompt asks."""
    responses = {r["prompt"]: r["response"] for r in _jsonl(FIXTURES / "ifeval_responses.jsonl")}
    out = {}
    for row, google in zip(_jsonl(IFEVAL_INPUT), _jsonl(FIXTURES / "ifeval_google_verdicts.jsonl")):
        assert row["key"] == google["key"]
        text = responses[row["prompt"]]
        follow = [text.count(k["letter"]) >= k["let_frequency"] if f is None else f
                  for f, k in zip(google[mode], row["kwargs"])]
        out[row["key"]] = [DEPARTURES.get((row["key"], iid), f)
                           for iid, f in zip(row["instruction_id_list"], follow)]
    return out


def _ifeval_score(tmp_path, src, name, *args):
    out = tmp_path / f"{name}.out.jsonl"
    rc = main(["score", "--env", "ifeval-style", "--env-arg", f"data={IFEVAL_INPUT}",
               "--completion-field", "response", str(src), "-o", str(out), "--no-progress",
               "--workers", "0", *args])
    return rc, _jsonl(out)


def test_ifeval_native_rows_are_found_by_key_prefixed_key_or_prompt(tmp_path):
    inputs = _jsonl(IFEVAL_INPUT)
    responses = _jsonl(FIXTURES / "ifeval_responses.jsonl")    # Google's file: prompt + response
    keyed, prefixed = tmp_path / "keyed.jsonl", tmp_path / "prefixed.jsonl"
    keyed.write_text("".join(json.dumps({"key": i["key"], "response": r["response"]}) + "\n"
                             for i, r in zip(inputs, responses)))
    prefixed.write_text("".join(json.dumps({"key": f"ifeval/{i['key']}", "response": r["response"]})
                                + "\n" for i, r in zip(inputs, responses)))
    runs = [_ifeval_score(tmp_path, keyed, "keyed", "--id-field", "key"),
            _ifeval_score(tmp_path, prefixed, "prefixed", "--id-field", "key"),
            _ifeval_score(tmp_path, FIXTURES / "ifeval_responses.jsonl", "by_prompt")]
    verdicts = []
    for rc, rows in runs:
        assert rc == 0 and len(rows) == 23
        assert {r["status"] for r in rows} <= {"ok", "unparsed"}, [r["reason"] for r in rows]
        verdicts.append([(r["score"], r["extracted"], r["components"]) for r in rows])
    assert verdicts[0] == verdicts[1] == verdicts[2]
    # an unknown key names itself; a prompt IFEval does not have is an error row, not a crash
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"key": 99999, "response": "x"}) + "\n"
                   + json.dumps({"prompt": "Not an IFEval prompt.", "response": "x"}) + "\n")
    rc, rows = _ifeval_score(tmp_path, bad, "bad", "--id-field", "key")
    assert rc != 0 and [r["status"] for r in rows] == ["error", "error"]
    assert "unknown task id '99999'" in rows[0]["reason"]
    assert "nor a prompt found in the IFEval rows" in rows[1]["reason"]


def test_ifeval_native_rows_agree_with_googles_checker(tmp_path):
    rc, rows = _ifeval_score(tmp_path, FIXTURES / "ifeval_responses.jsonl", "scored")
    strict, loose = _google_follow("strict"), _google_follow("loose")
    for row, inp in zip(rows, _jsonl(IFEVAL_INPUT)):
        assert row["extracted"] == strict[inp["key"]], (inp["key"], row["reason"])
        n = len(inp["instruction_id_list"])
        assert row["components"]["instruction_level_loose"] * n == pytest.approx(
            sum(loose[inp["key"]])), inp["key"]


def test_ifeval_summary_reports_the_four_ifeval_numbers_and_keeps_them_on_resume(tmp_path,
                                                                                   capsys):
    strict, loose = _google_follow("strict"), _google_follow("loose")
    n = sum(map(len, strict.values()))
    want = [f"prompt-level strict: {sum(map(all, strict.values())) / 23:.4f} "
            f"({sum(map(all, strict.values()))} of 23)",
            f"prompt-level loose: {sum(map(all, loose.values())) / 23:.4f} "
            f"({sum(map(all, loose.values()))} of 23)",
            f"instruction-level strict: {sum(map(sum, strict.values())) / n:.4f} "
            f"({sum(map(sum, strict.values()))} of {n})",
            f"instruction-level loose: {sum(map(sum, loose.values())) / n:.4f} "
            f"({sum(map(sum, loose.values()))} of {n})"]
    src = FIXTURES / "ifeval_responses.jsonl"
    _ifeval_score(tmp_path, src, "scored", "--workers", "2")
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if "-level " in line] == want
    # a run killed half way and resumed still reports the whole file's numbers
    out = tmp_path / "scored.out.jsonl"
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:11]))
    _ifeval_score(tmp_path, src, "scored")
    lines = capsys.readouterr().out.splitlines()
    assert "rows: 23 (11 from an earlier run)" in lines
    assert [line for line in lines if "-level " in line] == want


def test_envs_show_on_ifeval_rows_says_there_is_no_reference(capsys):
    assert main(["envs", "show", "ifeval-style", "--env-arg", f"data={IFEVAL_INPUT}"]) == 0
    out = capsys.readouterr().out
    assert "sample task id: ifeval/1000" in out
    assert "gold completion: (none: these tasks carry no reference answer)" in out


def test_each_formatting_environment_loads_by_name_in_a_fresh_process():
    # the three environments live in three modules now: discovery must find each by name, and
    # a worker rebuilding one imports only its own module
    import subprocess
    import sys
    code = ("import sys, rlvr; from rlvr.envs.registry import build_env, env_module; "
            "build_env('json-schema', {}, 'rlvr.envs.json_schema'); "
            "print(sorted(m for m in sys.modules if m.startswith('rlvr.envs.') "
            "and m.endswith(('ifeval', 'think_format')))); "
            "print([env_module(n) for n in ('ifeval-style', 'json-schema', 'think-format')]); "
            "print([type(rlvr.load_env(n)).__name__ for n in rlvr.list_envs() "
            "if n in ('ifeval-style', 'json-schema', 'think-format')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "[]", "['rlvr.envs.ifeval', 'rlvr.envs.json_schema', 'rlvr.envs.think_format']",
        "['IFEvalEnvironment', 'SchemaEnvironment', 'FormatOnlyEnvironment']"]
    listed = subprocess.run([sys.executable, "-m", "rlvr", "envs", "list"], capture_output=True,
                            text=True, check=True).stdout
    assert {line.split()[0] for line in listed.splitlines() if line.strip()} >= {
        "ifeval-style", "json-schema", "think-format"}
