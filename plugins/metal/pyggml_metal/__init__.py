"""pyggml's Metal backend: the Vulkan plugin's GLSL compute shaders as MSL (SPIR-V -> spirv-cross), run through
Apple's Metal with PyObjC on macOS, and through a CPU emulator of the same MSL (MetalSim0) everywhere else."""

__version__ = "0.1.0"
