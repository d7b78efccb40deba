"""Convert a GGUF into a Hugging Face model folder that vLLM's CPU path can serve.

Run by the vLLM venv's Python (scripts/build-vllm): ``vllm-convert.py MODEL.gguf OUT_DIR``.
transformers dequantizes the GGUF; the quantization_config it leaves in the config would make
vLLM look for a quantized checkpoint, so the model is rebuilt from a clean config and the
dequantized weights saved in float32 (safetensors), with the tokenizer beside them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def convert(gguf: Path, out: Path) -> None:
    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
