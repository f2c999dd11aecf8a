"""Dataset: datapoints and labels held in host memory, cut into batches (ggml_opt_dataset).

Each datapoint is a flat float32 vector (an input tensor's column) and each label a flat float32 vector (for
classification, a one-hot row). A shuffle permutes the order in which datapoints are visited; batches are
contiguous runs of that order, so a train/validation split is a split of the index range.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from pyggml.errors import ShapeError

F32 = npt.NDArray[np.float32]


class Dataset:
    """`data` is (ndata, ne_datapoint), `labels` (ndata, ne_label); both are converted to float32."""

    def __init__(self, data: npt.ArrayLike, labels: npt.ArrayLike) -> None:
        d = np.ascontiguousarray(data, dtype=np.float32)
        lab = np.ascontiguousarray(labels, dtype=np.float32)
        if d.ndim != 2 or lab.ndim != 2 or d.shape[0] != lab.shape[0]:
            raise ShapeError(f"Dataset: data {d.shape} and labels {lab.shape} must be (ndata, n) arrays with the "
                             "same ndata")
        self.data = d
        self.labels = lab
        self.order = np.arange(d.shape[0])

    @property
    def ndata(self) -> int:
        return int(self.data.shape[0])

    def shuffle(self, rng: np.random.Generator, end: int | None = None) -> None:
        """Permute the visiting order of datapoints [0, end) (ggml_opt_dataset_shuffle with idata)."""
        n = self.ndata if end is None else end
        self.order[:n] = self.order[:n][rng.permutation(n)]

    def n_batches(self, batch_size: int, start: int, end: int) -> int:
        return (end - start) // batch_size

    def batches(self, batch_size: int, start: int, end: int) -> Iterator[tuple[F32, F32]]:
        """Whole batches (data, labels) over visiting positions [start, end); a remainder smaller than a batch is
        dropped, as ggml-opt does."""
        if batch_size <= 0:
            raise ShapeError(f"Dataset: batch size must be positive, got {batch_size}")
        for i in range(self.n_batches(batch_size, start, end)):
            idx = self.order[start + i * batch_size : start + (i + 1) * batch_size]
            yield self.data[idx], self.labels[idx]
