"""pyggml-conformance: the suite every pyggml backend is judged by.

Each case builds a small graph around one op of the core op table, runs it on the backend under test and on the
numpy reference with identical input bytes, and compares the results (NMSE thresholds as ggml's
test-backend-ops, exact for index ops), with guard bytes around every tensor to catch out-of-bounds writes.

    pyggml conformance --backend cpu --op MUL_MAT
    pytest --pyggml-backend=opencl
"""

__version__ = "0.1.0"

from pyggml_conformance.case import Case, CaseBuilder, Compare, fmt_params

__all__ = ["Case", "CaseBuilder", "Compare", "__version__", "fmt_params"]
