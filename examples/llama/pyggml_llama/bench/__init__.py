"""`pyggml-llama bench`: llama-bench's tests, options and output for pyggml (`cli`), and the timing core that
`bench_llama.py` shares (`timing`)."""

from pyggml_llama.bench.timing import BenchTest, Evaluator, Runner, SessionEvaluator, mean_stddev, prompt_bos

__all__ = ["BenchTest", "Evaluator", "Runner", "SessionEvaluator", "mean_stddev", "prompt_bos"]
