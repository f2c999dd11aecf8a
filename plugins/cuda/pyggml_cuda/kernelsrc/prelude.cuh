/* pyggml CUDA prelude: the top of every translation unit nvcc compiles for this plugin.
 *
 * The kernel texts are the OpenCL plugin's (kernels/*.cl, written in its dialect.h, whose __CUDACC__ branch maps
 * KERNEL, GLOBAL, LOCAL, BARRIER(), GID(d) ... onto CUDA) and this plugin's fast paths (*.cu, same dialect).
 * One translation unit holds several specialisations of one file, each in its own namespace with its kernels
 * renamed NAME__TAG; everything that must exist once per unit comes here, before the first namespace:
 * system headers (mma.h: the WMMA fragments of tensorcore.h; dialect.h includes cuda_fp16.h, which must not open inside a namespace) and PYGGML_CUDA.
 */
#include <cuda_fp16.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>
#define PYGGML_CUDA 1
