"""Prefix caching as vLLM does it: full blocks keyed by a chained hash, the longest cached run from the start, and
never the prompt's last token (the traps: keying a block by its own tokens alone, and serving every token)."""
from __future__ import annotations

from .base import Case, Exercise, call

FN = "cached_tokens"

PROMPT = """\
A prefix cache keeps the KV blocks of earlier prompts so that a new prompt starting the same way skips their
prefill. The engine caches only **full** blocks of `block_size` tokens, and keys each block by a **chained hash**:
the hash of the previous block's key together with this block's tokens. So a block's key stands for the whole
prefix up to its end, and two blocks holding the same tokens after different beginnings never share a key.

Write `cached_tokens(cached_prompts, prompt, block_size)`: how many of `prompt`'s tokens are served from the cache,
when every full block of every prompt in `cached_prompts` is cached. Walk the new prompt's block keys from the
start and stop at the first one not cached: only a cached run from the very start can be reused.

One more rule: the prompt's **last token** is never served from the cache, because its forward pass must run to
give the logits of the first new token (vLLM's rule, and our engine's). A prompt of exactly 4 blocks that is
entirely cached is served 3 blocks.
"""

STARTER = '''\
def block_keys(tokens, block_size):
    """One key per full block of `tokens`."""
    keys = []
    for i in range(len(tokens) // block_size):
        keys.append(tuple(tokens[i * block_size:(i + 1) * block_size]))  # only this block's own tokens?
    return keys


def cached_tokens(cached_prompts, prompt, block_size):
    """How many of `prompt`'s tokens the prefix cache serves."""
    cache = set()
    for old in cached_prompts:
        cache.update(block_keys(old, block_size))
    hits = 0
    for key in block_keys(prompt, block_size):
        if key not in cache:
            break
        hits += 1
    return hits * block_size
'''

REFERENCE = '''\
import hashlib


def block_keys(tokens, block_size):
    keys, parent = [], b""
    for i in range(len(tokens) // block_size):
        block = tokens[i * block_size:(i + 1) * block_size]
        parent = hashlib.sha256(parent + repr(block).encode()).digest()
        keys.append(parent)
    return keys


def cached_tokens(cached_prompts, prompt, block_size):
    cache = set()
    for old in cached_prompts:
        cache.update(block_keys(old, block_size))
    hits = 0
    for key in block_keys(prompt[:-1], block_size):  # the last token's forward must run
        if key not in cache:
            break
        hits += 1
    return hits * block_size
'''


def served(cached_prompts: list[list[int]], prompt: list[int], block_size: int) -> int:
    """The expected answer from the definition: the longest whole-block prefix of prompt[:-1] that some cached
    prompt's full blocks begin with (a chained key names exactly one prefix)."""
    usable = len(prompt[:-1]) // block_size
    best = 0
    for old in cached_prompts:
        n = 0
        while n < min(usable, len(old) // block_size) and old[:(n + 1) * block_size] == prompt[:(n + 1) * block_size]:
            n += 1
        best = max(best, n)
    return best * block_size


SYSTEM = list(range(100, 116))  # a 16-token system prompt shared by the requests below
CHAIN_HINT = ("A block's key must depend on every token before it (hash the previous block's key with this "
              "block's tokens): the same tokens after a different beginning are a different prefix.")
LAST_HINT = ("The prompt's last token is never served from the cache: its forward pass gives the first new token's "
             "logits.")


def _case(name: str, cached: list[list[int]], prompt: list[int], block_size: int, **extra) -> Case:
    return Case(name, call(FN, cached, prompt, block_size), served(cached, prompt, block_size), **extra)


CASES = (
    _case("a shared 16-token system prompt, blocks of 4", [SYSTEM + [1, 2, 3]], SYSTEM + [7, 8, 9, 10, 11], 4),
    _case("the same tokens after a different beginning are not cached",
          [[1, 2, 3, 4, 5, 6, 7, 8], [9, 9, 9, 9, 0, 0, 0, 0]], [9, 9, 9, 9, 5, 6, 7, 8, 42], 4, hint=CHAIN_HINT),
    _case("a prompt of exactly 3 cached blocks is served 2 of them", [[1, 2, 3, 4, 5, 6]], [1, 2, 3, 4, 5, 6], 2,
          hint=LAST_HINT),
    _case("a partial last block is never cached", [[5, 6, 7, 8, 9, 10, 11]], [5, 6, 7, 8, 9, 10, 11, 12, 13], 4),
    _case("nothing cached yet", [], SYSTEM + [1], 16),
    _case("hidden 1", [SYSTEM + [1, 2, 3, 4]], SYSTEM + [1, 2, 3, 4], 4, hidden=True),
    _case("hidden 2", [[0, 1, 2, 3, 4, 5], [6, 7, 2, 3, 4, 5]], [6, 7, 2, 3, 4, 5, 9], 2, hidden=True),
    _case("hidden 3", [[1] * 32, [2] * 32], [1] * 16 + [2] * 16 + [3], 8, hidden=True),
    _case("hidden 4", [SYSTEM, SYSTEM[:8] + [0] * 8], SYSTEM[:8] + [0] * 8 + [5], 4, hidden=True),
    _case("hidden 5", [[3, 1, 4, 1, 5, 9, 2, 6]], [3, 1, 4, 1, 5, 9, 2, 6], 1, hidden=True),
    _case("hidden 6", [list(range(64))], list(range(48)) + [0] * 16 + [1], 16, hidden=True),
)

EXERCISE = Exercise(
    id="prefix-cache-hits", title="Prefix-cache hits with chained block hashes", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(FN,),
    summary="How many prompt tokens a prefix cache serves: chained block keys, the longest cached run, never the last "
            "token.")
