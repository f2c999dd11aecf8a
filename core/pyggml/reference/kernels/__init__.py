"""The reference kernels, one module per op family; each collects its kernels in `rules`, and
`pyggml.reference.table` lists the families once."""
