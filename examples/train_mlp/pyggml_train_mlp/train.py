"""`pyggml-train-mlp`: train the example MLP on generated spirals and report loss and accuracy per epoch.

    pyggml-train-mlp --device cpu --epochs 60 --png loss.png
    pyggml-train-mlp --device OpenCL0      # ops the device lacks run on the CPU fallback backend

Exit status 0 when the final validation accuracy reaches --target (default 0.95), else 1; 2 for bad arguments
or a run that cannot start (an unknown device, a batch larger than the data), with the reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from pyggml.backend.sched import Scheduler, backends_for
from pyggml.errors import PyGGMLError
from pyggml.opt import SGD, AdamW, Dataset, EpochResult, Result, Trainer
from pyggml_train_mlp.data import spirals
from pyggml_train_mlp.model import build_mlp

BAR = 30


@dataclass
class Config:
    device: str = "cpu"
    epochs: int = 60
    batch: int = 32
    hidden: int = 64
    lr: float = 1e-2
    optimizer: str = "adamw"
    n_per_class: int = 400
    val_split: float = 0.2
    seed: int = 0


def train(cfg: Config, progress: bool = False) -> list[EpochResult]:
    """Build the model and the trainer on cfg.device and run cfg.epochs epochs; returns the per-epoch results."""
    x, y = spirals(cfg.n_per_class, seed=cfg.seed)
    sched = Scheduler(backends_for(cfg.device))
    mlp = build_mlp(sched.buffer_type(0), x.shape[1], cfg.hidden, y.shape[1], cfg.batch, seed=cfg.seed)
    opt = AdamW(alpha=cfg.lr) if cfg.optimizer == "adamw" else SGD(alpha=cfg.lr)
    trainer = Trainer(sched, mlp.inputs, mlp.logits, optimizer=opt)
    ds = Dataset(x, y)

    def bar(training: bool, i: int, n: int, res: Result, dt: float) -> None:
        done = BAR * i // max(n, 1)
        what = "train" if training else "val  "
        sys.stderr.write(f"\r  {what} [{'=' * done}{'.' * (BAR - done)}] {i}/{n} loss {res.loss:.4f} "
                         f"acc {res.accuracy:6.2%} {dt:5.1f}s")
        if i == n:
            sys.stderr.write("\n")

    def epoch_line(r: EpochResult) -> None:
        if progress:
            sys.stderr.write(f"epoch {r.epoch + 1:3d}/{cfg.epochs}: train loss {r.train.loss:.4f} acc "
                             f"{r.train.accuracy:6.2%} | val loss {r.val.loss:.4f} acc {r.val.accuracy:6.2%}\n")

    return trainer.fit(ds, cfg.epochs, val_split=cfg.val_split, seed=cfg.seed,
                       progress=bar if progress else None, on_epoch=epoch_line)


def write_png(results: Sequence[EpochResult], path: str, title: str) -> bool:
    """The loss and accuracy curves as a PNG; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ep = [r.epoch + 1 for r in results]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(ep, [r.train.loss for r in results], label="train")
    a.plot(ep, [r.val.loss for r in results], label="validation")
    a.set_xlabel("epoch")
    a.set_ylabel("cross-entropy loss")
    a.set_yscale("log")
    a.legend()
    b.plot(ep, [r.train.accuracy for r in results], label="train")
    b.plot(ep, [r.val.accuracy for r in results], label="validation")
    b.set_xlabel("epoch")
    b.set_ylabel("accuracy")
    b.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _positive(text: str) -> int:
    """argparse type of the counts (epochs, batch, hidden): 0 or less would fail deep inside the graph or the
    trainer instead of at the command line."""
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pyggml-train-mlp", description=__doc__.split("\n")[0])
    d = Config()
    p.add_argument("--device", default=d.device, help="device name (cpu, numpy, OpenCL0, Vulkan0, ...)")
    p.add_argument("--epochs", type=_positive, default=d.epochs)
    p.add_argument("--batch", type=_positive, default=d.batch)
    p.add_argument("--hidden", type=_positive, default=d.hidden)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--optimizer", choices=("adamw", "sgd"), default=d.optimizer)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--png", default=None, help="write the loss/accuracy curves to this PNG (needs matplotlib)")
    p.add_argument("--json", default=None, help="write the per-epoch results to this JSON file")
    p.add_argument("--target", type=float, default=0.95, help="validation accuracy needed for exit status 0")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    cfg = Config(device=a.device, epochs=a.epochs, batch=a.batch, hidden=a.hidden, lr=a.lr, optimizer=a.optimizer,
                 seed=a.seed)
    try:
        results = train(cfg, progress=not a.quiet)
    except PyGGMLError as e:  # an unknown device, a batch larger than the data: the reason, not a traceback
        print(f"pyggml-train-mlp: {e}", file=sys.stderr)
        return 2
    last = results[-1]
    print(f"{cfg.device}: {cfg.epochs} epochs, final train loss {last.train.loss:.4f} acc {last.train.accuracy:.2%}, "
          f"validation loss {last.val.loss:.4f} acc {last.val.accuracy:.2%}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump([{"epoch": r.epoch + 1, "train_loss": r.train.loss, "train_acc": r.train.accuracy,
                        "val_loss": r.val.loss, "val_acc": r.val.accuracy} for r in results], f, indent=1)
    if a.png and not write_png(results, a.png, f"pyggml MLP on spirals ({cfg.device})"):
        print("matplotlib is not installed: no PNG written (pip install matplotlib)", file=sys.stderr)
    return 0 if last.val.accuracy >= a.target else 1


if __name__ == "__main__":
    sys.exit(main())
