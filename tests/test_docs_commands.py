"""The distillation doc's commands are the ones its measured run used (benchmarks/distill_passk.sh),
setting for setting, so a reader who runs them gets the run the table describes."""
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "distill_passk.sh"
DOC = ROOT / "docs" / "distillation.md"
NOT_SETTINGS = ("data", "output_dir", "progress", "-o", "--no-progress",
                "--overwrite")
"""Where each side reads and writes its files, its bar, replacing an old run: not the training."""


def _joined(text: str) -> list[str]:
    return text.replace("\\\n", " ").splitlines()


def _script_defaults(text: str) -> dict:
    return dict(re.findall(r"^(\w+)=\$\{\w+:-([^}]*)\}", text, re.M))


def _expand(line: str, env: dict) -> str:
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))|\"\$\(printf[^)]*\)\"",
                  lambda m: env.get(m.group(1) or m.group(2) or "", m.group(0)), line)


def _settings(tokens: list[str]) -> dict:
    """KEY=VALUE pairs and --flag value pairs of one command, paths left out."""
    out, i = {}, 0
    while i < len(tokens):
        t = tokens[i]
        if "=" in t and not t.startswith("-"):
            key, value = t.split("=", 1)
            out[key] = value
        elif t.startswith("--"):
            value = tokens[i + 1] if i + 1 < len(tokens) and not tokens[i + 1].startswith("--") \
                else True
            out.setdefault(t, []).append(value) if t == "--env-arg" else out.update({t: value})
            i += value is not True
        i += 1
    for key in NOT_SETTINGS:
        out.pop(key, None)
    return out


def _doc_command(name: str) -> dict:
    block = DOC.read_text().split("## From a teacher to a student", 1)[1].split("```", 2)[1]
    line = next(x for x in _joined(block) if x.strip().startswith(f"rlvr {name} "))
    return _settings(shlex.split(line)[2:])


def _script_command(name: str) -> dict:
    text = SCRIPT.read_text()
    env = _script_defaults(text)
    line = next(x for x in _joined(text) if re.search(rf"\$RLVR {name} ", x))
    words = shlex.split(_expand(line.split(f"$RLVR {name} ", 1)[1], env))
    array = {"${ENV_ARGS[@]}": "ENV_ARGS"}
    expanded = []
    for w in words:
        if w in array:
            body = re.search(rf"{array[w]}=\((.*?)\)", " ".join(_joined(text)), re.S).group(1)
            expanded += shlex.split(_expand(body, env))
        else:
            expanded.append(w)
    return _settings(expanded)


def test_the_docs_sft_step_is_the_measured_command():
    assert _doc_command("sft") == _script_command("sft")


def test_the_docs_data_step_is_the_measured_command():
    assert _doc_command("distill-data") == _script_command("distill-data")
