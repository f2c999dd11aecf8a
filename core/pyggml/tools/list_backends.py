"""Print the names of every device the loaded plugins offer, space separated (for `make demo`)."""

from __future__ import annotations

from pyggml.backend.registry import devices

if __name__ == "__main__":
    print(" ".join(d.name for d in devices()))
