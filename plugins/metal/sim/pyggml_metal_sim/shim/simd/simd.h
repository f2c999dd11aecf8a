// pyggml Metal emulator shim: Metal's <simd/simd.h>; the vector types live in metal_stdlib.
#pragma once
#include "../metal_stdlib"
