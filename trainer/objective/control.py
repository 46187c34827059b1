"""The spurious-reward control: the same run trained on a reward that carries none of the
verifier's information about the answer, to see how much of an improvement that information
explains.

Shao et al. 2025 ("Spurious Rewards: Rethinking Training Signals in RLVR") trained with random
rewards and with format-only rewards and found that they alone lift some model families by
many points (Qwen2.5-Math) and do nothing for others. `control` names the reward the update
trains on:

- `none`    the verifier's reward;
- `random`  a coin of the same mean as the verifier's reward in this step: of the N rows
            whose verdict counts, round(N (m - lo) / (hi - lo)) drawn at random get the step's
            highest verifier reward hi, the rest its lowest lo (m: the step's mean; for 0/1
            rewards a coin with P(1) = m). Drawn with a fixed count rather than N independent
            flips so every step's training reward has the verifier's mean exactly (to 1 / N),
            and seeded by (seed, step, the step's tasks and samples): reproducible;
- `format`  the environment's format reward alone (its format components' scores, weighted as
            the environment weighs them, or equally when it only logs them).

Only the verifier's score is replaced: shaping added to it (DAPO's overlong penalty) stays.
The verifier's reward is still what the run logs as `reward` (and `rewards/*`, the verdicts in
samples.jsonl); the reward trained on is logged as `control/reward`.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["CONTROLS", "RewardControl", "check_control", "format_components"]

CONTROLS = ("none", "random", "format")

_TAG = 0x5C0_1E5          # keeps the coin's seed stream apart from the sampling seeds'


def check_control(cfg) -> None:
    """Refuse a control the rest of the configuration would leak the verifier into."""
    if cfg.control not in CONTROLS:
        raise ValueError(f"control={cfg.control!r}; expected one of {list(CONTROLS)}")
    if cfg.control == "none":
        return
    if cfg.dynamic_sampling:
        raise ValueError(f"control={cfg.control!r} with dynamic_sampling: the kept groups would be "
                         "chosen by the verifier's reward; set dynamic_sampling=false")
    if cfg.advantage == "filter":
        raise ValueError(f"control={cfg.control!r} with advantage='filter': expert iteration keeps "
                         "completions by their verdict, not by a reward; use grpo, rloo or "
                         "reinforce")


def format_components(env) -> dict[str, float]:
    """{component name: weight} of the environment's format rewards (the parser-shape rewards
    of rlvr.verifiers.format, or any reward with `format_reward = True`), weights summing to 1
    (equal when the environment only logs them, at weight 0)."""
    from rlvr.verifiers.format import AnswerTag, BoxedPresent, ThinkFormat
    found = {r.name: float(w) for r, w in env.rewards
             if isinstance(r, (ThinkFormat, AnswerTag, BoxedPresent))
             or getattr(r, "format_reward", False)}
    total = sum(found.values())
    if total <= 0:
        return {n: 1.0 / len(found) for n in found}
    return {n: w / total for n, w in found.items() if w > 0}


@dataclass(frozen=True)
class RewardControl:
    """Which reward the update trains on (see the module docstring)."""
    kind: str = "none"
    seed: int = 0
    format_weights: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, cfg, env) -> "RewardControl":
        """The configured control for `env`; refused when `format` finds no format reward."""
        check_control(cfg)
        weights = ()
        if cfg.control == "format":
            weights = tuple(format_components(env).items())
            if not weights:
                raise ValueError(
                    f"control='format' needs a format reward and environment {env.name!r} has "
                    f"none (its rewards: {', '.join(r.name for r, _ in env.rewards)}); use "
                    f"control='random', or add one (env='think-format' with env_args={{base = "
                    f"'{env.name}'}})")
        return cls(cfg.control, cfg.seed, weights)

    def rewards(self, rollout, step: int, gather=lambda x: [x],
                rank: int = 0) -> tuple[torch.Tensor, dict]:
        """The rewards [N] the update trains on for `rollout` (rank `rank`'s rows), and the
        step's `control/*` metrics. `gather` collects every rank's object, in rank order (the
        coin is drawn over the global batch)."""
        if self.kind == "none":
            return rollout.rewards, {}
        scores = torch.tensor([_score(v.score) for v in rollout.verdicts], dtype=torch.float32)
        shaping = rollout.rewards - scores         # what was added to the verifier's score
        valid = rollout.valid.bool()
        if self.kind == "format":
            new = torch.tensor([self._format_score(v) for v in rollout.verdicts],
                               dtype=torch.float32)
        else:
            new = self._coin(scores, valid, step, _row_prints(rollout, valid), gather, rank)
        out = torch.where(valid, new + shaping, rollout.rewards)
        parts = gather((float(out[valid].sum()), int(valid.sum())))
        total, count = sum(p[0] for p in parts), sum(p[1] for p in parts)
        return out, {"control/reward": total / count if count else float("nan")}

    def _format_score(self, verdict) -> float:
        """The weighted format components of one verdict; a missing one (a failed verdict)
        scores 0."""
        return sum(w * _score(verdict.components.get(n)) for n, w in self.format_weights)

    def _coin(self, scores, valid, step: int, prints: list[int], gather, rank: int):
        """The coin for this rank's rows, drawn once over the whole batch (rows in rank order,
        so the same whatever the number of ranks)."""
        ranks = gather((scores[valid].tolist(), prints))
        every = np.array([s for r in ranks for s in r[0]], dtype=np.float64)
        batch = zlib.crc32(np.array([p for r in ranks for p in r[1]], dtype=np.uint32).tobytes())
        coin = np.zeros(len(every))
        if len(every):
            lo, hi = every.min(), every.max()
            coin[:] = lo
            if hi > lo:
                k = int(round(len(every) * (every.mean() - lo) / (hi - lo)))
                seq = np.random.SeedSequence([self.seed, _TAG, step, batch])
                coin[np.random.default_rng(seq).permutation(len(every))[:k]] = hi
        mine = sum(len(r[0]) for r in ranks[:rank])
        out = torch.zeros(len(scores))
        out[valid] = torch.tensor(coin[mine:mine + int(valid.sum())], dtype=torch.float32)
        return out


def _score(x) -> float:
    return float(x) if x is not None else 0.0


def _row_prints(rollout, valid) -> list[int]:
    """A checksum of each counted row's task and sampled tokens: they seed the coin with the
    step, so the coin of one step differs from the next even where the step count does not,
    and is the same for the same samples."""
    return [zlib.crc32(repr((rollout.tasks[i].id, rollout.completion_ids[i])).encode())
            for i in valid.nonzero().flatten().tolist()]

