"""Test support of the pyggml repository, kept out of the runtime packages: one place for what several test folders
(and benchmarks) share, so that no test module imports another and one pytest run covers the whole repository.

Core: `devices` (fake devices with private memory, numpy backends), `buffers` (TestBufferType), `graphs` (tensors
from numpy arrays, results as float64), `compare` (nmse), `sched` (a small llama for the scheduler), `meta` (leafs
placed on a meta device), `gguf` (a GGUF encoder independent of the reader), `models` (where the SmolLM2 file is),
`llama_cpp_ref` (llama.cpp's references built from its sdist). Per plugin, suite or example, each imported only by
its own tests (and importing what it serves): `conformance`, `opencl`, `vulkan`, `cuda`, `rpc`, `llama`.
"""
