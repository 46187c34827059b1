"""Tables and plots of the seed-claims GPU run (benchmarks/seed_claims_gpu.sh): entropy collapse
and its remedies, and the normaliser biases of GRPO vs Dr. GRPO.

    python benchmarks/seed_claims_report.py RUNS_DIR [RUNS_DIR ...] --out benchmarks/results/seed_claims_gpu

RUNS_DIR holds the arms' run folders (runs.tgz of the GPU run, unpacked). Writes entropy.png,
normalisers.png, summary.json and summary.md to --out, and copies each arm's metrics.jsonl (and the
normaliser arms' samples, gzipped) beside them so the figures can be redrawn from the repository.

Definitions used below: a completion is *right* when its reward includes the accuracy reward
(reward >= 1: accuracy weighs 1, the think format 0.5); its length is counted in the policy
tokenizer's tokens. A group is the 8 completions of one prompt at one step; its solve rate is
right / 8 and its advantage scale is the mean |advantage| over its 8 completions.
"""
from __future__ import annotations

import argparse
import functools
import gzip
import json
import math
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

ENTROPY_ARMS = ("ent_grpo", "ent_bonus", "ent_cliphigh", "ent_clipcov", "ent_klcov",
                "mu2_grpo", "mu2_cliphigh", "mu2_clipcov", "mu2_klcov")
NORM_ARMS = ("norm_grpo", "norm_dr_grpo", "norm_no_std", "norm_no_len")
ACCURACY = "rewards/numeric_match/mean"
TAIL = 5            # steps averaged at each end of a run


def family(name: str) -> str:
    """Arms are compared within a family (same settings but one), up to the family's common step."""
    return name.split("_")[0]


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def find_arms(roots: list[Path]) -> dict[str, Path]:
    arms = {}
    for root in roots:
        for d in sorted(root.iterdir()):
            if (d / "metrics.jsonl").exists() and d.name in ENTROPY_ARMS + NORM_ARMS:
                arms[d.name] = d
    return arms


def mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def ends(rows: list[dict], key: str) -> tuple[float | None, float | None]:
    """Mean of `key` over the first and the last TAIL steps (one step of 32 samples is noisy)."""
    return mean(r.get(key) for r in rows[:TAIL]), mean(r.get(key) for r in rows[-TAIL:])


def fit_exp_entropy(rows: list[dict]) -> dict:
    """Least squares of R = -a e^H + b (Cui et al. 2025) over the steps: accuracy R against the
    policy's mean token entropy H."""
    xs = [math.exp(r["entropy"]) for r in rows]
    ys = [r[ACCURACY] for r in rows]
    try:
        slope, b = statistics.linear_regression(xs, ys)
        r = statistics.correlation(xs, ys)
    except statistics.StatisticsError:      # a flat entropy or accuracy: no law to fit
        return {"a": None, "b": None, "r2": None, "steps": len(rows)}
    return {"a": -slope, "b": b, "r2": r * r, "steps": len(rows)}


@functools.lru_cache(maxsize=None)
def _logged(folder: Path) -> tuple:
    """An arm's metrics rows, read once however often the report asks."""
    return tuple(read_jsonl(folder / "metrics.jsonl"))


def common_steps(arms: dict[str, Path]) -> dict[str, int]:
    """Each family's last step that all its arms reached (the runs were stopped by a wall budget,
    so faster arms got further; comparing their last steps would compare different steps)."""
    out: dict[str, int] = {}
    for name, d in arms.items():
        n = len(_logged(d))
        out[family(name)] = min(out.get(family(name), n), n)
    return out


def metrics(arms: dict[str, Path], name: str) -> list[dict]:
    """The arm's steps up to its family's common step."""
    return list(_logged(arms[name])[:common_steps(arms)[family(name)]])


def entropy_summary(arms: dict[str, Path]) -> dict:
    out = {}
    for name in ENTROPY_ARMS:
        if name not in arms:
            continue
        rows = metrics(arms, name)
        out[name] = {"steps": len(rows), "entropy": ends(rows, "entropy"),
                     "accuracy": ends(rows, ACCURACY),
                     "length": ends(rows, "completions/mean_length"),
                     "clip_high": ends(rows, "clip_ratio/high_mean"),
                     "fit": fit_exp_entropy(rows)}
    return out


def lengths(samples: list[dict], tokenizer) -> list[int]:
    return [len(ids) for ids in tokenizer([s["completion"] for s in samples],
                                          add_special_tokens=False)["input_ids"]]


def norm_summary(arms: dict[str, Path], tokenizer) -> dict:
    """Per arm and step: mean length of right and wrong completions; per group: solve rate and
    advantage scale."""
    out = {}
    for name in NORM_ARMS:
        if name not in arms or not (arms[name] / "samples.jsonl").exists():
            continue
        last = common_steps(arms)[family(name)]
        samples = [s for s in read_jsonl(arms[name] / "samples.jsonl") if s["step"] <= last]
        for s, n in zip(samples, lengths(samples, tokenizer)):
            s["tokens"] = n
        by_step, groups = defaultdict(lambda: ([], [])), defaultdict(list)
        for s in samples:
            by_step[s["step"]][0 if s["reward"] >= 1 else 1].append(s["tokens"])
            groups[(s["step"], s["task_id"])].append(s)
        steps = sorted(by_step)
        per_step = [{"step": k, "right_len": mean(by_step[k][0]), "wrong_len": mean(by_step[k][1]),
                     "wrong": len(by_step[k][1])} for k in steps]
        scale = [{"solve_rate": sum(s["reward"] >= 1 for s in g) / len(g),
                  "reward_spread": statistics.pstdev(s["reward"] for s in g),
                  "adv_scale": mean(abs(s["advantage"]) for s in g)}
                 for g in groups.values() if len(g) == 8]
        out[name] = {"steps": len(steps), "per_step": per_step, "groups": scale,
                     "wrong_len": (mean(r["wrong_len"] for r in per_step[:TAIL]),
                                   mean(r["wrong_len"] for r in per_step[-TAIL:])),
                     "adv_scale_by_solve_rate": _by_rate(scale)}
    return out


def _by_rate(groups: list[dict]) -> dict[str, dict]:
    """Mean advantage scale of the groups at each solve rate (groups whose rewards all agree
    carry no advantage and are left out)."""
    cells = defaultdict(list)
    for g in groups:
        if g["reward_spread"] > 0:
            cells[f"{g['solve_rate']:.3f}"].append(g["adv_scale"])
    return {k: {"groups": len(v), "adv_scale": mean(v)} for k, v in sorted(cells.items())}


def plot(ent: dict, norm: dict, arms: dict[str, Path], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name in ent:
        rows = metrics(arms, name)
        style = "--" if name.startswith("mu2") else "-"
        a1.plot([r["step"] for r in rows], [r["entropy"] for r in rows], style, label=name)
        a2.plot([r["step"] for r in rows], _smooth([r[ACCURACY] for r in rows]), style, label=name)
    a1.set(xlabel="step", ylabel="policy entropy (nats / token)", title="Entropy per step")
    a2.set(xlabel="step", ylabel="training accuracy (3-step mean)", title="Accuracy per step")
    a1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "entropy.png", dpi=110)
    plt.close(fig)

    fig, (b1, b2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, s in norm.items():
        b1.plot([r["step"] for r in s["per_step"]], _smooth([r["wrong_len"] for r in s["per_step"]]),
                label=name)
        rates = s["adv_scale_by_solve_rate"]
        b2.plot([float(k) for k in rates], [v["adv_scale"] for v in rates.values()], "o-", label=name)
    b1.set(xlabel="step", ylabel="tokens (3-step mean)", title="Length of wrong completions")
    b2.set(xlabel="group solve rate (right of 8)", ylabel="mean |advantage| in the group",
           title="Advantage scale vs solve rate")
    b1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "normalisers.png", dpi=110)
    plt.close(fig)


def _smooth(ys: list, w: int = 3) -> list:
    ys = [y if y is not None else float("nan") for y in ys]
    return [sum(ys[max(0, i - w + 1):i + 1]) / len(ys[max(0, i - w + 1):i + 1]) for i in range(len(ys))]


def table(ent: dict, norm: dict) -> str:
    f = lambda v: "-" if v is None else f"{v:.3f}"
    lines = [f"| arm | steps | entropy, first {TAIL} -> last {TAIL} | accuracy | mean length | "
             "fit R = -a e^H + b: a, b, R^2 |", "|---|---|---|---|---|---|"]
    for name, s in ent.items():
        fit = s["fit"]
        lines.append(f"| {name} | {s['steps']} | {f(s['entropy'][0])} -> {f(s['entropy'][1])} | "
                     f"{f(s['accuracy'][0])} -> {f(s['accuracy'][1])} | "
                     f"{s['length'][0]:.1f} -> {s['length'][1]:.1f} | "
                     + ("-" if fit["a"] is None else
                        f"{fit['a']:.3f}, {fit['b']:.3f}, {fit['r2']:.2f}") + " |")
    lines += ["", f"| arm | steps | wrong completions' length, first {TAIL} -> last {TAIL} | "
              "advantage scale at solve rate 1/8, 4/8, 7/8 (groups) |", "|---|---|---|---|"]
    for name, s in norm.items():
        r = s["adv_scale_by_solve_rate"]
        cell = lambda k: (f"{r[k]['adv_scale']:.3f} ({r[k]['groups']})" if k in r else "-")
        lines.append(f"| {name} | {s['steps']} | {f(s['wrong_len'][0])} -> {f(s['wrong_len'][1])} | "
                     f"{cell('0.125')}, {cell('0.500')}, {cell('0.875')} |")
    return "\n".join(lines) + "\n"


def copy_raw(arms: dict[str, Path], out: Path) -> None:
    for name, d in arms.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        shutil.copy(d / "metrics.jsonl", out / name / "metrics.jsonl")
        for extra in ("eval.jsonl", "config.json"):
            if (d / extra).exists():
                shutil.copy(d / extra, out / name / extra)
        if name in NORM_ARMS and (d / "samples.jsonl").exists():
            with open(d / "samples.jsonl", "rb") as src, \
                    gzip.open(out / name / "samples.jsonl.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/seed_claims_gpu"))
    args = p.parse_args(argv)
    from transformers import AutoTokenizer
    from rlvr.trainer.models.smollm import smollm2_folder
    arms = find_arms(args.runs)
    if not arms:
        p.error(f"no arm folders (metrics.jsonl) in {', '.join(map(str, args.runs))}")
    args.out.mkdir(parents=True, exist_ok=True)
    ent = entropy_summary(arms)
    norm = norm_summary(arms, AutoTokenizer.from_pretrained(smollm2_folder(quiet=True)))
    plot(ent, norm, arms, args.out)
    if args.runs[0].resolve() != args.out.resolve():
        copy_raw(arms, args.out)
    (args.out / "summary.json").write_text(json.dumps(
        {"entropy": ent, "normalisers": {k: {kk: vv for kk, vv in v.items() if kk != "groups"}
                                         for k, v in norm.items()}}, indent=1) + "\n")
    (args.out / "summary.md").write_text(table(ent, norm))
    print(table(ent, norm))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
