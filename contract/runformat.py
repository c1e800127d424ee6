"""The one error a malformed run-directory file raises.

Its own module so that the run reader (``contract.schema``) and the readers of the files it gathers
(``contract.server_metrics``) can raise it without importing each other.
"""

from __future__ import annotations


class RunFormatError(ValueError):
    """A run directory file does not follow the schema; the message names file, line and what was expected."""
