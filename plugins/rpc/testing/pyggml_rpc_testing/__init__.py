"""Test support of the RPC plugin (distribution pyggml-rpc-testing, beside the plugin's tests; imports pyggml_rpc):
the server fuzzing kit (`fuzz`, `fuzz_messages`, `fuzz_world`) and `abuse` (abusive clients), used by the plugin's
tests and its `benchmarks/fuzz_server.py`. Starting servers is shared (`pyggml_testing.rpc_servers`)."""
