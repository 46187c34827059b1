"""What a new user hits on plausible mistakes: one line and exit 2, nothing written."""
import json

import pytest

torch = pytest.importorskip("torch")

from rlvr.cli import main  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # see conftest.py


def _one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"rlvr {command}: error:"), err
    return err


@pytest.mark.parametrize("command", [
    ["eval", "--tasks", "2", "--n", "1", "--k", "1", "--no-progress"],
    ["train", "steps=1", "progress=false"],
    ["sft", "data=rlvr/data/arithmetic_sample.jsonl", "steps=1", "progress=false"]])
def test_a_model_that_is_a_file_is_one_line_at_once_and_writes_nothing(command, tmp_path,
                                                                        capsys):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"not a model")
    out = tmp_path / "run"
    model = ["--model", str(weights)] if command[0] == "eval" else [f"model={weights}",
                                                                   f"output_dir={out}"]
    assert main(command + model) == 2
    err = _one_error_line(capsys, command[0])
    assert "is a file, not a model folder" in err and str(weights) in err
    assert not out.exists()      # exit 2: nothing written, not even an empty folder


def test_train_with_a_model_that_cannot_load_leaves_no_output_folder(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", f"model={tmp_path / 'no' / 'such'}", f"output_dir={out}", "steps=1",
                 "progress=false"]) == 2
    _one_error_line(capsys, "train")
    assert not out.exists()


def test_plot_passk_given_a_run_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    assert main(["plot", "passk", str(tmp_path / "run")]) == 2
    err = _one_error_line(capsys, "plot")
    assert "is a folder" in err and "rlvr eval -o" in err


ROWS = [{"id": f"t{i}", "prompt": "What is 2 + 3?", "completion": c, "answer": "5"}
        for i, c in enumerate(["5", "6", "The answer is 5", "5", "7"])]


def _score(path, out, capsys) -> tuple[int, list]:
    code = main(["score", "--env", "math-arithmetic", str(path), "-o", str(out), "--workers", "0",
                 "--no-progress"])
    return code, [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []


@pytest.mark.parametrize("name,text", [
    ("rows.json", json.dumps(ROWS, indent=2)),         # a JSON array, pretty-printed
    ("rows.json", json.dumps(ROWS)),                   # a JSON array on one line
    ("rows.jsonl", json.dumps(ROWS, indent=1))])       # an array whatever the suffix
def test_score_reads_a_json_array_as_the_rows_jsonl_would_give(name, text, tmp_path, capsys):
    lines = tmp_path / "lines.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    code, want = _score(lines, tmp_path / "want.jsonl", capsys)
    array = tmp_path / name
    array.write_text(text)
    got_code, got = _score(array, tmp_path / "got.jsonl", capsys)
    assert (got_code, code) == (0, 0)
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("latency_s", "line")}
                          for r in rows]
    assert strip(got) == strip(want) and len(got) == 5
    assert [r["status"] for r in got] == ["ok"] * 5


@pytest.mark.parametrize("text,says", [
    (json.dumps({"rows": ROWS}, indent=2), "holds one JSON object, not rows"),
    ("id,completion\nt0,5\nt1,6\n", "is not JSON lines"),
    (json.dumps(ROWS, indent=2)[:-4], "not a JSON array")])
@pytest.mark.parametrize("command", ["score", "sft"])
def test_a_whole_file_format_mistake_is_one_line_in_every_command(text, says, command, tmp_path,
                                                                  capsys, tiny_model):
    data = tmp_path / "rows.json"
    data.write_text(text)
    out = tmp_path / "out"
    args = (["score", "--env", "math-arithmetic", str(data), "-o", str(out / "o.jsonl"),
             "--workers", "0", "--no-progress"] if command == "score" else
            ["sft", f"model={tiny_model}", f"data={data}", f"output_dir={out}", "steps=1",
             "progress=false"])
    assert main(args) == 2
    assert says in _one_error_line(capsys, command)
    assert not out.exists()


def test_the_score_summary_names_failed_rows_only_when_there_are_some(tmp_path, capsys):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert _score(path, tmp_path / "out.jsonl", capsys)[0] == 0
    text = capsys.readouterr().out
    assert "mean score: 0.6000 over 5 scored rows\n" in text and "failed" not in text


def test_sft_shows_its_loss_in_the_bar_and_ends_with_what_it_did(tiny_model, tmp_path, capsys):
    rows = [{"prompt": [{"role": "user", "content": f"{a}+1?"}],
             "completion": [{"role": "assistant", "content": f"{a + 1}"}]} for a in range(6)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    assert main(["sft", f"model={tiny_model}", f"data={data}", f"output_dir={run}", "steps=2",
                 "batch_size=2", "--progress", "--no-tensorboard"]) == 0
    out, err = capsys.readouterr()
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert f"loss={last['loss']:.3g}" in err                # the bar's postfix
    final = out.strip().splitlines()[-1]
    policy = run / "checkpoints" / "step-000002" / "policy"
    assert final.startswith(f"sft: 2 steps, final loss {last['loss']:.4f}, ")
    assert final.endswith(f" s; model: {policy}") and policy.is_dir()


def test_sft_keeps_only_layer_inputs_for_the_backward_by_default(tiny_model, tmp_path):
    """Activations kept for the backward are most of an SFT step's memory: by default each
    decoder layer is recomputed in the backward, so a forward keeps far fewer bytes."""
    from rlvr.trainer.sft.batches import nll_sum
    from rlvr.trainer.sft.config import SFTConfig
    from rlvr.trainer.sft.trainer import SFTTrainer
    rows = [{"prompt": f"{a} plus {a} is", "completion": f" {2 * a}, since {a} + {a} = {2 * a}."}
            for a in range(8)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def saved_bytes(**kw) -> int:
        trainer = SFTTrainer(SFTConfig(model=tiny_model, data=str(data), steps=1,
                                       output_dir=str(tmp_path / "run"), batch_size=8,
                                       packing=True, progress=False, tensorboard=False, **kw))
        batch = trainer.micro_batches(trainer.train_set)[0]
        kept = []

        def keep(t):
            kept.append(t.numel() * t.element_size())
            return t
        with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
            nll_sum(trainer.policy, batch).backward()
        return sum(kept)
    assert saved_bytes() < 0.5 * saved_bytes(gradient_checkpointing=False)


@pytest.mark.parametrize("greedy", [0.0, 1.0])
def test_a_greedy_star_at_0_or_1_is_drawn_whole_inside_the_frame(greedy):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlvr.passk import pass_at_k_curve
    from rlvr.trainer.evaluation.passk_plot import Curve, draw_passk
    counts = [0] * 5 if greedy == 0 else [16] * 5
    curve = Curve("m", pass_at_k_curve(counts, 16, range(1, 17), 0), greedy, 5, 16)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    draw_passk(ax, [curve], [])
    fig.canvas.draw()
    star = next(line for line in ax.get_lines() if line.get_marker() == "*")
    x, y = ax.transData.transform((1, greedy))
    radius = star.get_markersize() * fig.dpi / 72 / 2
    frame = ax.get_window_extent()
    assert frame.x0 < x - radius and frame.y0 < y - radius and y + radius < frame.y1, \
        "the star crosses the axes' frame"
    plt.close(fig)


def test_a_run_without_evaluation_is_told_so_in_words(tmp_path):
    from rlvr.trainer.run.plots import plot_run
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5}) + "\n")
    notes = plot_run(run).notes
    assert "skipped 'eval' (Held-out evaluation (step 0 = the base model)): the run did no " \
           "evaluation" in notes
    assert not [n for n in notes if "\\" in n or "(.+)" in n or "(pass@" in n], notes
