"""Op families of the Vulkan backend; each module collects its rules in `rules`, listed in `pyggml_vulkan.op_table`."""
