"""Time to record the ops and build the graph of a 30-layer llama (SmolLM2-135M shapes, ~1,100 tensors).

Prints JSON. Target (issue: core foundation): under 20 ms on this machine; ggml does it in about 1 ms of C.
"""

from __future__ import annotations

import json
import statistics
import time

import pyggml as gg
from pyggml_llama.model import GraphKey
from pyggml_llama.synthetic import SMOLLM2_135M, SyntheticKV, synthetic_model


def main() -> None:
    model = synthetic_model()
    caches = {fa: SyntheticKV(gg.Context(no_alloc=True), SMOLLM2_135M, 2048, v_trans=not fa) for fa in (True, False)}
    results = {}
    for label, key, fa in [("decode_1tok_flash_attn", GraphKey(1, 256, 1), True),
                           ("prompt_32tok_flash_attn", GraphKey(32, 256, 1), True),
                           ("decode_1tok_mul_mat_attn", GraphKey(1, 256, 1), False)]:
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            built = model.build_graph(key, caches[fa], flash_attn=fa)
            times.append(time.perf_counter() - t0)
        results[label] = {
            "nodes": built.graph.n_nodes,
            "leafs": built.graph.n_leafs,
            "build_ms_median": round(statistics.median(times) * 1e3, 3),
            "build_ms_min": round(min(times) * 1e3, 3),
            "target_ms": 20.0,
            "ggml_reference_ms": 1.0,
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
