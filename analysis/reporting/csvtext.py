"""The one CSV writer of every ``.csv`` output, so that all of them quote, join lists and leave gaps alike.

Its own module, imported by each format's module (``serialize``, ``equivalence_report``, ``live``,
``multi_serialize``), so that none of them imports another only for it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any


def csv_text(fieldnames: Sequence[str], rows: list[dict[str, Any]]) -> str:
    """CSV with a header row (even when empty); lists joined with ';', None as empty."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fieldnames), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ";".join(map(str, v)) if isinstance(v, list) else v for k, v in row.items()})
    return buf.getvalue()
