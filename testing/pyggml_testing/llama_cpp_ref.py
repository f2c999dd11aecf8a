"""llama.cpp's own code and data as test references, fetched from the llama-cpp-python source distribution on
PyPI (one download, kept under .cache/):

    python -m pyggml_testing.llama_cpp_ref vocabs [DIR]   # its tokenizer test vocabularies (.gguf, .inp, .out)
    python -m pyggml_testing.llama_cpp_ref ggml           # libggml-base/libggml-cpu built for AVX2 (no AVX-512),
                                                          # the build whose arithmetic the cpu plugin follows
    python -m pyggml_testing.llama_cpp_ref rpc            # ggml-rpc-server, llama-perplexity and llama-completion
                                                          # with RPC, for generic AVX2
    python -m pyggml_testing.llama_cpp_ref llama          # libllama for generic AVX2 and the sdist's llama_cpp
                                                          # Python package over it
                                                          # (these three are one build, a few minutes, the first
                                                          # of them makes all: they share ggml)
    python -m pyggml_testing.llama_cpp_ref finetune [DIR] # llama-finetune (examples/training), generic AVX2,
                                                          # static: ggml's own training (several minutes)
    python -m pyggml_testing.llama_cpp_ref native [DIR]   # llama-cpp-python built for this CPU (GGML_NATIVE=ON),
                                                          # the speed benchmarks' anchor (about 10 minutes)
    python -m pyggml_testing.llama_cpp_ref cuda-bench [DIR]
                                                          # llama-bench, llama-perplexity and llama-quantize with
                                                          # ggml's CUDA backend for sm_90, with their libraries:
                                                          # the GPU benchmark's anchor (nvcc, no GPU; about an hour
                                                          # on 2 cores, resumable; plugins/cuda/gpu_bench.sh)
    python -m pyggml_testing.llama_cpp_ref logits MODEL CASES.json OUT.npz
                                                          # llama.cpp's logits along a greedy fixture's cases
                                                          # (libllama of `llama`), for a machine without it

`ggml_library(name)` finds such a library for the tests: in $PYGGML_GGML_LIB_DIR, in .cache/ggml-avx2 (made by
`make llama-cpp-ref`), or in an installed llama-cpp-python; `open_ggml_cpu()` loads and initialises libggml-cpu (or
raises GgmlMissing, saying why), `load_ggml_cpu()` does so for a test (or skips it). Everything is kept in the
checkout's .cache/ (this distribution is installed editable from the repository; $PYGGML_REF_CACHE puts it
elsewhere).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import numpy.typing as npt
import pytest

F32 = npt.NDArray[np.float32]
SDIST = "llama-cpp-python==0.3.36"
REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("PYGGML_REF_CACHE") or REPO / ".cache")
VOCAB_DIR = CACHE / "llama-vocabs"
GGML_DIR = CACHE / "ggml-avx2"
VOCABS = ("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2")
VOCAB_FILES = [f"ggml-vocab-{v}.gguf{ext}" for v in VOCABS for ext in ("", ".inp", ".out")]
GGML_LIBS = ("libggml-base.so", "libggml-cpu.so")
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
               "-DGGML_F16C=ON", "-DGGML_AVX512=OFF", "-DGGML_OPENMP=OFF", "-DGGML_BACKEND_DL=OFF",
               "-DBUILD_SHARED_LIBS=ON", "-DGGML_BUILD_TESTS=OFF", "-DGGML_BUILD_EXAMPLES=OFF"]


def sdist() -> Path:
    """The source distribution, downloaded once."""
    found = sorted(CACHE.glob("llama_cpp_python-*.tar.gz"))
    if found:
        return found[-1]
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", SDIST,
                    "-d", str(CACHE)], check=True)
    return sorted(CACHE.glob("llama_cpp_python-*.tar.gz"))[-1]


def fetch_vocabs(dest: Path = VOCAB_DIR) -> None:
    if all((dest / f).is_file() for f in VOCAB_FILES):
        return
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist()) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if name in VOCAB_FILES and "/vendor/llama.cpp/models/" in member.name:
                src = tar.extractfile(member)
                assert src is not None
                (dest / name).write_bytes(src.read())
    missing = [f for f in VOCAB_FILES if not (dest / f).is_file()]
    if missing:
        raise SystemExit(f"{SDIST} did not hold {missing}")


def _cmake_build(subdir: str, flags: list[str], targets: Sequence[str], collect: Callable[[Path], None]) -> None:
    """Configure and build `targets` of the sdist's vendor/llama.cpp/`subdir` with `flags`; `collect(build folder)`
    copies what is wanted out of the build before it goes."""
    for tool in ("cmake", "ninja", "g++"):
        if shutil.which(tool) is None:
            raise SystemExit(f"building llama.cpp needs {tool} (apt install cmake ninja-build g++)")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist()) as tar:
            members = [m for m in tar.getmembers() if f"/vendor/llama.cpp/{subdir}" in m.name]
            tar.extractall(tmp, members=members, filter="data")
        root = next(Path(tmp).glob("*/vendor/llama.cpp"))
        (root / "ggml" / "ggml.pc.in").touch()  # the sdist leaves out the pkg-config template ggml configures
        build = Path(tmp) / "build"
        subprocess.run(["cmake", "-S", str(root / subdir), "-B", str(build), "-G", "Ninja", *flags], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["ninja", "-C", str(build), *targets], check=True, stdout=subprocess.DEVNULL)
        collect(build)


def _copy(src: Path, dest: Path, name: str | None = None) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest / (name or src.name))


RPC_DIR = CACHE / "llama-rpc"
RPC_TOOLS = ("ggml-rpc-server", "llama-perplexity", "llama-completion")
LLAMA_DIR = CACHE / "llama-lib"
AVX2_FLAGS = [*CMAKE_FLAGS, "-DGGML_RPC=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
              "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TOOLS=ON",
              "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON", "-DCMAKE_INSTALL_RPATH=$ORIGIN"]
"""The references' llama.cpp: generic AVX2 (no AVX-512), so that it runs on every CI machine and its ggml is the
arithmetic the cpu plugin's bit tests follow. (A native build is what speed comparisons want; on a Sapphire Rapids
VM whose kernel does not grant AMX tiles, a native build's Q4_1 batch matmul dies with SIGILL in ggml's AMX
kernel.)"""


def _avx2_ready() -> bool:
    return (all((GGML_DIR / lib).is_file() for lib in GGML_LIBS) and all((RPC_DIR / t).is_file() for t in RPC_TOOLS)
            and (LLAMA_DIR / "libllama.so").is_file())


def build_avx2() -> None:
    """ggml's base and CPU libraries (GGML_DIR, under their plain names too), llama.cpp's RPC server and two RPC
    clients, llama-perplexity with --kl-divergence and llama-completion (RPC_DIR), and libllama (LLAMA_DIR): one
    shared-library build of the sdist's llama.cpp for generic AVX2, since they share ggml (a few minutes, once)."""
    if _avx2_ready():
        return

    def collect(build: Path) -> None:
        bin_dir = build / "bin"
        for lib in sorted(bin_dir.glob("lib*.so*")):  # every shared library under the name binaries ask for
            if lib.name.endswith(".so.0") or (lib.name.endswith(".so") and not lib.is_symlink()):  # soname / none
                for d in (RPC_DIR, LLAMA_DIR):
                    _copy(lib, d)
        for t in RPC_TOOLS:
            _copy(bin_dir / t, RPC_DIR)
        for plain in GGML_LIBS:
            for name in (plain, f"{plain}.0"):
                _copy(bin_dir / f"{plain}.0", GGML_DIR, name)

    _cmake_build("", AVX2_FLAGS, ["ggml-base", "ggml-cpu", "llama", *RPC_TOOLS], collect)
    (LLAMA_DIR / "libllama.so.0").rename(LLAMA_DIR / "libllama.so")  # the name llama_cpp's loader looks for


def rpc_tool(name: str) -> Path | None:
    """A tool of `build_avx2` in RPC_DIR ($PYGGML_LLAMA_RPC_DIR first), if built."""
    for d in (Path(os.environ.get("PYGGML_LLAMA_RPC_DIR", "") or RPC_DIR), RPC_DIR):
        if (d / name).is_file():
            return d / name
    return None


FINETUNE_DIR = CACHE / "llama-finetune"
FINETUNE_CMAKE_FLAGS = [*(f for f in CMAKE_FLAGS if "SHARED" not in f and "BUILD_TESTS" not in f),
                        "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                        "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_EXAMPLES=ON"]
"""llama.cpp's training example with the references' generic AVX2 flags (static, no RPC): the ggml side of the
training benchmark (benchmarks/bench_finetune_vs_ggml.py builds it on demand)."""


def build_finetune(dest: Path = FINETUNE_DIR) -> Path:
    """llama.cpp's `llama-finetune` (examples/training: full fine-tuning of an F32 model with ggml-opt), static;
    returns its path (several minutes the first time)."""
    if not (dest / "llama-finetune").is_file():
        _cmake_build("", FINETUNE_CMAKE_FLAGS, ["llama-finetune"], lambda b: _copy(b / "bin" / "llama-finetune", dest))
    return dest / "llama-finetune"


def build_llama(dest: Path = LLAMA_DIR) -> None:
    """libllama of the sdist's llama.cpp for generic AVX2 with its ggml libraries (`build_avx2`), and the sdist's
    `llama_cpp` Python package (ctypes over libllama) in dest/py: llama.cpp's own forward pass, which the model
    tests of the examples compare with on the same GGUF file (load with `llama_cpp_module`)."""
    build_avx2()
    if (dest / "py" / "llama_cpp" / "__init__.py").is_file():
        return
    py = dest / "py"
    with tarfile.open(sdist()) as tar:
        members = [m for m in tar.getmembers() if "/llama_cpp/" in m.name and "/vendor/" not in m.name
                   and m.name.endswith(".py")]
        for m in members:
            src = tar.extractfile(m)
            assert src is not None
            out = py / "llama_cpp" / m.name.split("/llama_cpp/", 1)[1]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(src.read())


NATIVE_DIR = CACHE / "llama-native"


def native_cmake_args() -> str:
    """CMAKE_ARGS of a llama-cpp-python built for this machine, as its users build it (`-DGGML_NATIVE=ON`), with
    ggml's AMX kernels left out on a CPU that has AMX: on the Sapphire Rapids VMs here they crash (SIGILL or
    SIGSEGV in the AMX matmul on the first batch), and AMD Zen 4 has none."""
    args = "-DGGML_NATIVE=ON"
    if "amx_int8" in _cpuinfo():
        off = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
        args += f" -DCMAKE_C_FLAGS='{off}' -DCMAKE_CXX_FLAGS='{off}'"
    return args


def _cpuinfo() -> str:
    p = Path("/proc/cpuinfo")
    return p.read_text(encoding="utf-8") if p.is_file() else ""


def cpu_stamp() -> str:
    """This CPU's model name and flags, and the native build's CMAKE_ARGS (what a native build depends on)."""
    keep = [line for line in _cpuinfo().splitlines() if line.startswith(("model name", "flags"))][:2]
    return "\n".join([*keep, native_cmake_args()])


def build_native_llama(dest: Path = NATIVE_DIR) -> Path:
    """llama-cpp-python built from the sdist for this machine's CPU (`CMAKE_ARGS=native_cmake_args() pip install
    --no-cache-dir`, about 10 minutes on 2 cores), installed into dest (a --target folder: import it by putting dest
    first on sys.path): the speed benchmarks' anchor. A build made on another machine may hold another CPU's
    instructions, so dest records the CPU it was built for, and is rebuilt on any other."""
    stamp = dest / "built-for.txt"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == cpu_stamp() and (dest / "llama_cpp").is_dir():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-cache-dir", "--no-deps", "--target",
                    str(dest), str(sdist())], check=True, env={**os.environ, "CMAKE_ARGS": native_cmake_args()})
    stamp.write_text(cpu_stamp(), encoding="utf-8")
    return dest


CUDA_DIR = CACHE / "llama-cuda"
CUDA_TOOLS = ("llama-bench", "llama-perplexity", "llama-quantize")
CUBLAS_WHEEL = "nvidia-cublas==13.0.2.14"
"""cuBLAS of CUDA 13.0 (the nvcc here), linked against; at run time the GPU machine's own libcublas.so.13 is found."""


def _cuda_build_inputs(work: Path) -> dict[str, Path]:
    """What linking ggml-cuda needs and this machine lacks: cuBLAS's headers and libraries (from the pip wheel,
    under `work`/cublas) and a stand-in libcuda.so.1 (the driver's library, only on a machine with a GPU)."""
    cublas = work / "cublas"
    if not (cublas / "lib" / "libcublasLt.so.13").is_file():
        wheels = work / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--platform", "manylinux_2_27_x86_64", "-d", str(wheels),
                        CUBLAS_WHEEL], check=True)
        with zipfile.ZipFile(next(wheels.glob("nvidia_cublas-*.whl"))) as whl:
            for name in whl.namelist():
                if name.startswith("nvidia/cu13/") and not name.endswith("/"):
                    out = cublas / name.removeprefix("nvidia/cu13/")
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with whl.open(name) as src, out.open("wb") as dst:
                        shutil.copyfileobj(src, dst)
        shutil.rmtree(wheels)
    stub = work / "stub" / "libcuda.so"
    if not stub.is_file():
        stub.parent.mkdir(parents=True, exist_ok=True)
        (stub.parent / "stub.c").write_text("void pyggml_cuda_driver_stub(void) {}\n", encoding="utf-8")
        subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(stub),
                        str(stub.parent / "stub.c")], check=True)
    return {"include": cublas / "include", "cublas": cublas / "lib" / "libcublas.so.13",
            "cublasLt": cublas / "lib" / "libcublasLt.so.13", "cuda": stub}


def _needed(binary: Path) -> list[str]:
    """The libraries an ELF file names as needed (readelf -d)."""
    out = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def build_cuda_bench(dest: Path = CUDA_DIR / "bin", cuda_root: Path | None = None, archs: str = "90") -> Path:
    """llama-bench, llama-perplexity and llama-quantize of the sdist's llama.cpp with ggml's CUDA backend for the
    GPU architectures `archs` (default sm_90: H100, H200), compiled here without a GPU, with their shared libraries
    (stripped, rpath $ORIGIN) in dest: the anchor of the CUDA plugin's speed figures (plugins/cuda/gpu_bench.sh).
    libcuda.so.1 and cuBLAS (libcublas.so.13, libcublasLt.so.13) are left to the GPU machine; libcudart comes
    along. The sources, cuBLAS and the build folder are kept in CUDA_DIR, so that a stopped build goes on where it
    was: nvcc takes about an hour on two cores ($PYGGML_REF_JOBS jobs, default all cores: run it under `nice`)."""
    if all((dest / t).is_file() for t in CUDA_TOOLS):
        return dest
    cuda_root = cuda_root or Path(os.environ.get("CUDA_ROOT") or "/usr/local/cuda")
    nvcc = cuda_root / "bin" / "nvcc"
    if not nvcc.is_file():
        raise SystemExit(f"no nvcc in {nvcc.parent} (set CUDA_ROOT)")
    for tool in ("cmake", "ninja", "g++", "gcc", "strip", "readelf"):
        if shutil.which(tool) is None:
            raise SystemExit(f"building llama.cpp needs {tool} (apt install cmake ninja-build g++ binutils)")
    work = CUDA_DIR
    inputs = _cuda_build_inputs(work)
    src, build = work / "src", work / "build"
    if not (src / "CMakeLists.txt").is_file():
        shutil.rmtree(src, ignore_errors=True)
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            with tarfile.open(sdist()) as tar:
                members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name]
                tar.extractall(tmp, members=members, filter="data")
            root = next(Path(tmp).glob("*/vendor/llama.cpp"))
            (root / "ggml" / "ggml.pc.in").touch()  # as in _cmake_build
            root.rename(src)
    include = f"-I{inputs['include']}"
    flags = [*CMAKE_FLAGS, "-DGGML_CCACHE=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
             "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF",
             "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_USE_PREBUILT_UI=OFF",
             "-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={archs}", "-DGGML_CUDA_FA_ALL_QUANTS=OFF",
             "-DGGML_CUDA_GRAPHS=ON", "-DGGML_CUDA_NCCL=OFF", f"-DCMAKE_CUDA_COMPILER={nvcc}",
             f"-DCUDAToolkit_ROOT={cuda_root}", f"-DCUDA_cublas_LIBRARY={inputs['cublas']}",
             f"-DCUDA_cublasLt_LIBRARY={inputs['cublasLt']}", f"-DCUDA_cuda_driver_LIBRARY={inputs['cuda']}",
             f"-DCMAKE_CXX_FLAGS={include}", f"-DCMAKE_CUDA_FLAGS={include}",
             # the stand-in libcuda has none of the driver's functions: they are looked up at run time
             "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined", "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--no-as-needed",
             "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON", "-DCMAKE_INSTALL_RPATH=$ORIGIN"]
    if not (build / "build.ninja").is_file():
        subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja", *flags], check=True)
    jobs = os.environ.get("PYGGML_REF_JOBS") or str(os.cpu_count() or 1)
    subprocess.run(["ninja", "-C", str(build), "-j", jobs, *CUDA_TOOLS], check=True)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    # the tools and every library they need, transitively, that the build made or CUDA's runtime is (under the
    # names the tools ask for: libggml-base.so.0, libllama-bench-impl.so, libcudart.so.13, ...), links followed
    todo, seen = [build / "bin" / t for t in CUDA_TOOLS], set()
    while todo:
        f = todo.pop()
        shutil.copyfile(f, dest / f.name)
        shutil.copymode(f, dest / f.name)
        for name in _needed(f):
            found = [d / name for d in (build / "bin", cuda_root / "lib64") if (d / name).exists()]
            if found and name not in seen:
                seen.add(name)
                todo.append(found[0])
    for f in dest.iterdir():
        subprocess.run(["strip", "--strip-unneeded", str(f)], check=True)
    (dest / "built-with.txt").write_text(
        f"{SDIST} {' '.join(flags)}\n{subprocess.run([str(nvcc), '--version'], capture_output=True, text=True).stdout}",
        encoding="utf-8")
    return dest


def llama_cpp_module() -> ModuleType:
    """The sdist's `llama_cpp` package over build_llama's libllama, imported (an installed llama-cpp-python is not
    used: its build is not the reference's); a pytest skip saying how to build it where it is missing."""
    if not (LLAMA_DIR / "libllama.so").is_file():
        pytest.skip(f"llama.cpp's libllama is not built in {LLAMA_DIR}: `python -m pyggml_testing.llama_cpp_ref "
                    "llama` (run by `make llama-cpp-ref`) builds it")
    os.environ["LLAMA_CPP_LIB_PATH"] = str(LLAMA_DIR)
    if str(LLAMA_DIR / "py") not in sys.path:
        sys.path.insert(0, str(LLAMA_DIR / "py"))
    return importlib.import_module("llama_cpp")


def native_llama_module(dest: Path = NATIVE_DIR) -> ModuleType:
    """llama-cpp-python built for this CPU (build_native_llama: made where missing, about 10 minutes), imported; an
    error where another `llama_cpp` was imported first (a process holds one)."""
    build_native_llama(dest)
    if str(dest) not in sys.path:
        sys.path.insert(0, str(dest))
    module = importlib.import_module("llama_cpp")
    if not Path(module.__file__ or "").resolve().is_relative_to(dest.resolve()):
        raise RuntimeError(f"llama_cpp was imported from {module.__file__}, not from {dest}")
    return module


def llama_cpp_logits(model: Path, tokens: Sequence[int], stepped: bool = False, llama: ModuleType | None = None,
                     n_batch: int = 256, n_threads: int = 2) -> tuple[F32, F32 | None]:
    """llama.cpp's next-token logits [len(tokens), n_vocab] along `tokens` in batches (and micro-batches) of
    `n_batch`, and with `stepped` also one token at a time (else None): the reference of a teacher-forced agreement.
    `llama`: the llama_cpp package to run (default: libllama of `make llama-cpp-ref`, llama_cpp_module())."""
    llama = llama or llama_cpp_module()
    llm = llama.Llama(model_path=str(model), n_ctx=max(256, len(tokens)), n_batch=n_batch, n_ubatch=n_batch,
                      n_threads=n_threads, n_threads_batch=n_threads, logits_all=True, verbose=False)
    llm.eval(list(tokens))
    batch = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    one_by_one = None
    if stepped:
        llm.reset()
        rows = []
        for t in tokens:
            llm.eval([t])
            rows.append(np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32))
        one_by_one = np.stack(rows)
    llm.close()
    return batch, one_by_one


def write_case_logits(model: Path, cases: Path, out: Path) -> None:
    """llama.cpp's batch logits along each case of a greedy fixture (`cases`: JSON {"cases": [{"prompt_tokens",
    "tokens"}, ...]}, e.g. examples/llama/tests/llama_cpp_greedy.json) over its prompt and answer, saved to `out`
    (.npz, one array per case: case0, case1, ...), for a machine without llama.cpp to measure against."""
    fx = json.loads(cases.read_text(encoding="utf-8"))
    arrays = {f"case{i}": llama_cpp_logits(model, c["prompt_tokens"] + c["tokens"])[0]
              for i, c in enumerate(fx["cases"])}
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **arrays)  # type: ignore[arg-type]


def ggml_library(name: str) -> Path | None:
    """Where libggml-<name>.so of a reference build is, if anywhere."""
    dirs = [Path(d) for d in os.environ.get("PYGGML_GGML_LIB_DIR", "").split(os.pathsep) if d] + [GGML_DIR]
    spec = importlib.util.find_spec("llama_cpp")
    if spec is not None and spec.submodule_search_locations:
        dirs += [Path(loc) / "lib" for loc in spec.submodule_search_locations]
    for d in dirs:
        if (d / f"libggml-{name}.so").is_file():
            return d / f"libggml-{name}.so"
    return None


class GgmlMissing(RuntimeError):
    """ggml's CPU library is not built or does not load (the message says which, and how to build it)."""


def open_ggml_cpu() -> ctypes.CDLL:
    """ggml's libggml-cpu, loaded (libggml-base first, both global: cpu links against base) and initialised
    (ggml_cpu_init fills its conversion tables); GgmlMissing saying what is missing or does not load."""
    base, cpu_path = ggml_library("base"), ggml_library("cpu")
    if base is None or cpu_path is None:
        raise GgmlMissing("ggml's libggml-cpu (the reference) is not here: `make llama-cpp-ref` builds it")
    try:
        ctypes.CDLL(str(base), mode=ctypes.RTLD_GLOBAL)
        cpu = ctypes.CDLL(str(cpu_path), mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise GgmlMissing(f"ggml's libraries in {cpu_path.parent} do not load: {e}") from e
    cpu.ggml_cpu_init()
    return cpu


def load_ggml_cpu() -> ctypes.CDLL:
    """open_ggml_cpu() for a test: a pytest skip saying why where the library is missing (a benchmark, which
    is no test, calls open_ggml_cpu)."""
    try:
        return open_ggml_cpu()
    except GgmlMissing as e:
        pytest.skip(str(e))


def main(argv: list[str]) -> int:
    if argv[:1] == ["logits"] and len(argv) == 4:
        write_case_logits(Path(argv[1]), Path(argv[2]), Path(argv[3]))
        return 0
    if not argv or argv[0] not in ("vocabs", "ggml", "rpc", "llama", "finetune", "native", "cuda-bench"):
        print(__doc__, file=sys.stderr)
        return 2
    dest = Path(argv[1]) if len(argv) > 1 else None
    if argv[0] in ("ggml", "rpc", "llama") and dest is not None:
        print(f"{argv[0]} builds into {CACHE} ($PYGGML_REF_CACHE moves it), not a folder of its own", file=sys.stderr)
        return 2
    if argv[0] == "vocabs":
        fetch_vocabs(dest or VOCAB_DIR)
    elif argv[0] in ("ggml", "rpc"):
        build_avx2()
    elif argv[0] == "llama":
        build_llama()
    elif argv[0] == "finetune":
        build_finetune(dest or FINETUNE_DIR)
    elif argv[0] == "native":
        build_native_llama(dest or NATIVE_DIR)
    elif argv[0] == "cuda-bench":
        build_cuda_bench(dest or CUDA_DIR / "bin")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
