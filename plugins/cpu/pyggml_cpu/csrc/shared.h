/* pyggml's shared C-family source (pyggml.kernelsrc: dialect.h and the helpers written in it, the same text the
   OpenCL and CUDA kernels compile), here in dialect.h's host-C branch with this plugin's half conversions. A file
   includes this, then the shared headers it uses (blocks.h, quantize.h, kquantize.h, softmax.h). */
#ifndef PGC_SHARED_H
#define PGC_SHARED_H
#include "pgc.h"

#define PG_HOST_HALF_TO_FLOAT(h) pgc_fp16_to_fp32(h)
#define PG_HOST_FLOAT_TO_HALF(f) pgc_fp32_to_fp16(f)
#include "dialect.h"
#endif
