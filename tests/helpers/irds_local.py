"""A real ir_datasets dataset over local files, registered under an id (no download, no mock).

ir_datasets builds datasets from `formats` (TsvQueries, TsvDocs, TrecQrels) over download
objects; `LocalDownload` is a file already on disk. Its docstore index is written beside the
files (ir_datasets' lz4 docstore), so `docs_store().get_many(ids)` works as for any collection.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

_ids = itertools.count()


def local_dataset(
    folder: Path, queries: Path, docs_tsv: Path, qrels: Path | None
) -> tuple[str, Any]:
    """(id, dataset) of a dataset over `queries` (qid<TAB>text), `docs_tsv` (docid<TAB>text)
    and `qrels` (TREC qrels), registered in ir_datasets' registry under a fresh id."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    parts: list[Any] = [
        TsvQueries(LocalDownload(queries)),
        TsvDocs(LocalDownload(docs_tsv), namespace="relgrade-test", count_hint=None),
    ]
    if qrels is not None:
        parts.append(
            TrecQrels(LocalDownload(qrels), {0: "not", 1: "related", 2: "highly", 3: "perfect"})
        )
    dataset = Dataset(*parts)
    dataset_id = f"relgrade-test/{folder.name}-{next(_ids)}"
    ir_datasets.registry.register(dataset_id, dataset)
    return dataset_id, dataset
