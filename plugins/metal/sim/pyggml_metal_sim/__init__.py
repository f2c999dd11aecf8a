"""The Metal kernel emulator (distribution pyggml-metal-sim, test tooling of the Metal plugin): spirv-cross's MSL of
pyggml-metal compiled as C++20 against a shim and run on the CPU, the device MetalSim0 where PYGGML_METAL_SIM=1.
The Metal plugin never imports it; it is installed for development and CI (`make setup`), not with pyggml-metal."""

__version__ = "0.1.0"
