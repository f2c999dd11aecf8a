"""Build hook: the cffi extension pyggml_rpc._fnv is compiled at install (no prebuilt binaries)."""

from setuptools import setup

setup(cffi_modules=["pyggml_rpc/_build.py:ffibuilder"])
