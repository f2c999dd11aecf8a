"""Automatic differentiation, ggml's way: mark parameters (`Tensor.set_param`) and a scalar loss
(`Tensor.set_loss`), record the forward graph, then `build_backward(graph)` appends the backward nodes and returns
the `Gradients` (the gradient tensor of every parameter, the accumulators). One rule per op in `rules_math`,
`rules_layout`, `rules_indexed`, `rules_conv` and `rules_fused` (fused ops by decomposition); backward through an
op without a rule raises `GradientError` naming it.
"""

from pyggml.autodiff.backward import GRAD_TYPES, Gradients, build_backward, params_of
from pyggml.autodiff.rules import GradientError, differentiable, lookup

__all__ = ["GRAD_TYPES", "GradientError", "Gradients", "build_backward", "differentiable", "lookup", "params_of"]
