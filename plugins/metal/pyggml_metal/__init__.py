"""pyggml's Metal backend: pyggml-glsl's GLSL compute shaders (the Vulkan plugin's kernels too) as MSL (SPIR-V ->
spirv-cross) and their op rules, run through Apple's Metal with PyObjC on macOS. A CPU emulator of the same MSL
(MetalSim0) is test tooling of its own, pyggml-metal-sim (plugins/metal/sim), which this package never imports."""

__version__ = "0.1.0"
