"""Each subcommand's options come from its config dataclass: every scalar field has an option
with the field's default and its docstring as help, so the two cannot drift."""
import dataclasses
import typing

import pytest

from rlvr.cli import build_parser
from rlvr.cli.options import _scalar
from rlvr.sandbox.base import Limits
from rlvr.scoring import ScoreConfig
from rlvr.trainer.evaluate import EvalConfig
from rlvr.trainer.preferences import MakePrefsConfig
from rlvr.trainer.rm_training import TrainRMConfig
from rlvr.usage import field_docs

# (subcommand path, config, fields declared by hand because they are not plain options)
COMMANDS = [(("score",), ScoreConfig, {"env", "input"}),
            (("train-rm",), TrainRMConfig, set()),
            (("make-prefs",), MakePrefsConfig, set()),
            (("sandbox", "run"), Limits, set()),
            (("eval",), EvalConfig, set())]


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
