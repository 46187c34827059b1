"""Math-Verify's own test suite as whole-completion checks, scored by rlvr's math verifier.

    python benchmarks/math_verify_suite.py TESTS_DIR             # agreement + every disagreement
    python benchmarks/math_verify_suite.py TESTS_DIR --jsonl out # the converted cases, one a line

TESTS_DIR is the `tests/` folder of https://github.com/huggingface/Math-Verify (not shipped in
its wheel). A case is a whole-completion equivalence check when its test compares two whole
strings with the library's defaults: `compare_strings(gold, pred, ...)` or
`verify(parse(gold), parse(pred))`, with strict comparison and no set/relation switch. Rows run
at a non-default float precision are kept when the precision cannot change their verdict (an
exact comparison); rows that need a looser rounding (`0.33` = 1/3 at 2 digits) are left out and
counted, since rlvr's decimal rule is fixed (docs/math.md). The parametrize lists are read with
`ast` (values evaluated with only `math` in scope), never by importing the test modules.
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


def convert(tests_dir: Path) -> tuple[list[dict], list[dict]]:
    """(cases kept, cases left out with why) from every parametrized gold/pred test."""
    kept, left = [], []
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
                    why = _left_out(row, kwargs)
                    (left if why else kept).append(dict(case, why=why) if why else case)
    return kept, left


def _left_out(row: dict, kwargs: dict) -> str:
    def arg(name, default):
        v = kwargs.get(name, default)
        return row.get(v, default) if isinstance(v, str) and v in row else v
    if arg("strict", True) is not True:
        return "strict=False"
    if arg("allow_set_relation_comp", False):
        return "allow_set_relation_comp=True"
    precision = arg("precision", 6)
    if precision < 5:
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
    kept, left = convert(args.tests_dir)
    if args.jsonl:
        args.jsonl.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in kept))
    verdicts = rlvr_scores(kept)
    wrong = [(c, v) for c, v in zip(kept, verdicts) if int(v.score == 1.0) != c["expected"]]
    print(f"{len(kept)} whole-completion cases ({len(left)} left out: "
          f"{', '.join(sorted({c['why'] for c in left}))}); rlvr agrees on "
          f"{len(kept) - len(wrong)}/{len(kept)}")
    for c, v in wrong:
        print(f"- {c['source']}[{c['index']}] expected {c['expected']}, rlvr {v.score:g} "
              f"({v.status}: {v.reason or 'equal'}; read {str(v.extracted)[:60]!r})\n"
              f"    gold {c['gold'][:100]!r}\n    pred {c['completion'][:140]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
