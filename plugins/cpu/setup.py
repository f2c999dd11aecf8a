"""Build hook: the cffi extension pyggml_cpu._pgc is compiled at install (no prebuilt binaries)."""

from setuptools import setup

setup(cffi_modules=["pyggml_cpu/_build.py:ffibuilder"])
