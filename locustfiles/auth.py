"""The one place the API key becomes an HTTP header (read from the environment when needed, never stored)."""

from __future__ import annotations


def auth_headers(api_key: str | None) -> dict[str, str]:
    """``Authorization: Bearer <key>`` when a key is in use, else nothing."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}
