"""`--plot out.png`: tok/s (mean, the standard deviation as error bars) against the depth, or against the threads
where only they vary; one line per test and setting. Needs matplotlib (`pip install 'pyggml-llama[plot]'`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from pyggml.errors import PyGGMLError
from pyggml_llama.bench.report import DISPLAY, Result

MISSING = "--plot needs matplotlib: pip install 'pyggml-llama[plot]'"
LABELLED = ("model_type", "devices", "n_threads", "n_batch", "n_ubatch", "type_k", "split_mode", "flash_attn",
            "tensor_split", "repack")
"""The fields that name a line where they differ between the rows."""


def check_available() -> None:
    """Before the benchmark runs: a clear error now rather than after the tests."""
    if importlib.util.find_spec("matplotlib") is None:
        raise PyGGMLError(MISSING)


def x_axis(results: Sequence[Result]) -> str:
    """n_depth, unless only the threads vary."""
    depths = {r.instance.test.n_depth for r in results}
    threads = {r.instance.setup.n_threads for r in results}
    return "n_threads" if len(depths) == 1 and len(threads) > 1 else "n_depth"


def series(results: Sequence[Result], x: str) -> dict[str, list[tuple[int, float, float]]]:
    """Line label -> (x, avg_ts, stddev_ts) points: a line per test kind (pp512, tg128) and differing setting."""
    rows = [r.fields() for r in results]
    varying = [k for k in LABELLED if k != x and len({str(f[k]) for f in rows}) > 1]
    lines: dict[str, list[tuple[int, float, float]]] = {}
    for r, f in zip(results, rows, strict=True):
        t = r.instance.test
        kind = t.name.split(" @ ")[0] if x == "n_depth" else t.name
        label = ", ".join([kind, *(f"{DISPLAY.get(k, k)}={f[k]}" for k in varying)])
        lines.setdefault(label, []).append((int(str(f[x])), float(str(f["avg_ts"])), float(str(f["stddev_ts"]))))
    return lines


def plot(results: Sequence[Result], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PyGGMLError(MISSING) from None
    x = x_axis(results)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, points in series(results, x).items():
        points.sort()
        ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=[p[2] for p in points], marker="o",
                    capsize=3, label=label)
    ax.set_xlabel("depth (tokens in the KV cache)" if x == "n_depth" else "threads")
    ax.set_ylabel("tok/s")
    models = sorted({r.model.model_type for r in results})
    ax.set_title(f"pyggml-llama bench: {', '.join(models)}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
