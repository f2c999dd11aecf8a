"""pyggml's Vulkan compute backend: GLSL compute shaders (SPIR-V built with glslangValidator), pipelines cached per
device, one command buffer recorded per graph and replayed while the graph is reused."""

__version__ = "0.1.0"
