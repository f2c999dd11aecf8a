"""The meta device: tensor parallelism over several devices (ggml's ggml-backend-meta). See docs/meta-device.md.

Modules: `state` (split states, segments, shares), `rules` (one rule per op deriving computed tensors' states),
`layout` (the split through reshapes and views), `tensors` (states and per-device simple tensors), `transfer`
(set/get by state), `device` (MetaDevice, MetaBufferType, MetaBuffer), `plan` (subgraphs cut at partial sums,
delayed reduction), `backend` (MetaBackend), `allreduce` (Communicator, in-process and butterfly implementations).
What state each stored tensor gets is the caller's callback (`MetaDevice(devices, split_state)`); the llama example's
is `pyggml_llama.split_states`.
"""

from pyggml.backend.meta.allreduce import (
    ButterflyAllreduce,
    Communicator,
    ExtensionCommunicator,
    InProcessCommunicator,
    make_communicator,
)
from pyggml.backend.meta.backend import MetaBackend, MetaStats
from pyggml.backend.meta.device import MetaBuffer, MetaBufferType, MetaDevice
from pyggml.backend.meta.rules import RULES, SplitRuleError
from pyggml.backend.meta.state import (
    MAX_DEVICES,
    MIRRORED,
    PARTIAL,
    Axis,
    Segment,
    SplitState,
    describe_state,
    partial,
    segmented,
    split,
    split_shares,
)
from pyggml.backend.meta.tensors import SplitStateFn

__all__ = [
    "MAX_DEVICES", "MIRRORED", "PARTIAL", "RULES",
    "Axis", "ButterflyAllreduce", "Communicator", "ExtensionCommunicator", "InProcessCommunicator",
    "MetaBackend", "MetaBuffer", "MetaBufferType", "MetaDevice", "MetaStats",
    "Segment", "SplitRuleError", "SplitState", "SplitStateFn",
    "describe_state", "make_communicator", "partial", "segmented", "split", "split_shares",
]
