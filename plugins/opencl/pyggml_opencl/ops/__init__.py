"""Op families of the OpenCL backend; each module registers its rules in `pyggml_opencl.op_table.TABLE`."""
