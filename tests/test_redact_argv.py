"""meta.json's command line hides secret-looking flags' values, not the suite's own counts (#53)."""

from __future__ import annotations

from specbench.locustfiles.run import redact_argv


def test_max_tokens_is_kept_and_real_secrets_are_hidden() -> None:
    argv = ["--max-tokens", "64", "--max-tokens=32", "--api-key-env", "MY_KEY", "--run-token", "tok-53",
            "--auth-token=abc", "--ladder", "1,4"]
    assert redact_argv(argv) == ["--max-tokens", "64", "--max-tokens=32", "--api-key-env", "MY_KEY", "--run-token",
                                 "<redacted>", "--auth-token=<redacted>", "--ladder", "1,4"]
