"""CUDA-only rules (fast paths) that replace some of the shared rules in the CUDA op table."""
