"""Eval cases loaded from dataset files, Hugging Face folders and Python factories.

An eval file may take its cases from a dataset instead of listing them inline::

    dataset: {path: data/qa.csv, prompt: question, expected: answer, id: qid}
    dataset: data/extraction.jsonl
    dataset: {path: hellaswag, split: validation, prompt: ctx, choices: endings, answer: label}
    dataset: {factory: "gen:addition", args: {n: 20}, shuffle: true, seed: 3}

Sources: CSV, JSONL, parquet files, folders of parquet files (one file or shard set per split),
Hugging Face ``save_to_disk`` folders (a ``Dataset`` or a ``DatasetDict``, Arrow IPC streams),
and a ``module:function`` factory that returns or yields JSONL-shaped mappings. pyarrow is
imported only when a parquet or Arrow source is read.

:class:`DatasetSource` is the ``dataset:`` value; :func:`load_dataset` reads what it names into
:class:`DatasetRow` values. Every problem is a :class:`DatasetError` naming the file (or the
factory) and the line of a CSV/JSONL file or the row of a table.
"""

from __future__ import annotations

from .dataset_load import load_dataset
from .rows import DatasetRow
from .source import DatasetError, DatasetSource

__all__ = ["DatasetError", "DatasetRow", "DatasetSource", "load_dataset"]
