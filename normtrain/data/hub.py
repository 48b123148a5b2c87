"""Documents through Hugging Face ``datasets``: local parquet/json/arrow/csv files with its own builders, or a
dataset id on the hub.

This is the only module that imports ``datasets`` (and with it pyarrow and pandas), and only when such a source
is used. Local files are streamed: nothing is converted to Arrow or written to the datasets cache, and
``datasets`` prints neither "Downloading data" nor progress bars for them. A hub dataset is loaded the way
``datasets`` always does (downloaded into its cache, or streamed with ``--streaming``); offline, one that is not
in the cache fails with what to do instead of a traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

from normtrain.data.pieces import Documents, row_pieces
from normtrain.util.errors import DataError, first_line

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def file_documents(source: str, files: list[str], builder: str, text_field: str, val_fraction: float) -> Documents:
    """Local data files through the ``builder`` (parquet, json, arrow, csv), streamed and split by row hash."""
    where = f"the {builder} files {source!r}"
    with _quiet():
        dataset = _loaded(lambda d: d.load_dataset(builder, data_files=files, split="train", streaming=True), where)
    base = os.path.commonpath([os.path.dirname(p) for p in files])
    record = {"kind": "files", "builder": builder, "root": source, "n_files": len(files), "split": "by_hash",
              "val_fraction": val_fraction, "text_field": text_field}
    return Documents(record=record, pieces=lambda: _streamed(dataset, text_field, where, val_fraction),
                     files=tuple((os.path.relpath(p, base), p) for p in files))


def hub_documents(dataset_id: str, config: str | None, split: str, revision: str | None, streaming: bool,
                  text_field: str, val_fraction: float, local_files: list[str] | None = None) -> Documents:
    """One split of one config of a dataset on the Hugging Face hub (or in the local datasets cache), or of a
    local copy of one (``local_files``: its files, whose bytes the input fingerprint then hashes)."""
    if local_files is None and not HUB_ID.fullmatch(dataset_id):
        raise DataError(f"{dataset_id!r} is not a file, folder or glob here, nor a hub dataset id (owner/name)")
    where = f"the {'local ' if local_files else 'hub '}dataset {dataset_id!r}" + (f" (config {config!r})" if config
                                                                                 else "")
    with _quiet() if local_files else contextlib.nullcontext():
        dataset = _loaded(lambda d: d.load_dataset(dataset_id, name=config, split=split, revision=revision,
                                                   streaming=streaming), where, dataset_id)
    record = {"kind": "dataset_folder" if local_files else "hub", "id": dataset_id, "config": config,
              "split": split, "revision": revision, "streaming": streaming, "text_field": text_field,
              "split_rule": "by_hash", "val_fraction": val_fraction}
    base = os.path.abspath(os.path.expanduser(dataset_id))
    if local_files:
        record["root"] = base
    files = tuple(sorted((os.path.relpath(p, base), p) for p in local_files or ()))
    return Documents(record=record, pieces=lambda: _streamed(dataset, text_field, where, val_fraction,
                                                              quiet=bool(local_files)), files=files)


def _streamed(dataset, text_field: str, where: str, val_fraction: float, quiet: bool = True) -> Iterator:
    with _quiet() if quiet else contextlib.nullcontext():
        yield from row_pieces(_rows(dataset, where), text_field, where, val_fraction)


def _rows(dataset, where: str) -> Iterator[dict]:
    """The rows, with what ``datasets`` raises while reading them turned into a DataError."""
    rows = iter(dataset)
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except Exception as err:  # pyarrow, json and datasets' own errors for a damaged or unreadable file
            raise DataError(f"datasets could not read {where}: {first_line(err, 300)}") from None
        yield row


def _loaded(load: Callable[[Any], Any], where: str, dataset_id: str | None = None):
    import datasets

    try:
        return load(datasets)
    except ConnectionError as err:
        raise DataError(_offline_message(dataset_id or where, err)) from None
    except Exception as err:  # datasets' errors have no common base: name what failed and why
        if dataset_id and "NotFound" in type(err).__name__:
            raise DataError(f"{where} was not found ({first_line(err, 300)}): check the id, the config (--config) "
                            "and, for a gated or private dataset, log in with `hf auth login`") from None
        raise DataError(f"datasets could not load {where}: {first_line(err, 300)}") from None


def _offline_message(dataset_id: str, err: Exception) -> str:
    offline = [v for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if os.environ.get(v, "") not in ("", "0")]
    why = f"{' and '.join(offline)} {'is' if len(offline) == 1 else 'are'} set" if offline else first_line(err, 300)
    return (f"the dataset {dataset_id!r} is not in the local Hugging Face cache and the hub cannot be reached "
            f"({why}). Run the same normtrain-prepare command on a machine with network access and copy its "
            f"OUT_DIR here (or its ~/.cache/huggingface, then rerun here with HF_HUB_OFFLINE=1); or, if this "
            f"machine has network, unset HF_HUB_OFFLINE and HF_DATASETS_OFFLINE")


@contextlib.contextmanager
def _quiet():
    """datasets' warnings-and-below and its progress bars off for this block (then as they were)."""
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from datasets.utils import logging as datasets_logging

    level, bars_off = datasets_logging.get_verbosity(), are_progress_bars_disabled()
    datasets_logging.set_verbosity_error()
    disable_progress_bars()
    try:
        yield
    finally:
        datasets_logging.set_verbosity(level)
        if not bars_off:
            enable_progress_bars()
