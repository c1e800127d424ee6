"""The request routes the suite speaks (one dialect object each, in locustfiles/dialects.py).

Its own module so that both the record contract (``contract.schema``) and the options (``contract.settings``,
whose ``--api`` offers them) can import it without importing each other.
"""

from __future__ import annotations

from typing import Literal, get_args

Api = Literal["generate", "chat", "completions"]
APIS: tuple[str, ...] = get_args(Api)
