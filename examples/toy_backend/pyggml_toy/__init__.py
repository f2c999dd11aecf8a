"""pyggml-toy: a minimal out-of-tree pyggml backend. Its device `Toy0` keeps tensors in memory of its own (numpy
arrays standing in for device memory that the host cannot address) and computes ADD, MUL and SCALE of F32 tensors
with numpy. Everything else it refuses in `supports_op`, which the scheduler and the conformance suite respect."""

__version__ = "0.1.0"
