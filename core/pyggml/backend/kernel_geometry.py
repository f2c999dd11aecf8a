"""Launch geometry that the GPU backends' kernels of one algorithm share across kernel languages (the OpenCL/CUDA
dialect in pyggml_dialect, the GLSL of pyggml_glsl that Vulkan and Metal run): the host side of such a launch is
computed here once, so the kernels written for each language cannot drift apart in how they split the work.
"""

from __future__ import annotations

MAX_HEAD = 128
"""Largest head size S of the linear recurrences (RWKV_WKV6/7, GATED_LINEAR_ATTN, GATED_DELTA_NET): a lane holds S
floats of state in registers, so larger heads are refused (another backend runs them)."""
SCAN_LANES = 128
"""Most lanes (threads) of an SSM_SCAN work-group: one work-group per state row, a lane holding
d_state / SCAN_LANES of its elements."""
MAX_D_STATE = 8 * SCAN_LANES
"""Largest SSM_SCAN d_state: a lane holds at most 8 state elements."""


def scan_lanes(d_state: int) -> int:
    """Lanes of an SSM_SCAN work-group: d_state rounded up to a power of two, within 16..SCAN_LANES."""
    return min(SCAN_LANES, max(16, 1 << (d_state - 1).bit_length()))
