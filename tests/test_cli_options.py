"""Each subcommand's options come from its config dataclass: every field has an option named as
the field (`--field-name`; other spellings only as aliases) with the field's default and its
docstring as help, converted by the one coercion `rlvr.usage.coerce`, so the two cannot drift;
`rlvr train --help` included."""
import argparse
import dataclasses
import typing

import pytest

from rlvr.cli import build_parser, main
from rlvr.cli.options import _scalar
from rlvr.sandbox.base import Limits
from rlvr.scoring import ScoreConfig
from rlvr.trainer.evaluation.evaluate import EvalConfig
from rlvr.trainer.reward_models.preferences import MakePrefsConfig
from rlvr.trainer.reward_models.rm_training import TrainRMConfig
from rlvr.trainer.verified_data import DistillDataConfig
from rlvr.usage import field_docs

# (subcommand path, config, fields declared by hand because they are not plain options)
COMMANDS = [(("score",), ScoreConfig, {"env", "input"}),
            (("train-rm",), TrainRMConfig, set()),
            (("make-prefs",), MakePrefsConfig, set()),
            (("sandbox", "run"), Limits, set()),
            (("eval",), EvalConfig, set()),
            (("distill-data",), DistillDataConfig, set())]


def _subparser(path):
    parser = build_parser()
    for name in path:
        action = next(a for a in parser._actions if a.choices and name in a.choices)
        parser = action.choices[name]
    return parser


@pytest.mark.parametrize("path,cls,by_hand", COMMANDS, ids=lambda x: str(x))
def test_every_scalar_field_is_an_option_with_its_default_and_docstring(path, cls, by_hand):
    options = {a.dest: a for a in _subparser(path)._actions}
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    checked = 0
    for f in dataclasses.fields(cls):
        if f.name in by_hand or _scalar(hints[f.name]) is None:
            continue
        action = options[f.name]
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        assert action.default == default or (action.required and default is None), f.name
        assert action.help.startswith(docs.get(f.name, "")), f.name
        checked += 1
    assert checked >= 5


def test_score_workers_default_is_the_configs():
    args = build_parser().parse_args(["score", "in.jsonl", "-o", "out.jsonl"])
    assert args.workers == ScoreConfig(env="x", input="i", output="o").workers
    assert args.deadline_s is None         # derived from the environment unless given


# Fields a subcommand takes in another form, and why.
OTHER_FORM = {
    "score": {"input": "positional argument", "env_args": "repeatable --env-arg KEY=VALUE"},
    "eval": {"env_kwargs": "repeatable --env-arg KEY=VALUE", "ks": "--k 1,2,4 (comma-separated)"},
    "make-prefs": {"env_args": "repeatable --env-arg KEY=VALUE"},
    "audit": {"env_args": "repeatable --env-arg KEY=VALUE"},
    "distill-data": {"env_args": "repeatable --env-arg KEY=VALUE"},
    "serve": {"env": "positional argument", "env_args": "repeatable --env-arg KEY=VALUE"},
}


def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _config_of(name: str):
    from rlvr.audit import AuditConfig
    from rlvr.interop.serve import ServeConfig
    from rlvr.sandbox.base import Limits
    from rlvr.scoring import ScoreConfig
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.evaluation.evaluate import EvalConfig
    from rlvr.trainer.reward_models.preferences import MakePrefsConfig
    from rlvr.trainer.reward_models.rm_training import TrainRMConfig
    from rlvr.trainer.sft.config import SFTConfig
    return {"score": ScoreConfig, "eval": EvalConfig, "train": TrainConfig, "audit": AuditConfig,
            "train-rm": TrainRMConfig, "make-prefs": MakePrefsConfig, "run": Limits,
            "distill-data": DistillDataConfig, "serve": ServeConfig, "sft": SFTConfig}.get(name)


def _commands():
    out = []
    for name, sub in _subparsers(build_parser()):
        out.append((name, sub))
        out += [(n, s) for n, s in _subparsers(sub)]
    return out


@pytest.mark.parametrize("name,parser", [c for c in _commands() if _config_of(c[0])],
                         ids=[c[0] for c in _commands() if _config_of(c[0])])
def test_every_field_is_a_flag_named_as_the_field(name, parser):
    from rlvr.usage import field_docs
    cls = _config_of(name)
    docs = field_docs(cls)
    by_dest = {a.dest: a for a in parser._actions}
    missing = []
    for f in dataclasses.fields(cls):
        if f.name in OTHER_FORM.get(name, {}):
            continue
        action = by_dest.get(f.name)
        flag = "--" + f.name.replace("_", "-")
        if action is None or (action.option_strings and flag not in action.option_strings):
            missing.append(flag)
        elif not docs.get(f.name):
            missing.append(f"{flag} (no docstring under the field)")
    assert not missing, f"rlvr {name}: fields without their flag: {missing}"


def test_train_flags_override_the_file_and_pairs_override_flags(tmp_path, monkeypatch):
    import rlvr.cli.train as train
    seen = {}

    class Stop(Exception):
        pass

    def fake(cfg):
        seen["cfg"] = cfg
        raise Stop
    monkeypatch.setattr(train, "console_trainer", lambda: fake)
    toml = tmp_path / "c.toml"
    toml.write_text('preset = "ppo"\nsteps = 7\nlr = 0.5\n')
    with pytest.raises(Stop):
        main(["train", "--config", str(toml), "--steps", "9", "--env-kwargs", '{"n_terms": 3}',
              "--no-progress", "lr=0.25"])
    cfg = seen["cfg"]
    assert (cfg.preset, cfg.advantage, cfg.steps, cfg.lr, cfg.env_kwargs, cfg.progress) == \
        ("ppo", "gae", 9, 0.25, {"n_terms": 3}, False)
    assert cfg.inner_steps == 4           # the file's preset, not the flags' defaults


def test_bad_flag_values_are_one_line_usage_errors(capsys):
    for argv in (["train", "--lr", "fast"], ["train", "--env-kwargs", "[1]"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "lr: expected float, got 'fast'" in err and "env_kwargs: expected a dict" in err


# A value away from the default for each TrainConfig field whose generic one (bool flipped,
# number + 1 or + 0.5) would be refused or is not a number.
_AWAY = {"preset": "ppo", "env": "gsm8k", "model": "m", "tokenizer": "t", "output_dir": "o",
         "device": "cpu", "dtype": "bfloat16", "forward": "reference", "share_prefix": "true",
         "rollout_engine": "vllm", "server_url": "http://127.0.0.1:1/v1", "server_model": "m",
         "server_sync": "none", "server_weights_dir": "w", "importance_correction": "sequence",
         "advantage": "rloo", "scale_rewards": "batch", "baseline": "moving_average",
         "policy_loss": "gspo", "loss_aggregation": "token_mean", "kl_estimator": "k2",
         "kl_in": "reward", "reward_backend": "ray", "ray_address": "a", "teacher": "t",
         "dist_backend": "gloo", "parallel": "fsdp", "env_args": '{"n_terms": 3}',
         "adam_betas": "[0.8, 0.9]", "reflection_phrases": '["hm"]', "report_to": '["wandb"]',
         "lora_target_modules": '["q_proj"]', "reward_deadline_s": "5", "top_p": "0.9",
         "gae_lambda": "0.9", "baseline_decay": "0.5", "lora_dropout": "0.5",
         "vllm_gpu_memory_utilization": "0.8", "importance_correction": "icepop",
         "monitor_action": "screen", "monitor_detectors": '["hedge"]', "honeypot_frac": "0.25",
         "control": "random"}


# Fields whose value away from the default needs another beside it to be a valid config.
_WITH = {"whiten_advantages": {"advantage": "gae"}, "partial_rollouts": {"async_steps": 1}}


def _away(f: dataclasses.Field, default) -> str:
    if f.name in _AWAY:
        return _AWAY[f.name]
    if isinstance(default, bool):
        return str(not default).lower()
    return str(default + 1) if isinstance(default, int) else str(default + 0.5)


def test_every_train_field_keeps_its_flat_name_and_lands_in_its_section():
    """TrainConfig is its sections at once: each field belongs to exactly one section, and its
    flat name -- `--flag value`, KEY=VALUE, the constructor and attribute access -- still sets
    it, there."""
    import warnings
    from rlvr.trainer.config import SECTIONS, TrainConfig, field_docs, parse_overrides
    owner = {}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            assert f.name not in owner, f"{f.name} in {owner.get(f.name)} and {section}"
            owner[f.name] = section
    assert list(owner) == [f.name for f in dataclasses.fields(TrainConfig)]
    defaults = {name: default for name, _, default, _ in field_docs()}
    parser = _subparser(("train",))
    for f in dataclasses.fields(TrainConfig):
        value = _away(f, defaults[f.name])
        pair = parse_overrides([f"{f.name}={value}"])[f.name]
        flag = "--" + f.name.replace("_", "-")
        argv = [flag if value == "true" else "--no-" + flag[2:]] \
            if isinstance(defaults[f.name], bool) else [flag, value]
        assert getattr(parser.parse_args(argv), f.name) == pair, f.name
        assert pair != defaults[f.name], f.name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = TrainConfig(**{**_WITH.get(f.name, {}), f.name: pair})
        assert getattr(cfg, f.name) == pair, f.name
        assert getattr(cfg.section(owner[f.name]), f.name) == pair, f.name
