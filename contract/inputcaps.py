"""How much of a user's file is read: the same caps for every prompt set and trace format (#70).

Why: a prompt set or trace is held in memory, and a small file can stand for a huge one (a 510 KB ``.gz`` of
512 MiB of newlines, a 2.5 KB Parquet file whose one dictionary value is repeated thousands of times). So every
reader counts what it decodes, as it decodes it, and stops with one line as soon as a cap is passed, before the
rest is read: at most ``MAX_INPUT_BYTES`` of text (decompressed, decoded), ``MAX_INPUT_LINES`` lines or rows, and
``MAX_LINE_BYTES`` in one line. A compressed file (``.gz``, Parquet) is sized before any of it is kept, so the
refusal of a bomb costs a few MB of memory, not the size it stands for. docs/reference/limits.md repeats the caps.

The readers pass their own error type (``PromptError``, ``TraceError``), so a refusal reads like any other mistake
in that file. Pure: the standard library, and pyarrow only for Parquet.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

#: Decompressed text of one prompt set or trace: its prompts are held in memory (ShareGPT's file is 0.65 GiB).
MAX_INPUT_BYTES = 2**30
#: Lines (rows) of one file: LMSYS-Chat-1M has a million conversations, BurstGPT's first trace 1.43 million rows.
MAX_INPUT_LINES = 2_000_000
#: One line (one prompt or one request): 64 MiB of text is some 16 million tokens, beyond any model's context.
MAX_LINE_BYTES = 64 * 2**20
_CHUNK = 2**20
_PARQUET_BATCH_BYTES = 64 * 2**20


def size_text(n: float) -> str:
    """1 GiB, 64 MiB, 2.5 KiB: how the caps are said."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{int(n)} bytes"


def over_bytes(display: str, error: type[Exception], where: str = "") -> Exception:
    return error(f"{display}: more than {size_text(MAX_INPUT_BYTES)} of text{where}; at most "
                 f"{size_text(MAX_INPUT_BYTES)} is read, as the set is held in memory (take a sample of it)")


def over_lines(display: str, error: type[Exception], what: str = "lines") -> Exception:
    return error(f"{display}: more than {MAX_INPUT_LINES} {what}; at most {MAX_INPUT_LINES} are read, as the set "
                 f"is held in memory (take a sample of it)")


class LineSource(Protocol):
    """A binary file, plain or decompressing (``gzip.GzipFile``)."""

    def readline(self, size: int = -1, /) -> bytes: ...


def capped_lines(f: LineSource, display: str, error: type[Exception]) -> Iterator[bytes]:
    """The file's lines (with their line ends), read one at a time and never more than the caps: an error as
    soon as the text passes ``MAX_INPUT_BYTES``, a line ``MAX_LINE_BYTES`` or the count ``MAX_INPUT_LINES``
    (blank lines count: a file of newlines is refused at the cap, not after billions of them)."""
    total = 0
    lineno = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        lineno += 1
        total += len(raw)
        if lineno > MAX_INPUT_LINES:
            raise over_lines(display, error)
        if total > MAX_INPUT_BYTES:
            raise over_bytes(display, error, f" (passed on line {lineno})")
        if len(raw) > MAX_LINE_BYTES:
            raise error(f"{display} line {lineno}: longer than {size_text(MAX_LINE_BYTES)}; a line is one prompt or "
                        f"one request, at most {size_text(MAX_LINE_BYTES)} of it is read")
        yield raw


def text_lines(raw_lines: Iterable[bytes], display: str, error: type[Exception]) -> Iterator[str]:
    """Lines decoded as UTF-8 as they are read (a byte-order mark on the first is dropped), without their line
    ends; a bad byte names its line and column."""
    for lineno, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{display} line {lineno}: not UTF-8 text (bad byte at column {e.start + 1})") from None
        yield line.rstrip("\r\n")


def check_plain_size(path: Path, display: str, error: type[Exception]) -> int:
    """A file read as it is: its size on disk is its text, refused before it is opened; its size."""
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise error(f"{display}: {size:,} bytes; at most {size_text(MAX_INPUT_BYTES)} is read, as the set is held "
                    f"in memory (take a sample of it)")
    return size


def check_gzip(path: Path, display: str, error: type[Exception]) -> int:
    """Size a ``.gz`` file before any of it is kept: its decompressed bytes and lines, counted chunk by chunk, up
    to the caps (a bomb is refused after reading just past them, in constant memory); its decompressed size."""
    total = lines = 0
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                total += len(chunk)
                lines += chunk.count(b"\n")
                if total > MAX_INPUT_BYTES:
                    raise over_bytes(display, error, " once decompressed")
                if lines > MAX_INPUT_LINES:
                    raise over_lines(display, error)
    except (EOFError, OSError, zlib.error) as e:
        raise error(f"{display}: the gzip file is cut short or damaged ({str(e)[:160]})") from None
    return total


def gzip_lines(path: Path, display: str, error: type[Exception]) -> Iterator[str]:
    """A ``.gz`` text file's lines, sized first (``check_gzip``), then read under the caps."""
    check_gzip(path, display, error)
    with gzip.open(path, "rb") as f:
        yield from text_lines(capped_lines(f, display, error), display, error)


def plain_lines(path: Path, display: str, error: type[Exception]) -> Iterator[str]:
    """A text file's lines under the caps (its size checked before it is opened)."""
    check_plain_size(path, display, error)
    with path.open("rb") as f:
        yield from text_lines(capped_lines(f, display, error), display, error)


def _decoded_bytes(array: Any) -> int:
    """The bytes ``array`` stands for once every value is written out: a dictionary's values counted each time
    an index uses them, a list's elements each."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _decoded_bytes(array.flatten()) + 8 * len(array)
    if pa.types.is_struct(kind):
        return sum(_decoded_bytes(array.field(i)) for i in range(kind.num_fields))
    if pa.types.is_dictionary(kind):
        lengths = _decoded_lengths(array.dictionary)
        return int(pc.sum(pc.take(lengths, array.indices)).as_py() or 0) + 8 * len(array)
    if pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind) \
            or pa.types.is_large_binary(kind):
        return int(pc.sum(pc.binary_length(array)).as_py() or 0) + 8 * len(array)
    return int(array.nbytes)


def _decoded_lengths(values: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_string(values.type) or pa.types.is_binary(values.type) or pa.types.is_large_string(values.type) \
            or pa.types.is_large_binary(values.type):
        return pc.binary_length(values)
    return pa.array([_decoded_bytes(values.slice(i, 1)) for i in range(len(values))], pa.int64())


def parquet_rows(path: Path, display: str, columns: Iterable[str],
                 error: type[Exception]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The ``columns`` of a Parquet file row by row, each as (``"FILE row N"``, values), once ``check_parquet``
    has sized them; read a batch at a time."""
    import pyarrow as pa

    reader, batch, _ = _parquet_sized(path, display, list(columns), error)
    number = 0
    try:
        with reader:
            for part in reader.iter_batches(batch_size=batch, columns=list(columns)):
                for row in part.to_pylist():
                    number += 1
                    yield f"{display} row {number}", row
    except (OSError, pa.ArrowException) as e:
        raise error(f"{display}: not a readable Parquet file ({str(e).splitlines()[0][:160]})") from None


def check_parquet(path: Path, display: str, error: type[Exception]) -> int:
    """Size a Parquet file (every column) under the caps without keeping any of it; its decoded bytes."""
    reader, _, total = _parquet_sized(path, display, None, error)
    reader.close()
    return total


def _parquet_sized(path: Path, display: str, wanted: list[str] | None,
                   error: type[Exception]) -> tuple[Any, int, int]:
    """(an open reader, rows per batch, decoded bytes) of ``wanted`` (None: all columns).

    Refused before any value is decoded when the metadata says more rows than ``MAX_INPUT_LINES`` or more than
    ``MAX_INPUT_BYTES`` uncompressed; then sized batch by batch with the text columns kept as dictionaries (a
    value repeated a million times is held once) and refused as soon as what the rows stand for passes
    ``MAX_INPUT_BYTES``. A batch holds about 64 MiB of the largest column chunk, so a row group is never decoded
    whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
        names = meta.schema.to_arrow_schema().names
        wanted = names if wanted is None else wanted
        missing = [c for c in wanted if c not in names]
        if missing:
            raise error(f"{display}: field {missing[0]!r}: missing (the file has: {', '.join(names)[:300]})")
        if meta.num_rows > MAX_INPUT_LINES:
            raise over_lines(display, error, f"rows ({meta.num_rows})")
        stored = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if stored > MAX_INPUT_BYTES:
            raise over_bytes(display, error, f" uncompressed ({size_text(stored)})")
        leaves = [meta.schema.column(j) for j in range(meta.num_columns)]
        used = [j for j in range(meta.num_columns) if leaves[j].path.split(".")[0] in wanted]
        texts = [leaves[j].path for j in used if leaves[j].physical_type == "BYTE_ARRAY"]
        biggest = max((meta.row_group(i).column(j).total_uncompressed_size for i in range(meta.num_row_groups)
                       for j in used), default=1)
        batch = max(1, min(4096, _PARQUET_BATCH_BYTES // max(1, biggest)))
        total = 0
        with pq.ParquetFile(path, read_dictionary=texts) as sizer:
            for part in sizer.iter_batches(batch_size=batch, columns=wanted):
                total += sum(_decoded_bytes(part.column(i)) for i in range(part.num_columns))
                if total > MAX_INPUT_BYTES:
                    raise over_bytes(display, error, " once decoded")
        return pq.ParquetFile(path, read_dictionary=texts), batch, total
    except (OSError, pa.ArrowException) as e:
        raise error(f"{display}: not a readable Parquet file ({str(e).splitlines()[0][:160]})") from None
