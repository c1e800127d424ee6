"""The emulated prefix cache (SGLang's radix cache, coarsely): shared prompt prefixes are served from cache.

Prompt text is hashed in blocks of ``BLOCK_CHARS`` characters; a new prompt's cached part is the longest run
of leading blocks some earlier prompt shared, reported as ``cached_tokens`` (characters / chars-per-token, as
SGLang reports ``meta_info.cached_tokens``) and skipped by prefill. A prompt seen before in full has all but
its last token cached. Bounded: when full, the cache is emptied (as a flush would).
"""

from __future__ import annotations

import hashlib

BLOCK_CHARS = 64


class PrefixCache:
    """Exact-prompt reuse and shared-prefix reuse (when enabled)."""

    def __init__(self, enabled: bool, max_entries: int = 500_000, chars_per_token: float = 4.0) -> None:
        self.enabled, self._max, self._chars_per_token = enabled, max_entries, chars_per_token
        self._seen: set[str] = set()
        self._blocks: set[bytes] = set()

    def cached_tokens(self, text: str, prompt_tokens: int) -> int:
        if not self.enabled:
            return 0
        if text in self._seen:
            return max(0, prompt_tokens - 1)
        if len(self._seen) + len(self._blocks) >= self._max:
            self.flush()
        self._seen.add(text)
        digest = hashlib.blake2b(digest_size=16)
        matched, still_matching = 0, True
        for start in range(0, len(text) - BLOCK_CHARS + 1, BLOCK_CHARS):
            digest.update(text[start:start + BLOCK_CHARS].encode())
            key = digest.copy().digest()
            if still_matching and key in self._blocks:
                matched = start + BLOCK_CHARS
            else:
                still_matching = False
                self._blocks.add(key)
        return min(max(0, prompt_tokens - 1), int(matched / self._chars_per_token))

    def flush(self) -> None:
        self._seen.clear()
        self._blocks.clear()
