// pyggml Metal emulator runtime: runs one dispatch of a kernel translated from MSL (see emucc.py) on the CPU.
//
// Each Metal thread of a threadgroup is a fiber (its own stack) on the calling OS thread. The fibers of a group run
// one after another, each until it returns or blocks: at threadgroup_barrier(), or at a simdgroup function
// (simd_sum, simd_shuffle, ...: pyg_simd_exchange). When none can run, the scheduler releases the fibers blocked in
// simdgroup functions, each simdgroup's together (the lanes that arrived are the active lanes), or, if there are
// none, every fiber at the threadgroup barrier. This is exactly the semantics of Metal (and Vulkan) for programs
// whose barriers are in uniform control flow; threads that returned early count as arrived. Lanes of one
// simdgroup blocked at different simdgroup functions (divergent control flow) are released as one (a limitation).
// Kernels that use neither skip the fibers and run their threads in a plain loop.
// Fibers start through makecontext/setcontext once per dispatch and switch with _setjmp/_longjmp afterwards (no
// signal-mask system call per switch).
#include <csetjmp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <ucontext.h>

#include "pyg_launch.h"

namespace {

constexpr size_t STACK_BYTES = 256 * 1024;
constexpr uint32_t SIMD_WIDTH = 32;  // Apple GPUs' threadExecutionWidth
constexpr size_t SIMD_SLOT = 16;     // bytes a lane passes to a simdgroup function: up to a float4
enum State { READY, RUNNING, AT_BARRIER, AT_SIMD, DONE };

struct Fiber {
    jmp_buf jb;
    ucontext_t uc;
    char* stack = nullptr;
    bool started = false;
    State state = DONE;
    uint32_t index = 0;
    uint32_t lid[3] = {0, 0, 0};
};

// One simdgroup's exchange: the lanes' values of the current rendezvous (gen) and of the one before, so that lanes
// still reading the last results never see the next one's values.
struct SimdGroup {
    uint32_t gen = 0;
    uint32_t mask[2] = {0, 0};
    unsigned char slots[2][SIMD_WIDTH][SIMD_SLOT];
};

struct Scheduler {
    jmp_buf home;
    Fiber* fibers = nullptr;
    SimdGroup* simd = nullptr;
    uint32_t n = 0;
    Fiber* cur = nullptr;
    pyg_thread_fn fn = nullptr;
    const void* launch = nullptr;
    uint32_t group[3] = {0, 0, 0};
    bool barrier_error = false;
};

thread_local Scheduler* sched = nullptr;
thread_local const uint32_t* spec_values = nullptr;

void fiber_main() {
    Scheduler* s = sched;
    Fiber* f = s->cur;
    for (;;) {
        s->fn(s->launch, s->group[0], s->group[1], s->group[2], f->lid[0], f->lid[1], f->lid[2]);
        f->state = DONE;
        if (!_setjmp(f->jb)) _longjmp(s->home, 1);
        s = sched;
        f = s->cur;
    }
}

void resume(Scheduler* s, Fiber* f) {
    s->cur = f;
    f->state = RUNNING;
    if (!_setjmp(s->home)) {
        if (!f->started) {
            f->started = true;
            setcontext(&f->uc);
        }
        _longjmp(f->jb, 1);
    }
}

}  // namespace

extern "C" {

static Fiber* block(State why) {
    Scheduler* s = sched;
    if (s == nullptr || s->cur == nullptr) {  // a barrier in a kernel run without fibers: a translation bug
        abort();
    }
    Fiber* f = s->cur;
    f->state = why;
    if (!_setjmp(f->jb)) _longjmp(s->home, 1);
    return f;
}

void pyg_barrier(void) { block(AT_BARRIER); }

uint32_t pyg_simd_lane(void) {
    Scheduler* s = sched;
    if (s == nullptr || s->cur == nullptr) abort();
    return s->cur->index % SIMD_WIDTH;
}

// A simdgroup function's rendezvous: deposit this lane's value (size <= 16 bytes), wait for the simdgroup, copy every
// lane's value to out (32 x 16 bytes) and return the mask of the lanes that took part.
uint32_t pyg_simd_exchange(const void* value, uint32_t size, void* out) {
    Scheduler* s = sched;
    if (s == nullptr || s->cur == nullptr || size > SIMD_SLOT) abort();
    uint32_t index = s->cur->index;
    SimdGroup& g = s->simd[index / SIMD_WIDTH];
    uint32_t p = g.gen & 1u;
    std::memcpy(g.slots[p][index % SIMD_WIDTH], value, size);
    g.mask[p] |= 1u << (index % SIMD_WIDTH);
    block(AT_SIMD);
    std::memcpy(out, g.slots[p], sizeof g.slots[p]);
    return g.mask[p];
}

uint32_t pyg_spec(int index) { return spec_values[index]; }

// Runs every threadgroup of one dispatch; returns 0, or -1 if fiber stacks could not be allocated.
int pyg_dispatch(pyg_thread_fn fn, const void* launch, const pyg_dims* d, int uses_barriers) {
    spec_values = d->spec;
    const uint32_t lx = d->local[0], ly = d->local[1], lz = d->local[2];
    const uint32_t n = lx * ly * lz;
    if (!uses_barriers) {
        for (uint32_t gz = 0; gz < d->groups[2]; gz++)
            for (uint32_t gy = 0; gy < d->groups[1]; gy++)
                for (uint32_t gx = 0; gx < d->groups[0]; gx++)
                    for (uint32_t z = 0; z < lz; z++)
                        for (uint32_t y = 0; y < ly; y++)
                            for (uint32_t x = 0; x < lx; x++) fn(launch, gx, gy, gz, x, y, z);
        return 0;
    }
    Scheduler s;
    s.fn = fn;
    s.launch = launch;
    s.n = n;
    s.fibers = new Fiber[n];
    s.simd = new SimdGroup[(n + SIMD_WIDTH - 1) / SIMD_WIDTH];
    int rc = 0;
    for (uint32_t i = 0; i < n; i++) {
        Fiber& f = s.fibers[i];
        void* mem = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                         -1, 0);
        if (mem == MAP_FAILED) { rc = -1; break; }
        f.stack = static_cast<char*>(mem);
        getcontext(&f.uc);
        f.uc.uc_stack.ss_sp = f.stack;
        f.uc.uc_stack.ss_size = STACK_BYTES;
        f.uc.uc_link = nullptr;
        makecontext(&f.uc, fiber_main, 0);
        f.index = i;
        f.lid[0] = i % lx;
        f.lid[1] = (i / lx) % ly;
        f.lid[2] = i / (lx * ly);
    }
    Scheduler* outer = sched;
    sched = &s;
    if (rc == 0) {
        for (uint32_t gz = 0; gz < d->groups[2]; gz++)
            for (uint32_t gy = 0; gy < d->groups[1]; gy++)
                for (uint32_t gx = 0; gx < d->groups[0]; gx++) {
                    s.group[0] = gx; s.group[1] = gy; s.group[2] = gz;
                    for (uint32_t i = 0; i < n; i++) s.fibers[i].state = READY;
                    for (;;) {  // one round: every ready fiber runs until it returns or blocks
                        for (uint32_t i = 0; i < n; i++)
                            if (s.fibers[i].state == READY) resume(&s, &s.fibers[i]);
                        bool simd = false, barrier = false;
                        for (uint32_t i = 0; i < n; i++) {
                            simd |= s.fibers[i].state == AT_SIMD;
                            barrier |= s.fibers[i].state == AT_BARRIER;
                        }
                        if (simd) {  // each simdgroup's rendezvous completes with the lanes that arrived
                            for (uint32_t i = 0; i < n; i++)
                                if (s.fibers[i].state == AT_SIMD) s.fibers[i].state = READY;
                            for (uint32_t k = 0; k < (n + SIMD_WIDTH - 1) / SIMD_WIDTH; k++) {
                                SimdGroup& g = s.simd[k];
                                if (g.mask[g.gen & 1u]) {
                                    g.gen++;
                                    g.mask[g.gen & 1u] = 0;
                                }
                            }
                        } else if (barrier) {
                            for (uint32_t i = 0; i < n; i++)
                                if (s.fibers[i].state == AT_BARRIER) s.fibers[i].state = READY;
                        } else {
                            break;
                        }
                    }
                }
    }
    sched = outer;
    for (uint32_t i = 0; i < n; i++)
        if (s.fibers[i].stack) munmap(s.fibers[i].stack, STACK_BYTES);
    delete[] s.fibers;
    delete[] s.simd;
    return rc;
}

}
