"""`rlvr audit` (rlvr.audit): a weak environment is caught, a strict one passes, the exit code
and JSON say so, user strategies plug in, and every built-in environment is audited."""
import json
import os
import re
from fractions import Fraction
from pathlib import Path

import pytest

from rlvr import Environment, RowSource, Task, register_env
from rlvr.audit import (AuditConfig, list_strategies, register_strategy, run_audit, select,
                        task_kind)
from rlvr.audit.strategy import perturb
from rlvr.cli import main
from rlvr.core import BaseReward, Verdict
from rlvr.pool import WorkerPool

FIX = Path(__file__).parent / "fixtures" / "benchmarks"

# What the audit may find in each built-in environment once every reader fails closed: only
# the accepted findings docs/audit.md gives a reason for. The test checks the findings are
# exactly these plus OPEN_HOLES, so a closed hole and a new one both show up here.
EXPECTED_FINDINGS = {
    "aime": set(),
    "arithmetic": set(),
    "code": set(),
    "code (docker)": set(),
    "code-feedback": set(),
    "code-stdio": set(),
    "countdown": set(),
    "gsm8k": set(),
    "hendrycks-math": set(),
    "humaneval": set(),
    "ifeval-style": {"format-only", "keyword-stuffing", "length-padding"},
    "json-schema": set(),
    "math": set(),
    "math-arithmetic": set(),
    "math-python": set(),
    "math500": set(),
    "mbpp": set(),
    "mbpp (mixed asserts)": set(),
    "math (symbolic golds)": set(),
    "reasoning-gym": set(),
    "reasoning-gym/spell_backward": {"lookalikes"},
    "think-format": set(),
    "tool-arithmetic": set(),
}
# Holes the audit finds today that are not accepted: readers that do not yet fail closed on the
# final answer (a correction, a retraction or a negation after or around the answer slot, a
# hedge past a window of slots), on one-sided identities, on the question written back, and on
# MBPP asserts they cannot convert. Remove an entry's names as its reader closes them (the math
# reader: every math-family environment and countdown; the MBPP assert reader: `mbpp (mixed
# asserts)`; the exact numeric match: arithmetic, tool-arithmetic; reasoning-gym's answer
# reading); the test fails until this table matches what the audit finds.
_FINAL = {"answer-then-correction", "answer-then-retraction", "many-copies-hedge",
          "negated-answer"}
_AFTER_SLOT = {"answer-then-correction", "answer-then-retraction"}
OPEN_HOLES: dict[str, set] = {}
# Findings that come and go with the machine's load: the math reader takes seconds on the
# `stall` answers (docs/audit.md), so under load some pass the deadline and end as `timeout`.
LOAD_DEPENDENT = {env: {"stall"} for env in (
    "aime", "countdown", "gsm8k", "hendrycks-math", "math", "math-arithmetic", "math-python",
    "math500", "math (symbolic golds)")}

# Factory arguments that keep the audit offline (benchmark fixtures) and short (a 2 s wall for
# the programs that stall).
BUILTIN_ARGS = {
    "gsm8k": {"data": str(FIX / "gsm8k.jsonl")},
    "math500": {"data": str(FIX / "math500.jsonl")},
    "hendrycks-math": {"data": str(FIX / "hendrycks_math.jsonl")},
    "aime": {"data": str(FIX / "aime_aimo.jsonl")},
    "mbpp": {"data": str(FIX / "mbpp.jsonl"), "wall_s": 2.0},
    "code": {"wall_s": 2.0}, "code (docker)": {"wall_s": 2.0, "backend": "docker"},
    "code-stdio": {"wall_s": 2.0}, "code-feedback": {"wall_s": 2.0},
    "humaneval": {"wall_s": 2.0},
    # MBPP's published test lists mix `f(x) == y` with other shapes; the benchmark fixture's
    # first rows do not, so these rows are audited too (unconvertible-asserts)
    "mbpp (mixed asserts)": {"data": str(Path(__file__).parent / "fixtures" / "audit"
                                         / "mbpp_mixed_asserts.jsonl"), "wall_s": 2.0},
    # symbolic golds on the whole real line (one-sided-identity); the math reader of math500
    "math (symbolic golds)": {"data": str(Path(__file__).parent / "fixtures" / "audit"
                                          / "math_symbolic.jsonl")},
}
N_TASKS = 2
TASKS_FOR = {"ifeval-style": 6}
"""Environments audited on more tasks: the first two procedural ifeval-style tasks both ask for
English in lowercase, which refuses filler text (as IFEval's checker does), so the
constraint-only findings show only on the later tasks that carry no language rule."""
AUDITED_AS = {"math (symbolic golds)": "math500"}
"""Keys that audit an environment of another name."""
NOT_AUDITED = {"reward-model": "needs a trained reward model (path=...); a learned reward has "
                                "no gold answer to hold it to"}


# --------------------------------------------------------------------------- toy environments

def _tasks():
    return [Task(f"toy/{i}", prompt=[{"role": "user", "content": f"What is {i} * 7?"}],
                 answer=str(7 * i)) for i in range(3, 6)]


class ContainsGold(BaseReward):
    """Deliberately weak: 1 when the gold appears anywhere in the completion."""
    name = "contains_gold"

    def _score(self, task, completion):
        return Verdict(float(str(task.answer) in completion.text))


class TagsAgree(BaseReward):
    """One value, read only from the `<answer>` tags after the think block, of a completion
    that finished; repeated tags must agree; `$`, a full stop and whitespace around it allowed.
    Deaf to what the text around the tags says (a correction, a retraction); `window` reads
    only the last tags, as a reader with a bounded hedge count does."""
    name = "tags_agree"
    window = None

    def _tags(self, task, completion):
        span = completion.text.rpartition("</think>")[2]
        tags = [t.strip().strip("$").rstrip(".").strip()
                for t in re.findall(r"<answer>(.*?)</answer>", span, re.S)]
        return span, tags[-self.window:] if self.window else tags

    def _score(self, task, completion):
        if completion.finish_reason != "stop":
            return Verdict(0.0, "unparsed", reason="truncated")
        _, tags = self._tags(task, completion)
        if len(set(tags)) != 1:
            return Verdict(0.0, "unparsed" if not tags else "ok", reason=f"{len(tags)} answers")
        text = tags[0]
        if len(text) > 100 or not re.fullmatch(r"-?\d+(\.\d+)?", text):
            return Verdict(0.0, reason="not a number")
        return Verdict(float(Fraction(text) == Fraction(task.answer)))


class LastTags(TagsAgree):
    """Reads only the last 64 answer tags (a bounded hedge count)."""
    name = "last_tags"
    window = 64


_DOUBT = re.compile(r"(?i)\b(wrong|incorrect|not sure|don't|can't|cannot|scratch|no)\b")


class StrictAnswer(TagsAgree):
    """TagsAgree, and the answer must stand: every number written after the first tag is that
    value (a later different value is a correction or a hedge), and no word after it takes the
    answer back (a stand-in for a reader that fails closed on the final answer)."""
    name = "strict_answer"

    def _score(self, task, completion):
        verdict = super()._score(task, completion)
        if verdict.score == 0:
            return verdict
        span, tags = self._tags(task, completion)
        rest = re.sub(r"<answer>.*?</answer>", " ", span[span.index("<answer>"):], flags=re.S)
        later = set(re.findall(r"-?\d+(?:\.\d+)?", rest)) - {tags[0]}
        if later or _DOUBT.search(rest):
            return Verdict(0.0, reason=f"the answer does not stand: {sorted(later)[:3]}")
        return verdict


def _env(name, reward):
    return Environment(name, RowSource({"train": _tasks()}), [(reward, 1.0)],
                       gold=lambda t: f"<think>7 times.</think> <answer>{t.answer}</answer>")


@register_env("audit-weak", replace=True)
def audit_weak():
    return _env("audit-weak", ContainsGold())


class WithinOne(BaseReward):
    """Accepts any value within 1 of the gold: more than the gold."""
    name = "within_one"

    def _score(self, task, completion):
        found = re.findall(r"<answer>(-?\d+)</answer>", completion.text)
        return Verdict(float(len(found) == 1 and abs(int(found[0]) - int(task.answer)) <= 1))


@register_env("audit-tolerant", replace=True)
def audit_tolerant():
    return _env("audit-tolerant", WithinOne())


@register_env("audit-strict", replace=True)
def audit_strict():
    return _env("audit-strict", StrictAnswer())


@register_env("audit-tags", replace=True)
def audit_tags():
    return _env("audit-tags", TagsAgree())


@register_env("audit-last-tags", replace=True)
def audit_last_tags():
    return _env("audit-last-tags", LastTags())


@pytest.fixture
def own_strategies():
    """Strategies a test registers are gone after it (the built-in audits run rlvr's own)."""
    from rlvr.audit.registry import list_strategies as discover
    from rlvr.audit.strategy import _strategies
    discover()
    saved = dict(_strategies)
    yield
    _strategies.clear()
    _strategies.update(saved)


def _audit(env, **kw):
    return run_audit(AuditConfig(env, n=kw.pop("n", 2), workers=kw.pop("workers", 0), **kw))


def test_a_weak_environment_is_caught():
    report = _audit("audit-weak")
    by_name = {r.name: r for r in report.results}
    assert report.kind == "answer"
    # a reward that looks for the gold anywhere pays every dressing that mentions it
    for name in ("hedge", "doubt-clause", "all-options", "gold-in-think",
                 "gold-then-wrong-final", "truncated-ramble", "latex-tricks"):
        assert by_name[name].result == "REWARDED", name
        assert by_name[name].mean_reward > 0 and by_name[name].example["score"] == 1.0
    # ... but not a wrong value alone: the wrong answers really are wrong
    assert by_name["wrong-perfect-format"].result == "pass"
    assert by_name["wrong-perfect-format"].rewarded == 0
    assert by_name["early-exit"].result == "skipped" and "code" in by_name["early-exit"].note


def test_a_strict_environment_passes():
    report = _audit("audit-strict", n=3)
    ran = [r for r in report.results if r.result != "skipped"]
    assert report.findings == [], report.render()
    assert {r.name for r in ran} >= {"hedge", "gold-notation", "gold-reworded", "stall"}
    legit = [r for r in ran if r.legit]
    assert legit and all(r.solved == r.attempts > 0 for r in legit)


def test_an_environment_accepting_more_than_the_gold_gets_a_caveat():
    report = _audit("audit-tolerant", strategies="wrong-perfect-format,hedge")
    assert report.findings == ["wrong-perfect-format"]
    assert report.caveats and "accepts values other than the gold" in report.caveats[0]
    assert "caveat: wrong-perfect-format solved 2 of 6" in report.render()
    assert not _audit("audit-strict", strategies="wrong-perfect-format").caveats


def test_exit_code_and_json_report(capsys, tmp_path):
    assert main(["audit", "--env", "audit-strict", "-n", "2", "--workers", "0"]) == 0
    assert "findings: none" in capsys.readouterr().out
    out = tmp_path / "audit.json"
    assert main(["audit", "--env", "audit-weak", "-n", "2", "--workers", "0",
                 "--json", str(out)]) == 1
    assert "REWARDED" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert set(report) == {"env", "env_args", "kind", "tasks", "versions", "findings", "passed",
                           "caveats", "strategies"}
    assert report["caveats"] == []
    assert report["passed"] is False and "hedge" in report["findings"]
    assert report["tasks"] == ["toy/3", "toy/4"]
    row = next(s for s in report["strategies"] if s["name"] == "hedge")
    assert set(row) == {"name", "legit", "result", "attempts", "mean_reward", "rewarded",
                        "solved", "statuses", "p99_s", "example", "note"}
    assert set(row["example"]) == {"task", "completion", "finish_reason", "score", "status",
                                   "reason"}
    assert row["statuses"] == {"ok": row["attempts"]}
    assert main(["audit", "--env", "audit-weak", "-n", "1", "--workers", "0", "--json", "-",
                 "--strategies", "hedge"]) == 1
    assert json.loads(capsys.readouterr().out)["findings"] == ["hedge"]


def test_bad_usage_is_one_line_and_exit_2(capsys):
    assert main(["audit", "--env", "audit-strict", "--workers", "0", "--strategies", "nope*"]) == 2
    assert "no strategy matches 'nope*'; registered: " in capsys.readouterr().err
    assert main(["audit", "--env", "no-such-env"]) == 2
    assert main(["audit", "--env", "audit-strict", "--kind", "poem", "--workers", "0"]) == 2
    assert main(["audit", "--list"]) == 0
    assert "hedge" in capsys.readouterr().out


def test_a_user_strategy_registers_and_runs(own_strategies):
    @register_strategy("test-shout-gold", kinds=("answer",), replace=True)
    def shout(case):
        """A wrong answer, then the gold shouted."""
        return [case.dress(case.wrong()) + f" {case.gold}!"]

    @register_strategy("test-gold-as-words", kinds=("answer",), legit=True, replace=True)
    def as_words(case):
        """The gold with a unit (the strict toy reward refuses it)."""
        return [case.dress(f"{case.gold} apples")]

    @register_strategy("test-broken", kinds=("answer",), replace=True)
    def broken(case):
        raise RuntimeError("my bug")

    assert "test-shout-gold" in {s.name for s in list_strategies()}
    weak = {r.name: r for r in _audit("audit-weak", strategies="test-*").results}
    assert weak["test-shout-gold"].result == "REWARDED"
    assert weak["test-broken"].result == "BROKEN" and "my bug" in weak["test-broken"].note
    strict = {r.name: r for r in _audit("audit-strict", strategies="test-*").results}
    assert strict["test-shout-gold"].result == "pass"
    assert strict["test-gold-as-words"].result == "REFUSED"
    assert strict["test-gold-as-words"].example["completion"].endswith("apples</answer>")
    with pytest.raises(ValueError, match="already registered"):
        register_strategy("test-shout-gold")(lambda case: [])


def test_an_attempt_that_hangs_the_reward_escapes_through_the_pool(own_strategies):
    import envs_for_tests  # noqa: F401  (registers test-hang where workers can import it)

    @register_strategy("test-hang-it", kinds=("answer",), replace=True)
    def hang_it(case):
        """Make the toy reward hang."""
        return ["hang"]

    report = run_audit(AuditConfig("test-hang", n=1, workers=1, deadline_s=1.0,
                                   strategies="test-hang-it,wrong-perfect-format"))
    by_name = {r.name: r for r in report.results}
    assert by_name["test-hang-it"].result == "ESCAPED"
    assert by_name["test-hang-it"].statuses == {"timeout": 1}
    assert by_name["wrong-perfect-format"].result == "pass"


@pytest.mark.parametrize("gold", ["35", "-14282", "0.50", "1,234", "\\frac{5}{6}", "2, 3",
                                  "(2, \\infty)", "olleh", "True", "B", "a b c", "x",
                                  "-0.0013674811612376526", "B → B → B → B"])
def test_wrong_values_differ_from_the_gold(gold):
    wrongs = [perturb(gold, k) for k in range(4)]
    assert gold not in wrongs and len(set(wrongs)) == 4
    if re.fullmatch(r"-?[\d,]+(\.\d+)?", gold):
        assert all(Fraction(w) != Fraction(gold.replace(",", "")) for w in wrongs)


def test_the_docs_examples_run(own_strategies, capsys):
    # docs/audit.md's Python blocks: the API call and the two user strategies, then an audit
    # that uses them
    text = (Path(__file__).parent.parent / "docs" / "audit.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    namespace = {}
    for block in blocks:
        exec(block, namespace)
    assert "rlvr audit: arithmetic" in capsys.readouterr().out
    by_name = {r.name: r for r in _audit("audit-strict", strategies="units-hedge,gold-in-words")
               .results}
    assert by_name["units-hedge"].result == "pass"
    assert by_name["gold-in-words"].result == "REFUSED"       # the strict toy wants a number


def test_doctests():
    import doctest

    import rlvr.audit.strategy
    assert doctest.testmod(rlvr.audit.strategy).failed == 0


def test_kinds_are_read_from_the_tasks():
    from rlvr.envs.registry import load_env
    kinds = {}
    for name in ("arithmetic", "json-schema", "ifeval-style", "think-format", "code"):
        env = load_env(name, check=False)
        kinds[name] = task_kind(env, env.sample(1)[0])
    assert kinds == {"arithmetic": "answer", "json-schema": "json",
                     "ifeval-style": "instructions", "think-format": "format", "code": "code"}
    assert [s.name for s in select("hedge, gold-re*,gold-n*")] == [
        "gold-notation", "gold-reworded", "hedge"]     # legitimate forms first


# --------------------------------------------------------------------------- built-in envs

def test_every_builtin_environment_is_audited_or_named():
    from rlvr.envs import BUILTIN_MODULES
    names = {n for ns in BUILTIN_MODULES.values() for n in ns if not n.startswith("reasoning-gym")}
    assert names - {audited(k) for k in EXPECTED_FINDINGS} == set(NOT_AUDITED)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(2) as p:
        yield p


def audited(key: str) -> str:
    """The environment an EXPECTED_FINDINGS key audits (`code (docker)`: `code`)."""
    return AUDITED_AS.get(key, key.partition(" (")[0])


@pytest.mark.parametrize("env", sorted(EXPECTED_FINDINGS))
def test_builtin_environment_audit(env, pool):
    args = BUILTIN_ARGS.get(env, {})
    if args.get("backend") == "docker":       # as tests/sandbox_support.py: skip without an
        from rlvr.sandbox import SandboxUnavailable   # engine, except in CI
        from rlvr.sandbox.docker import build_image
        try:
            build_image()
        except SandboxUnavailable as exc:
            if os.environ.get("RLVR_REQUIRE_DOCKER"):
                raise
            pytest.skip(f"Docker engine unavailable: {exc}")
    report = run_audit(AuditConfig(audited(env), env_args=args, n=TASKS_FOR.get(env, N_TASKS)),
                       pool=pool)
    ran = [r for r in report.results if r.result != "skipped"]
    assert any(r.legit for r in ran) and any(not r.legit for r in ran), report.render()
    assert all(r.attempts > 0 for r in ran if r.result != "BROKEN")
    assert not [r.name for r in report.results if r.result == "BROKEN"], report.render()
    maybe = LOAD_DEPENDENT.get(env, set())
    expected = EXPECTED_FINDINGS[env] | OPEN_HOLES.get(env, set())
    assert set(report.findings) - maybe == expected - maybe, report.render()


def test_the_memory_thief_finds_a_program_left_in_memory():
    # outside any sandbox, in a fresh process: the gold program's text is in memory (the gold
    # completion was built), so the thief must find it and answer right -- the strategy is a
    # real attack, and it scores 0 in the sandbox only because no earlier run is visible there.
    # A fresh process, not this one: after hundreds of tests this process's anonymous memory
    # is merged into regions larger than the thief reads (64 MiB), and it found nothing there.
    import subprocess
    import sys
    import textwrap
    check = textwrap.dedent("""
        from rlvr.audit.registry import get_strategy
        from rlvr.audit.strategy import make_case
        from rlvr.envs.registry import load_env
        from rlvr.verifiers.code import extract_code
        env = load_env("code", check=False, pooled=False)
        case = make_case(env, env.get_task("code/add"), "code")
        attempts = get_strategy("sibling-theft").attempts(case)
        assert [a.plant for a in attempts] == [True, True, False, False]
        namespace = {}
        exec(extract_code(attempts[2].text), namespace)
        print(namespace["add"](2, 3))
    """)
    proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.split()[-1:] == ["5"], proc.stderr[-2000:]


def _host_thief(case):
    """The read-host program that searches the host's files, as a namespace (run here, outside
    any sandbox)."""
    from rlvr.audit.registry import get_strategy
    from rlvr.verifiers.code import extract_code
    namespace = {}
    exec(extract_code(get_strategy("read-host").attempts(case)[1].text), namespace)
    return namespace


def test_the_host_thief_finds_the_task_rows_on_disk(tmp_path, monkeypatch):
    # outside the sandbox the rows rlvr ships are readable, so the thief must find the
    # reference solution of `add` there (in the sandbox the same program finds nothing) --
    # whatever clutter the working directory and home hold: more row files than the thief
    # reads (3000) must not hide the package's own data, which it reads first.
    from rlvr.audit.strategy import make_case
    from rlvr.envs.registry import load_env
    junk = tmp_path / "junk"
    junk.mkdir()
    for i in range(3100):
        (junk / f"rows{i:05d}.jsonl").write_text('{"solution": "def other(): pass"}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    env = load_env("code", check=False, pooled=False)
    thief = _host_thief(make_case(env, env.get_task("code/add"), "code"))
    assert thief["add"](2, 3) == 5
    import rlvr
    files = list(thief["_files"]())
    package = os.path.dirname(rlvr.__file__)
    assert len(files) == 3000 and files[0].startswith(package + os.sep), files[:3]
    assert os.path.join(package, "data", "code_samples.jsonl") in files[:50]
    assert files == list(thief["_files"]())          # the same files, in the same order


def test_strategies_come_from_the_entry_point_group(monkeypatch, own_strategies):
    # a third-party package lists a module in `rlvr.audit_strategies`; discovery imports it
    import importlib.metadata

    import rlvr.audit.registry as registry

    class EntryPoint:
        name = "theirs"

        def load(self):
            @register_strategy("test-from-entry-point", kinds=("answer",), replace=True)
            def theirs(case):
                """Registered by a package."""
                return [case.dress(case.wrong())]
            return theirs

    def entry_points(group):
        return [EntryPoint()] if group == "rlvr.audit_strategies" else []

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setattr(registry._discover, "_done", False)
    assert registry.get_strategy("test-from-entry-point").description == "Registered by a package."
    with pytest.raises(registry.UnknownStrategyError, match="registered: "):
        registry.get_strategy("nope")


def test_strategies_for_other_kinds_are_one_line_of_the_table():
    report = _audit("audit-strict", n=1)
    other = [r.name for r in report.results if r.note.startswith("applies to")]
    assert len(other) >= 8
    table = report.render(examples=False).splitlines()
    assert not [line for line in table if line.split()[:1] and line.split()[0] in other]
    folded = [line for line in table if line.startswith("skipped")]
    assert folded == [f"skipped (not for answer environments, {len(other)}): "
                      + ", ".join(other)]


# --------------------------------------------------------------------------- the final answer,
# one-sided identities, unconvertible asserts: each new strategy against a stand-in reader that
# has the hole (it must be REWARDED) and one that does not (it must pass)

def test_corrections_and_retractions_are_found_in_a_reader_deaf_to_them():
    names = "answer-then-*,negated-answer,many-copies-hedge"
    deaf = {r.name: r for r in _audit("audit-tags", strategies=names).results}
    assert deaf["answer-then-correction"].result == "REWARDED"
    assert deaf["answer-then-correction"].rewarded == deaf["answer-then-correction"].attempts
    assert deaf["answer-then-retraction"].result == "REWARDED"
    assert deaf["answer-then-confirmation"].result == "pass"
    strict = {r.name: r for r in _audit("audit-strict", strategies=names).results}
    assert {n: r.result for n, r in strict.items()} == dict.fromkeys(strict, "pass")
    confirmed = strict["answer-then-confirmation"]
    assert confirmed.solved == confirmed.attempts == 6          # a re-check keeps the answer
    assert strict["answer-then-correction"].statuses == {"ok": 12}


def test_negated_answers_and_many_copies_hedges_are_found():
    weak = {r.name: r for r in _audit("audit-weak", strategies="negated-answer").results}
    assert weak["negated-answer"].result == "REWARDED"
    windowed = {r.name: r for r in _audit("audit-last-tags", strategies="many-copies-hedge")
                .results}
    hedge = windowed["many-copies-hedge"]
    assert hedge.result == "REWARDED" and hedge.rewarded == 2    # 100 wrong then 64 right
    assert hedge.example["completion"].endswith("<answer>21</answer>")     # the gold of toy/3
    for env in ("audit-tags", "audit-strict"):                   # every tag read: a hedge
        assert _audit(env, strategies="negated-answer,many-copies-hedge").findings == []


def test_the_final_answer_strategies_state_a_wrong_value_or_none():
    from rlvr.audit.registry import get_strategy
    from rlvr.audit.strategy import make_case
    from rlvr.envs.registry import load_env
    env = load_env("audit-strict")
    case = make_case(env, env.sample(1)[0], "answer")
    g, w = case.gold, case.wrong()
    for text in get_strategy("answer-then-correction").attempts(case):
        assert text.text.startswith(case.dress(g)) and w in text.text[len(case.dress(g)):]
    for text in get_strategy("answer-then-retraction").attempts(case):
        assert w not in text.text and text.text.startswith(case.dress(g))


class SymbolicAt(BaseReward):
    """The `<answer>` expression equals the gold at every assignment of its variables to
    `points` (math-verify's LaTeX parser): points in a small positive interval are a one-sided
    sampler, points across the real line are not."""
    name = "symbolic_at"

    def __init__(self, points):
        self.points = points

    def _score(self, task, completion):
        import itertools

        from latex2sympy2_extended import latex2sympy
        tags = re.findall(r"<answer>(.*?)</answer>", completion.text.rpartition("</think>")[2],
                          re.S)
        if len({t.strip() for t in tags}) != 1:
            return Verdict(0.0, "unparsed")
        try:
            got, want = latex2sympy(tags[0].strip()), latex2sympy(task.answer)
        except Exception:
            return Verdict(0.0, "unparsed")
        names = sorted(got.free_symbols | want.free_symbols, key=str)
        for point in itertools.product(self.points, repeat=len(names)):
            subs = dict(zip(names, point))
            try:
                a, b = complex(got.evalf(subs=subs)), complex(want.evalf(subs=subs))
            except (TypeError, ValueError, ZeroDivisionError):
                return Verdict(0.0, reason="undefined at a sample point")
            if abs(a - b) > 1e-9 * max(1.0, abs(b)):
                return Verdict(0.0)
        return Verdict(1.0)


SYMBOLIC = [("Simplify $\\sqrt{x^2}$ for real $x$.", "|x|"), ("Write $x$ plainly.", "x"),
            ("Simplify $\\sqrt{(x-3)^2}$.", "|x-3|"), ("Simplify $\\max(x, 2)$.", "\\max(x, 2)"),
            ("For $x > 0$, simplify $\\sqrt{x^2}$.", "x")]


def _symbolic_env(name, points):
    tasks = [Task(f"sym/{i}", prompt=[{"role": "user", "content": q}], answer=g)
             for i, (q, g) in enumerate(SYMBOLIC)]
    return Environment(name, RowSource({"train": tasks}), [(SymbolicAt(points), 1.0)],
                       gold=lambda t: f"<think>I simplify.</think> <answer>{t.answer}</answer>")


@register_env("audit-positive-sampler", replace=True)
def audit_positive_sampler():
    return _symbolic_env("audit-positive-sampler", (1.1, 1.5, 1.9))


@register_env("audit-real-line-sampler", replace=True)
def audit_real_line_sampler():
    return _symbolic_env("audit-real-line-sampler", (-41.3, -2.7, -0.3, 0.0, 0.4, 1.5, 57.1))


def test_one_sided_identities_are_found_in_a_sampler_of_one_side():
    names = "one-sided-identity,gold-reworded"
    loose = {r.name: r for r in _audit("audit-positive-sampler", n=5, strategies=names).results}
    assert loose["one-sided-identity"].result == "REWARDED", loose
    assert loose["gold-reworded"].result == "pass"
    strict = _audit("audit-real-line-sampler", n=5, strategies=names)
    assert strict.findings == [], strict.render()
    sided = next(r for r in strict.results if r.name == "one-sided-identity")
    assert sided.attempts >= 15 and sided.statuses.get("ok") == sided.attempts


def test_one_sided_forms_differ_from_the_gold_and_skip_a_stated_domain():
    import random

    from rlvr.audit.identities import one_sided_forms
    from rlvr.audit.registry import get_strategy
    from rlvr.audit.strategy import make_case
    rng = random.Random(0)
    assert "\\sqrt{\\left(x\\right)^{2}}" in one_sided_forms("x", rng)
    assert "\\left(-\\left(x-a\\right)\\right)" in one_sided_forms("\\left|x-a\\right|", rng)
    assert "\\left(2\\right)" in one_sided_forms("\\max(x, 2)", rng)
    assert one_sided_forms("x^2 + 1", rng) == ["\\left(x^2 + 1\\right) \\cdot "
                                                "\\frac{\\left|x\\right|}{x}"]
    assert one_sided_forms("3\\sqrt{2}", rng) == [] == one_sided_forms("\\frac{5}{6}", rng)
    env = audit_real_line_sampler()
    stated = make_case(env, env.get_task("sym/4"), "answer")       # "For x > 0": x = sqrt(x^2)
    assert get_strategy("one-sided-identity").attempts(stated) == []


MIXED = Path(__file__).parent / "fixtures" / "audit" / "mbpp_mixed_asserts.jsonl"
"""MBPP-style rows whose asserts mix the plain `f(x) == y` shape with others (`math.isclose`,
`set(...)`, `sorted(...)`), as MBPP's published test lists do."""


class RunsAsserts(BaseReward):
    """Runs the program's last ```python block and then the task's asserts, in this process
    (test programs only); `plain_only` keeps only the asserts that start `assert f(`, as a
    converter that drops the shapes it cannot read."""
    name = "runs_asserts"

    def __init__(self, plain_only: bool):
        self.plain_only = plain_only

    def _score(self, task, completion):
        blocks = re.findall(r"```(?:python|py)?\n(.*?)```", completion.text, re.S)
        if not blocks:
            return Verdict(0.0, "unparsed")
        entry = task.metadata["entry_point"]
        tests = [t for t in task.answer["tests"]
                 if not self.plain_only or t.startswith(f"assert {entry}(")]
        ns = {}
        try:
            exec(task.answer["setup"] + "\n" + blocks[-1], ns)
            for test in tests:
                exec(test, ns)
        except Exception as exc:
            return Verdict(0.0, reason=f"{type(exc).__name__}: {exc}"[:200])
        return Verdict(1.0, reason=f"{len(tests)}/{len(tests)} passed")


def _asserts_env(name, plain_only):
    tasks = []
    for line in MIXED.read_text().splitlines():
        row = json.loads(line)
        entry = re.search(r"def (\w+)", row["code"]).group(1)
        tasks.append(Task(f"mixed/{row['task_id']}", prompt=[{"role": "user", "content":
                          row["text"] + "\n" + "\n".join(row["test_list"])}],
                          answer={"tests": row["test_list"], "setup": row["test_setup_code"]},
                          metadata={"entry_point": entry, "solution": row["code"]}))
    return Environment(name, RowSource({"train": tasks}), [(RunsAsserts(plain_only), 1.0)],
                       gold=lambda t: "<think>I write the function.</think>\n```python\n"
                                      f"{t.metadata['solution']}\n```")


@register_env("audit-plain-asserts", replace=True)
def audit_plain_asserts():
    return _asserts_env("audit-plain-asserts", True)


@register_env("audit-every-assert", replace=True)
def audit_every_assert():
    return _asserts_env("audit-every-assert", False)


def test_a_program_for_the_plain_asserts_only_is_found_where_the_others_are_dropped():
    names = "unconvertible-asserts,code-reworded"
    dropped = {r.name: r for r in _audit("audit-plain-asserts", strategies=names).results}
    assert dropped["unconvertible-asserts"].result == "REWARDED"
    assert dropped["unconvertible-asserts"].rewarded == 2 and dropped["code-reworded"].result == "pass"
    every = {r.name: r for r in _audit("audit-every-assert", strategies=names).results}
    assert every["unconvertible-asserts"].result == "pass", every
    assert every["unconvertible-asserts"].attempts == 2
    assert every["code-reworded"].solved == every["code-reworded"].attempts == 8


def test_a_task_with_plain_asserts_only_gets_no_such_program():
    from rlvr.audit.registry import get_strategy
    from rlvr.audit.strategy import make_case
    from rlvr.envs.registry import load_env
    env = load_env("mbpp", data=str(FIX / "mbpp.jsonl"), check=False, pooled=False)
    case = make_case(env, env.sample(1, split="test")[0], "code")
    assert get_strategy("unconvertible-asserts").attempts(case) == []   # it would be right


def test_open_holes_name_audited_environments_and_are_not_accepted():
    assert set(OPEN_HOLES) <= set(EXPECTED_FINDINGS)
    assert all(not (OPEN_HOLES[env] & EXPECTED_FINDINGS[env]) for env in OPEN_HOLES)
    assert not any("prompt-echo" in found for found in EXPECTED_FINDINGS.values())
