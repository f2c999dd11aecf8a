"""The Metal op table: the GLSL op rules of pyggml-glsl (its shaders are the Metal kernels, through SPIR-V and
spirv-cross; the Vulkan plugin runs the same rules), limited to the ops whose kernels pass the conformance suite on
MetalSim0. `supports_op` and the plan builder (`MetalDispatchBuilder`) both read `TABLE`."""

from __future__ import annotations

from pyggml.backend.op_table import OpTable
from pyggml.ops.base import Op
from pyggml_glsl.builder import Builder
from pyggml_glsl.rules import table

CLAIMED: frozenset[Op] = frozenset(Op[name] for name in (
    "ACC", "ADD", "ADD1", "ADD_ID", "ARANGE", "ARGMAX", "ARGSORT", "CLAMP", "CONCAT", "CONT", "COS", "COUNT_EQUAL",
    "CPY", "CROSS_ENTROPY_LOSS", "CROSS_ENTROPY_LOSS_BACK", "CUMSUM", "DIAG", "DIAG_MASK_INF", "DIAG_MASK_ZERO",
    "DIV", "DUP", "FILL", "FLASH_ATTN_EXT", "GET_ROWS", "GET_ROWS_BACK", "GLU", "GROUP_NORM", "L2_NORM",
    "LEAKY_RELU", "LOG", "MEAN", "MUL", "MUL_MAT", "MUL_MAT_ID", "NORM", "OPT_STEP_ADAMW", "OPT_STEP_SGD",
    "OUT_PROD", "PAD", "REPEAT", "REPEAT_BACK", "RMS_NORM", "RMS_NORM_BACK", "ROPE", "ROPE_BACK", "SCALE", "SET",
    "SET_ROWS", "SILU_BACK", "SIN", "SOFT_MAX", "SOFT_MAX_BACK", "SQR", "SQRT", "SUB", "SUM", "SUM_ROWS", "TOP_K",
    "UNARY",
    # convolutions, pooling and resampling; state-space and linear-attention recurrences
    "CONV_2D", "CONV_2D_DW", "CONV_TRANSPOSE_1D", "CONV_TRANSPOSE_2D", "IM2COL", "PAD_REFLECT_1D", "POOL_1D",
    "POOL_2D", "SOLVE_TRI", "TIMESTEP_EMBEDDING", "TRI", "UPSCALE", "GATED_DELTA_NET", "GATED_LINEAR_ATTN",
    "RWKV_WKV6", "RWKV_WKV7", "SSM_CONV", "SSM_SCAN", "CONV_3D", "IM2COL_3D", "COL2IM_1D", "ROLL", "WIN_PART",
    "WIN_UNPART", "GET_REL_POS", "ADD_REL_POS",
    # the gradients of IM2COL and POOL_2D (training)
    "IM2COL_BACK", "POOL_2D_BACK",
))
"""The ops Metal claims, each listed once its kernels passed the whole conformance suite on MetalSim0 (make
conformance-metal runs it); an op of the GLSL rules not listed here stays Vulkan's until it has. The GLSL rule
decides, op by op, which nodes (types, layouts) it takes, on both APIs."""

TABLE: OpTable[Builder] = table("Metal", CLAIMED)
