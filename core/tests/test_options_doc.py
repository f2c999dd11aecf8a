"""docs/options.md's tables are what `python -m pyggml.tools.options_docs` makes of the declarations, for every group
whose plugin is installed here (a plugin not installed keeps its committed section), so the page cannot drift from
the code; every group installed here is on the page."""

from __future__ import annotations

from pyggml.tools import options_docs


def test_every_group_installed_here_is_on_the_page_as_declared() -> None:
    _, committed = options_docs.split(options_docs.DOC.read_text(encoding="utf-8"))
    page = options_docs.sections(committed)
    fresh = options_docs.sections(options_docs.render())
    missing = sorted(set(fresh) - set(page))
    assert not missing, f"docs/options.md lacks {missing}: run python -m pyggml.tools.options_docs --write"
    stale = [label for label, text in fresh.items() if page[label] != text]
    assert not stale, f"docs/options.md is out of date for {stale}: run python -m pyggml.tools.options_docs --write"


def test_the_page_lists_pyggml_s_own_groups_and_the_device_groups() -> None:
    text = options_docs.render()
    for label in ("plugins", "default device", "scheduler", "meta", "mpi", "cpu"):
        assert f"### {label}\n" in text
    assert "| `n_threads`, `threads` | `PYGGML_CPU_THREADS` | the cores this process may use | yes |" in text
    assert "| `debug` | `PYGGML_SCHED_DEBUG` | 0 | - |" in text
