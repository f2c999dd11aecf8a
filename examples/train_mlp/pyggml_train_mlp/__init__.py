"""Train a small MLP with pyggml's autodiff and optimiser ops on a dataset it generates (interleaved spirals)."""
