"""The llama example on Vulkan0: greedy tokens next to the CPU backend's, and the cost per decoded token when the
recorded command buffer is replayed versus re-recorded every step; prints JSON.

    python benchmarks/bench_llama_replay.py [--n-predict 12] [--prompt "The capital of France is"]
"""

from __future__ import annotations

import argparse
import json
import time

from pyggml_llama.session import Session


def decode(backends: list[str], prompt: list[int], n: int, replay: bool = True) -> dict[str, object]:
    s = Session(None, backends, n_ctx=128)
    vk = next((b for b in s.backends if b.name.startswith("Vulkan")), None)
    if vk is not None:
        vk.replay_enabled = replay  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    tokens = list(s.generate(prompt, n))
    decoded = s.stats.decode
    out: dict[str, object] = {"backends": backends, "tokens": tokens, "seconds": round(time.perf_counter() - t0, 3),
                              "decode_ms_per_token": round(1e3 * decoded.seconds / max(1, decoded.tokens), 1),
                              "prompt_ms": round(1e3 * s.stats.prompt.seconds, 1)}
    if vk is not None:
        st, records, rec = vk.stats, vk.plans_built, vk.last_plan  # type: ignore[attr-defined]
        out.update(records=records, replays=st.computes - records, record_ms_total=round(st.plan_seconds * 1e3, 1),
                   record_ms_per_graph=round(st.plan_seconds * 1e3 / max(1, records), 1),
                   dispatches=rec.n_dispatches, barriers=rec.n_barriers, replay=replay,
                   host_ms_per_compute=round(st.host_seconds * 1e3 / max(1, st.computes), 2))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--n-predict", type=int, default=12)
    args = ap.parse_args()
    s = Session(None, ["CPU"], n_ctx=128)
    prompt = s.tokenizer.encode(args.prompt)
    cpu = decode(["CPU"], prompt, args.n_predict)
    vk_replay = decode(["Vulkan0"], prompt, args.n_predict, replay=True)
    vk_record = decode(["Vulkan0"], prompt, args.n_predict, replay=False)
    print(json.dumps({"bench": "llama_vulkan_replay", "prompt_tokens": prompt,
                      "same_tokens_as_cpu": vk_replay["tokens"] == cpu["tokens"] == vk_record["tokens"],
                      "cpu": cpu, "vulkan_replay": vk_replay, "vulkan_rerecord": vk_record}, indent=1))


if __name__ == "__main__":
    main()
