"""Test support of the RPC plugin (imports pyggml_rpc): `servers` (llama.cpp's and pyggml's RPC servers on free
ports), the fuzzing kit (`fuzz`, `fuzz_messages`, `fuzz_world`) and `abuse` (abusive clients)."""
