"""The one CSV writer of every ``.csv`` output, so that all of them quote, join lists and leave gaps alike.

Its own module, imported by each format's module (``serialize``, ``equivalence_report``, ``live``,
``multi_serialize``), so that none of them imports another only for it.

A text cell may be a server's or a dataset's (a category, a prompt id, a model name): each goes through
``contract.servertext.csv_cell``, so one starting like a spreadsheet formula (``=``, ``+``, ``-``, ``@``) is written
with a leading ``'`` and opens as text, never as a formula (#70). Numbers are never touched.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from specbench.contract.servertext import csv_cell


def csv_text(fieldnames: Sequence[str], rows: list[dict[str, Any]]) -> str:
    """CSV with a header row (even when empty); lists joined with ';', None as empty, no text cell a formula."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fieldnames), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(";".join(map(str, v)) if isinstance(v, list) else v) for k, v in row.items()})
    return buf.getvalue()
