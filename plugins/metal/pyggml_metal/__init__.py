"""pyggml's Metal backend: the Vulkan plugin's GLSL compute shaders as MSL (SPIR-V -> spirv-cross), run through
Apple's Metal with PyObjC on macOS. A CPU emulator of the same MSL (MetalSim0) is test tooling of its own,
pyggml-metal-sim (plugins/metal/sim), which this package never imports."""

__version__ = "0.1.0"
