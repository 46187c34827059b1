"""Math-Verify's own test suite as whole-completion checks, scored by rlvr's math verifier.

    python benchmarks/math_verify_suite.py TESTS_DIR             # agreement + every disagreement
    python benchmarks/math_verify_suite.py TESTS_DIR --jsonl out # the converted cases, one a line

TESTS_DIR is the `tests/` folder of https://github.com/huggingface/Math-Verify (not shipped in
its wheel). A case is a whole-completion equivalence check when its test compares two whole
strings: `compare_strings(gold, pred, ...)` or `verify(parse(gold), parse(pred))` (269 cases at
commit 5d148cf of the repository). Cases run with a non-default switch -- `strict=False`,
`allow_set_relation_comp=True`, float rounding other than 6 digits -- keep it in `setting`: rlvr has
no such switches, so where the switch decides the verdict the difference is one of convention
(docs/math.md lists each). The parametrize lists are read with `ast` (values evaluated with only
`math` in scope), never by importing the test modules.
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_GOLD, _PRED = ("gold",), ("pred",)
_EXPECTED = ("expected", "result")


def _value(node):
    return eval(compile(ast.Expression(node), "<case>", "eval"), {"math": math})  # noqa: S307


def _names(node) -> list[str]:
    text = _value(node)
    return [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]


def _call_kwargs(func: ast.FunctionDef) -> dict:
    """Keyword arguments of the compare_strings call in the test body (names stay names)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "compare_strings":
            return {k.arg: (k.value.id if isinstance(k.value, ast.Name) else _value(k.value))
                    for k in node.keywords}
    return {}


def convert(tests_dir: Path) -> list[dict]:
    """Every case of every parametrized gold/pred test, with its non-default `setting`."""
    cases = []
    for path in sorted(tests_dir.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            for deco in func.decorator_list:
                if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") ==
                        "parametrize"):
                    continue
                names = _names(deco.args[0])
                if not (set(names) >= {"gold", "pred"} and set(names) & set(_EXPECTED)):
                    continue
                kwargs = _call_kwargs(func)
                for k, elt in enumerate(deco.args[1].elts):
                    row = dict(zip(names, _value(elt)))
                    case = {"source": f"huggingface/Math-Verify:tests/{path.name}::{func.name}",
                            "index": k, "gold": row["gold"], "completion": row["pred"],
                            "expected": int(row.get("expected", row.get("result")))}
                    cases.append(dict(case, setting=_setting(row, kwargs)))
    return cases


def _setting(row: dict, kwargs: dict) -> str:
    def arg(name, default):
        v = kwargs.get(name, default)
        return row.get(v, default) if isinstance(v, str) and v in row else v
    if arg("strict", True) is not True:
        return "strict=False"
    if arg("allow_set_relation_comp", False):
        return "allow_set_relation_comp=True"
    precision = arg("precision", 6)
    if precision != 6:
        return f"float rounding to {precision} digits"
    return ""


def rlvr_scores(cases: list[dict]) -> list:
    from rlvr import Task
    from rlvr.pool import WorkerPool
    from rlvr.verifiers.math import MathReward
    with WorkerPool(2) as pool:
        reward = MathReward(pool=pool, symbolic="pool", deadline_s=20)
        return reward.score_batch([Task(str(i), answer=c["gold"]) for i, c in enumerate(cases)],
                                  [c["completion"] for c in cases])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tests_dir", type=Path)
    ap.add_argument("--jsonl", type=Path, help="write the converted cases here")
    args = ap.parse_args(argv)
    cases = convert(args.tests_dir)
    if args.jsonl:
        args.jsonl.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases))
    verdicts = rlvr_scores(cases)
    wrong = [(c, v) for c, v in zip(cases, verdicts) if int(v.score == 1.0) != c["expected"]]
    n_default = sum(not c["setting"] for c in cases)
    wrong_default = sum(not c["setting"] for c, _ in wrong)
    print(f"{len(cases)} whole-completion cases; rlvr agrees on {len(cases) - len(wrong)}; on "
          f"the {n_default} run with default settings, {n_default - wrong_default}")
    for c, v in wrong:
        print(f"- {c['source']}[{c['index']}]{' (' + c['setting'] + ')' if c['setting'] else ''}"
              f" expected {c['expected']}, rlvr {v.score:g} "
              f"({v.status}: {v.reason or 'equal'}; read {str(v.extracted)[:60]!r})\n"
              f"    gold {c['gold'][:100]!r}\n    pred {c['completion'][:140]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
