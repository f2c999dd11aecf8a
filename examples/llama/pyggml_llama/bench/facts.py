"""What a benchmark row says about its model and its devices, in llama-bench's terms: model_type ("llama 135M
Q4_1"), model_size (bytes of the weights), model_n_params, the backends, gpu_info and n_gpu_layers; and the bytes a
decoded token reads (`decode_bytes_per_token`), which the benchmarks against llama.cpp set against the bandwidth."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyggml.backend.meta.device import MetaDevice
from pyggml.backend.protocol import Device, DeviceType
from pyggml.gguf import GGUFFile
from pyggml.types import GGMLType, row_size
from pyggml_llama.hparams import HParams

if TYPE_CHECKING:
    from pyggml_llama.session import Session

FILE_TYPES = {
    0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K - Medium",
    11: "Q3_K - Small", 12: "Q3_K - Medium", 13: "Q3_K - Large", 14: "Q4_K - Small", 15: "Q4_K - Medium",
    16: "Q5_K - Small", 17: "Q5_K - Medium", 18: "Q6_K", 19: "IQ2_XXS - 2.0625 bpw", 20: "IQ2_XS - 2.3125 bpw",
    21: "Q2_K - Small", 22: "IQ3_XS - 3.3 bpw", 23: "IQ3_XXS - 3.0625 bpw", 24: "IQ1_S - 1.5625 bpw",
    25: "IQ4_NL - 4.5 bpw", 26: "IQ3_S - 3.4375 bpw", 27: "IQ3_S mix - 3.66 bpw", 28: "IQ2_S - 2.5 bpw",
    29: "IQ2_M - 2.7 bpw", 30: "IQ4_XS - 4.25 bpw", 31: "IQ1_M - 1.75 bpw", 32: "BF16", 36: "TQ1_0 - 1.69 bpw ternary",
    37: "TQ2_0 - 2.06 bpw ternary", 38: "MXFP4 MoE"}
"""llama.cpp's names of the GGUF's general.file_type (llama_ftype)."""


@dataclass(frozen=True)
class ModelFacts:
    model_type: str
    model_size: int
    model_n_params: int

    @classmethod
    def of(cls, gf: GGUFFile) -> ModelFacts:
        size = sum(t.nbytes for t in gf.tensors.values())
        n_params = sum(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3] for t in gf.tensors.values())
        return cls(f"{gf.architecture} {size_label(n_params)} {file_type_name(gf)}", size, n_params)


def size_label(n_params: int) -> str:
    """134K, 135M, 1.1B, 8B: from the parameter count (llama.cpp names the size from a table of known layer
    counts)."""
    if n_params < 1e6:
        return f"{n_params / 1e3:.0f}K"
    if n_params < 1e9:
        return f"{n_params / 1e6:.0f}M"
    return f"{n_params / 1e9:.1f}".removesuffix(".0") + "B"


def file_type_name(gf: GGUFFile) -> str:
    """llama.cpp's name of the file type; where the file has none, the most common type of its matrices, guessed."""
    ftype = gf.get("general.file_type")
    if isinstance(ftype, int):
        return FILE_TYPES.get(ftype, f"file type {ftype}")
    types = Counter(t.type.name for t in gf.tensors.values() if t.ne[1] > 1)
    return f"{types.most_common(1)[0][0]} (guessed)" if types else "unknown"


@dataclass(frozen=True)
class DeviceFacts:
    backends: str
    """The registries of the devices that run the model, CPU ones left out where there are others (llama-bench's
    backend column)."""
    gpu_info: str
    n_gpu_layers: int
    """The layers whose weights are on a device that is not a CPU."""

    @classmethod
    def of(cls, s: Session) -> DeviceFacts:
        devs = [d for b in s.backends for d in _leaves(b.device)]
        not_cpu = [d for d in devs if d.type != DeviceType.CPU]
        regs = list(dict.fromkeys(d.reg.name for d in (not_cpu or devs)))
        gpus = [d.description for d in devs if d.type in (DeviceType.GPU, DeviceType.IGPU)]
        on_device = sum(1 for b in s.layer_bufts
                        if b.device is not None and any(d.type != DeviceType.CPU for d in _leaves(b.device)))
        return cls(",".join(regs), ", ".join(gpus), on_device)


def _leaves(dev: Device) -> list[Device]:
    """The devices that compute for `dev`: a tensor split's meta device stands for those it spreads over."""
    return [d for child in dev.devices for d in _leaves(child)] if isinstance(dev, MetaDevice) else [dev]


def decode_bytes_per_token(model: Path, cells: float, kv_type: GGMLType = GGMLType.F16) -> int:
    """What one decode step reads at least: every weight once (the embedding matrix as the output matrix when
    tied; a separate output matrix and one row of the embeddings besides) and the K and V (of `kv_type`) of `cells`
    cells (the mean context during the decode steps)."""
    gf = GGUFFile(model)
    hp = HParams.from_gguf(gf)
    weights = sum(info.nbytes for info in gf.tensors.values())
    emb = gf.tensors.get("token_embd.weight")
    if emb is not None and "output.weight" in gf.tensors:  # untied: only one row of the embeddings is read
        weights -= emb.nbytes - emb.nbytes // emb.ne[1]
    return int(weights + 2 * hp.n_layer * row_size(kv_type, hp.n_embd_kv) * cells)
