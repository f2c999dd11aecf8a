"""The Metal kernel emulator: spirv-cross's MSL compiled as C++20 against a shim, run on the CPU (MetalSim0)."""
