"""cffi API-mode build of the plugin's one C helper, run at install by setup.py's cffi_modules: FNV-1a (64-bit),
the hash ggml's RPC protocol names cached weights by (SET_TENSOR_HASH). It is sequential by definition, so it is C:
Python would take seconds for one large weight."""

from __future__ import annotations

import os
import sys

from cffi import FFI

SOURCE = """
#include <stddef.h>
#include <stdint.h>

uint64_t pyggml_rpc_fnv1a64(const uint8_t *data, size_t len, uint64_t hash) {
    const uint64_t prime = 0x100000001b3ULL;
    for (size_t i = 0; i < len; i++) {
        hash ^= data[i];
        hash *= prime;
    }
    return hash;
}
"""

ffibuilder = FFI()
ffibuilder.cdef("uint64_t pyggml_rpc_fnv1a64(const uint8_t *data, size_t len, uint64_t hash);")
STRIP = not os.environ.get("PYGGML_RPC_DEBUG") and sys.platform.startswith("linux")  # no debug info, no symbols
ffibuilder.set_source("pyggml_rpc._fnv", SOURCE, extra_compile_args=["-O2"] + (["-g0"] if STRIP else []),
                      extra_link_args=["-s"] if STRIP else [])

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
