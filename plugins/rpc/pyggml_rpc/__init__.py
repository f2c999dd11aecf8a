"""pyggml-rpc: remote devices over ggml's RPC protocol, and a server for pyggml devices."""
