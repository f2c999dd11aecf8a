"""Op families of the GLSL shaders; each module collects its rules in `rules`, listed in `pyggml_glsl.rules`."""
