// pyggml Metal emulator: what the host passes to one dispatch (see pyggml_metal/sim/driver.py, which mirrors it).
#pragma once
#include <cstdint>

extern "C" {
#define PYG_MAX_BUFFERS 31
#define PYG_MAX_SPEC 16

struct pyg_dims {
    uint32_t groups[3];
    uint32_t local[3];
    const uint32_t* spec;
};

struct pyg_launch {
    const pyg_dims* dims;
    void* buf[PYG_MAX_BUFFERS];  // by MSL buffer index: buffer contents + offset, or the push-constant bytes
};

typedef void (*pyg_thread_fn)(const void* launch, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t lx, uint32_t ly,
                              uint32_t lz);
int pyg_dispatch(pyg_thread_fn fn, const void* launch, const pyg_dims* d, int uses_barriers);
}
