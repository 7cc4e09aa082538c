"""What a batch export records once its lines are rendered and written, in the order it is
given: the texts and id pairs of each chunk of pairs, the rows of its request lines in
`export_lines`, then the request files they are in (`grader.batch.files.request_files`), published.

The export's rendering side writes the request files itself and hands over one `Chunk` at a
time, made of plain rows (picklable, so the recorder can run in another process:
`grader.batch.files.export_process`; a line's row, not its bytes). Texts, id pairs and lines are
written together every `batch_pairs` id pairs and before a file is published, texts and id pairs
first (an import needs both), each table's rows in its key order; a file's size on disk is
checked, and it is renamed to its final name and listed in the store with its sha256 (hashed as
it was written), only once all its lines are recorded.
`recorded` is the number of the last chunk whose lines are all in the store: the rendering side
asks the store which keys the export already holds, and keeps the keys of the chunks after that
one itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

from grader.batch.files.exports import ExportState, LineRow
from grader.batch.files.request_files import WrittenFile, remove_temporaries
from grader.store.store import DocRow, Store

_BY_KEY = itemgetter(3)  # a LineRow's key


@dataclass
class Chunk:
    """One chunk of an export's pairs, as rows: `seq` numbers chunks from 1; `queries` and
    `docs` are the texts of its pairs (`docs` as `grader.store.store.doc_row` rows), `pairs`
    its (key, query_id, doc_id) id pairs, `lines` the rows of its new request lines in file
    order, `n_pairs` how many of its id pairs are exported, `files` the request files written
    whole since the last chunk (their lines are in this chunk or earlier ones)."""

    seq: int
    queries: list[tuple[str, str]] = field(default_factory=list)
    docs: list[DocRow] = field(default_factory=list)
    pairs: list[tuple[str, str, str]] = field(default_factory=list)
    lines: list[LineRow] = field(default_factory=list)
    n_pairs: int = 0
    files: list[WrittenFile] = field(default_factory=list)


class ExportRecorder:
    """Records the chunks of one export (see the module docstring)."""

    def __init__(
        self, store: Store, state: ExportState, out_dir: Path, export_id: str, batch_pairs: int
    ) -> None:
        self.store = store
        self.state = state
        self.out_dir = out_dir
        self.export_id = export_id
        self.batch_pairs = batch_pairs
        self.recorded = 0
        self.files: list[Path] = []  # published, in order
        self._added = 0  # the last chunk taken
        self._clear()

    def _clear(self) -> None:
        self._queries: dict[str, str] = {}
        self._docs: dict[str, DocRow] = {}
        self._pairs: set[tuple[str, str, str]] = set()
        self._lines: list[LineRow] = []
        self._n_pairs = 0

    def add(self, chunk: Chunk) -> None:
        """Record one chunk: its texts and id pairs first, then its lines, then its files."""
        self._queries.update(chunk.queries)
        self._docs.update((row[0], row) for row in chunk.docs)
        self._pairs.update(chunk.pairs)
        self._n_pairs += chunk.n_pairs
        self._lines += chunk.lines
        self._added = chunk.seq
        if chunk.files or len(self._pairs) >= self.batch_pairs:
            self._write()
        for written in chunk.files:
            sha256 = written.sha256()
            path = written.publish()
            self.state.add_file(
                self.export_id,
                written.file_no,
                str(path.resolve()),
                written.lines,
                written.size,
                sha256,
            )
            self.files.append(path)

    def finish(self) -> list[Path]:
        """Write what is left; the request files published, in order."""
        self._write()
        return list(self.files)

    def abandon(self) -> None:
        """Stop: files not published are removed (call once nothing writes them)."""
        remove_temporaries(self.out_dir, self.export_id)

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
