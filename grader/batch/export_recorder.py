"""What a batch export records and writes once its lines are rendered, in the order it is given:
the texts and id pairs of each chunk of pairs, then its request lines into files
(`grader.batch.request_files`) and their rows in `export_lines`.

The export's rendering side hands over one `Chunk` at a time, made of plain rows (picklable, so
the recorder can run in another process: `grader.batch.export_process`). Texts, id pairs and
lines are written together every `batch_pairs` id pairs and before a request file is finished,
texts and id pairs first (an import needs both), each table's rows in its key order.
`recorded` is the number of the last chunk whose lines are all in the store: the rendering
side asks the store which keys the export already holds, and keeps the keys of the chunks
after that one itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

from grader.batch.exports import ExportState, LineRow
from grader.batch.request_files import RequestFiles
from grader.store.store import DocRow, Store

_BY_KEY = itemgetter(3)  # a LineRow's key


@dataclass
class Chunk:
    """One chunk of an export's pairs, as rows: `seq` numbers chunks from 1; `queries` and
    `docs` are the texts of its pairs (`docs` as `grader.store.store.doc_row` rows), `pairs`
    its (key, query_id, doc_id) id pairs, `lines` its new request lines (key, query_id,
    doc_id, the line's bytes) in order, `n_pairs` how many of its id pairs are exported."""

    seq: int
    queries: list[tuple[str, str]] = field(default_factory=list)
    docs: list[DocRow] = field(default_factory=list)
    pairs: list[tuple[str, str, str]] = field(default_factory=list)
    lines: list[tuple[str, str, str, bytes]] = field(default_factory=list)
    n_pairs: int = 0


class ExportRecorder:
    """Records the chunks of one export (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        state: ExportState,
        out_dir: Path,
        export_id: str,
        max_lines: int,
        max_bytes: int,
        batch_pairs: int,
    ) -> None:
        self.store = store
        self.state = state
        self.export_id = export_id
        self.batch_pairs = batch_pairs
        self.recorded = 0
        self._added = 0  # the last chunk whose lines are all placed in files
        self._clear()
        self.files = RequestFiles(store, out_dir, export_id, max_lines, max_bytes, self._write)

    def _clear(self) -> None:
        self._queries: dict[str, str] = {}
        self._docs: dict[str, DocRow] = {}
        self._pairs: set[tuple[str, str, str]] = set()
        self._lines: list[LineRow] = []
        self._n_pairs = 0

    def add(self, chunk: Chunk) -> None:
        """Record one chunk (its texts and id pairs first, then its lines)."""
        self._queries.update(chunk.queries)
        self._docs.update((row[0], row) for row in chunk.docs)
        self._pairs.update(chunk.pairs)
        self._n_pairs += chunk.n_pairs
        export_id, files = self.export_id, self.files
        for key, query_id, doc_id, line in chunk.lines:
            file_no, line_no = files.add(line)  # may record the batch (a file is full)
            self._lines.append((export_id, file_no, line_no, key, query_id, doc_id))
        self._added = chunk.seq
        if len(self._pairs) >= self.batch_pairs:
            self._write()

    def finish(self) -> list[Path]:
        """Write what is left and finish the last file; the request files, in order."""
        self.files.close()
        self._write()
        self.files.wait()
        return list(self.files.files)

    def abandon(self) -> None:
        """Stop: files handed over are finished, the one still open is removed."""
        self.files.abandon()

    def _write(self) -> None:
        """Texts and id pairs first, then the lines (an import needs both)."""
        if self._queries or self._docs:
            queries, docs = self._queries, self._docs
            self.store.put_text_rows(
                [(k, queries[k]) for k in sorted(queries)], [docs[k] for k in sorted(docs)]
            )
        if self._pairs:
            self.store.put_pairs(sorted(self._pairs))
        if self._lines or self._n_pairs:
            self._lines.sort(key=_BY_KEY)  # into the key index page after page
            self.state.add_lines(self.export_id, self._lines, self._n_pairs)
        self._clear()
        self.recorded = self._added
