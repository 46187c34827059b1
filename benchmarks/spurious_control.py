"""The spurious-reward control beside the main job: how much of its change the verifier explains.

    python benchmarks/spurious_control.py --run                 # the three arms, one after another
    python benchmarks/spurious_control.py verifier=runs/r1zero random=runs/ctl_random_0 \
        format=runs/ctl_format_0                                # compare finished run folders

The arms are the main job (`python -m rlvr.trainer.recipes.r1zero`) three times on one seed:
`verifier` (its rewards, accuracy + think format at 1 : 0.5), `random` (`control=random`: each
sample's reward is a coin whose heads rate is the step's mean verifier reward, so the reward's
scale is kept and its information about the answer is gone) and `format` (`control=format`:
the think-format reward alone). Every arm logs the verifier's rewards whatever it trains on, and
the recipe evaluates the base model and the trained policy greedily on the same 100 held-out
problems. Shao et al. 2025 ("Spurious Rewards: Rethinking Training Signals in RLVR") saw random
rewards lift Qwen2.5-Math by about 21 points on MATH-500 and do little for other families.

Writes benchmarks/results/spurious_control/{summary.md, summary.json, spurious_control.png} and
copies each arm's metrics.jsonl and eval.jsonl beside them.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "spurious_control"
ARMS = {"verifier": [], "random": ["control=random"], "format": ["control=format"]}
"""arm -> the main job's overrides."""


def read_arm(run: Path) -> dict:
    """One run folder's per-step verifier accuracy, think rate, entropy and its held-out evals."""
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "reward" in r]
    evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines() if x.strip()]
    by_step = {e["step"]: e for e in evals}
    last = max(by_step)
    return {"run": str(run),
            "accuracy": [r["rewards/numeric_match/mean"] for r in rows],
            "think": [r["rewards/think_format/mean"] for r in rows],
            "entropy": [r["entropy"] for r in rows],
            "trained_on": [r.get("control/reward", r["reward"]) for r in rows],
            "held_out_base": by_step[0]["pass@1"], "held_out_final": by_step[last]["pass@1"],
            "held_out_think_final": by_step[last].get("think/well_formed_rate"),
            "final_step": last}


def summary(arms: dict[str, dict]) -> str:
    """The comparison as a markdown table: training-side means and the held-out change."""
    lines = ["| arm | verifier accuracy, steps 1-2 -> 7-8 | think rate, steps 1-2 -> 7-8 | "
             "held-out greedy pass@1, base -> final | held-out well-formed (final) |",
             "|---|---|---|---|---|"]
    def ends(xs):
        return f"{sum(xs[:2]) / 2:.3f} -> {sum(xs[-2:]) / 2:.3f}"
    for name, a in arms.items():
        lines.append(f"| {name} | {ends(a['accuracy'])} | {ends(a['think'])} | "
                     f"{a['held_out_base']:.2f} -> {a['held_out_final']:.2f} "
                     f"({a['held_out_final'] - a['held_out_base']:+.2f}) | "
                     f"{a['held_out_think_final']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(arms: dict[str, dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for name, a in arms.items():
        steps = range(1, len(a["accuracy"]) + 1)
        axes[0].plot(steps, a["accuracy"], marker="o", label=name)
        axes[1].plot(steps, a["think"], marker="o", label=name)
    axes[0].set(title="verifier accuracy of the step's samples", xlabel="step")
    axes[1].set(title="think well-formed rate", xlabel="step")
    names = list(arms)
    x = range(len(names))
    axes[2].bar([i - 0.18 for i in x], [arms[n]["held_out_base"] for n in names], 0.36,
                label="base")
    axes[2].bar([i + 0.18 for i in x], [arms[n]["held_out_final"] for n in names], 0.36,
                label="trained")
    axes[2].set_xticks(list(x), names)
    axes[2].set(title="held-out greedy pass@1 (100 problems)", ylim=(0, 1))
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def run_arms(out_root: Path) -> dict[str, Path]:
    """Train the three arms, one after another, with the main job's recipe."""
    runs = {}
    for name, overrides in ARMS.items():
        runs[name] = out_root / f"ctl_{name}_0"
        subprocess.run([sys.executable, "-m", "rlvr.trainer.recipes.r1zero", "-o",
                        str(runs[name]), "--overwrite", *overrides], check=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("arms", nargs="*", help="NAME=RUN_FOLDER for each arm to compare")
    p.add_argument("--run", action="store_true", help="train the three arms first (into runs/)")
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    if args.run:
        runs = run_arms(ROOT / "runs")
    else:
        bad = [a for a in args.arms if "=" not in a]
        if not args.arms or bad:
            p.error("give NAME=RUN_FOLDER for each arm (or --run to train them)")
        runs = {a.split("=", 1)[0]: Path(a.split("=", 1)[1]) for a in args.arms}
    missing = [str(r) for r in runs.values() if not (r / "eval.jsonl").exists()]
    if missing:
        p.error(f"no finished run (eval.jsonl) in {', '.join(missing)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    arms = {name: read_arm(run) for name, run in runs.items()}
    for name, run in runs.items():
        (out / name).mkdir(exist_ok=True)
        for f in ("metrics.jsonl", "eval.jsonl"):
            shutil.copyfile(run / f, out / name / f)
    text = summary(arms)
    (out / "summary.md").write_text(text)
    (out / "summary.json").write_text(json.dumps(arms, indent=1) + "\n")
    plot(arms, out / "spurious_control.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
