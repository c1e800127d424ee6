"""SGLang's error bodies, one builder per shape (see docs/protocols.md).

* ``flat_error``: HTTPException / pydantic / OpenAI-route errors, the HTTP-level shape;
* ``generate_contract_error``: ``/generate`` body that fails SGLang's schema check;
* ``generate_value_error``: ``/generate`` ValueError (e.g. prompt too long), nested;
* ``openai_stream_error`` / ``generate_stream_error``: the ``data: {"error": ...}`` line inside a stream.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ApiError",
    "flat_error",
    "generate_contract_error",
    "generate_stream_error",
    "generate_value_error",
    "nested_error",
    "openai_stream_error",
]


def flat_error(status: int, message: str, err_type: str) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": status}


def nested_error(status: int, message: str) -> dict[str, Any]:
    """vLLM's OpenAI-server error body (``ErrorResponse``): the fields under ``error``."""
    err_type = "ServiceUnavailableError" if status == 503 else "TooManyRequestsError"
    return {"error": {"message": message, "type": err_type, "param": None, "code": status}}


def generate_contract_error(message: str) -> dict[str, Any]:
    return {"error": message}


def generate_value_error(message: str) -> dict[str, Any]:
    return {"error": {"message": message}}


def openai_stream_error(message: str, status: int = 503, err_type: str = "SERVICE_UNAVAILABLE") -> dict[str, Any]:
    return {"error": flat_error(status, message, err_type)}


def generate_stream_error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False}}


class ApiError(Exception):
    """Raised while handling a request; carries the HTTP status and the exact body to send."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(str(body))
        self.status, self.body = status, body

    @property
    def message(self) -> str:
        inner = self.body.get("error", self.body)
        return str(inner.get("message", inner) if isinstance(inner, dict) else inner)

    @classmethod
    def bad_request(cls, message: str, err_type: str = "Bad Request") -> ApiError:
        return cls(400, flat_error(400, message, err_type))
