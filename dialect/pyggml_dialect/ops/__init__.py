"""Op families of the dialect kernels; each module collects its rules in `rules`, listed in `pyggml_dialect.rules`."""
