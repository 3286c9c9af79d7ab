"""A paged KV-cache block allocator with reference counts: allocate, free, share, copy-on-write."""
from __future__ import annotations

from .base import Case, Exercise, ops

PROMPT = """\
Paged attention stores the KV cache in fixed-size **blocks** handed out by number. Sequences that share a prefix
(one prompt, several samples) share its blocks, so each block counts its users; a sequence about to write into a
shared block first gets its own copy (**copy-on-write**). Write the class `BlockAllocator(num_blocks)`:

* `allocate()` → the **lowest-numbered** free block, now used once. No free block: raise `MemoryError`.
* `share(block)` → `block`, with one more user (a second sequence now points at it).
* `free(block)` → `None`: one user fewer; at zero users the block is free again.
* `refcount(block)` → how many users `block` has (0 when it is free).
* `num_free()` → how many blocks are free.
* `write(block)` → the block the caller may write into: `block` itself if it has one user; otherwise a newly
  allocated block (the caller copies the data into it) and `block` loses this user. If no block is free for the
  copy, raise `MemoryError` and change nothing.

`share`, `free` and `write` on a block that is free, or a number outside `0 … num_blocks − 1`, raise `ValueError`
(so does `refcount` for a number outside that range).
"""

STARTER = '''\
class BlockAllocator:
    """Hands out fixed-size KV-cache blocks by number and counts who uses each one."""

    def __init__(self, num_blocks):
        self.free_blocks = list(range(num_blocks))

    def allocate(self):
        return self.free_blocks.pop(0)  # TODO: MemoryError when none is free; count users

    def share(self, block):
        raise NotImplementedError

    def free(self, block):
        self.free_blocks.append(block)  # TODO: only once the last user lets go

    def refcount(self, block):
        raise NotImplementedError

    def num_free(self):
        return len(self.free_blocks)

    def write(self, block):
        raise NotImplementedError
'''

REFERENCE = '''\
class BlockAllocator:
    def __init__(self, num_blocks):
        self.refs = [0] * num_blocks

    def _in_use(self, block):
        if not 0 <= block < len(self.refs) or self.refs[block] == 0:
            raise ValueError(f"block {block} is not allocated")

    def allocate(self):
        for block, users in enumerate(self.refs):
            if users == 0:
                self.refs[block] = 1
                return block
        raise MemoryError("no free block")

    def share(self, block):
        self._in_use(block)
        self.refs[block] += 1
        return block

    def free(self, block):
        self._in_use(block)
        self.refs[block] -= 1

    def refcount(self, block):
        if not 0 <= block < len(self.refs):
            raise ValueError(f"no block {block}")
        return self.refs[block]

    def num_free(self):
        return self.refs.count(0)

    def write(self, block):
        self._in_use(block)
        if self.refs[block] == 1:
            return block
        copy = self.allocate()
        self.refs[block] -= 1
        return copy
'''

CLS = "BlockAllocator"


def raises(name: str) -> dict:
    return {"raises": name}


def case(name: str, num_blocks: int, script: list[tuple[str, list, object]], hidden: bool = False,
         hint: str = "") -> Case:
    """A case from (method, args, expected result) steps on one allocator."""
    return Case(name, ops(CLS, [num_blocks], [(m, a) for m, a, _ in script]), [e for _, _, e in script],
                hidden=hidden, hint=hint)


CASES = (
    case("allocate hands out the lowest free block; MemoryError when none is left", 3, [
        ("allocate", [], 0), ("allocate", [], 1), ("num_free", [], 1), ("free", [0], None), ("allocate", [], 0),
        ("allocate", [], 2), ("allocate", [], raises("MemoryError"))]),
    case("share counts users; the block is free after the last free", 4, [
        ("allocate", [], 0), ("share", [0], 0), ("refcount", [0], 2), ("free", [0], None), ("refcount", [0], 1),
        ("num_free", [], 3), ("free", [0], None), ("num_free", [], 4), ("refcount", [0], 0)],
        hint="A shared block stays allocated until every user has freed it."),
    case("copy-on-write: a shared block is copied, a private one is written in place", 4, [
        ("allocate", [], 0), ("share", [0], 0), ("write", [0], 1), ("refcount", [0], 1), ("refcount", [1], 1),
        ("write", [0], 0), ("num_free", [], 2)]),
    case("freeing or sharing a free block is a ValueError", 2, [
        ("free", [0], raises("ValueError")), ("allocate", [], 0), ("free", [0], None),
        ("free", [0], raises("ValueError")), ("share", [1], raises("ValueError"))]),
    case("hidden 1", 2, [
        ("allocate", [], 0), ("share", [0], 0), ("allocate", [], 1), ("write", [0], raises("MemoryError")),
        ("refcount", [0], 2), ("free", [1], None), ("write", [0], 1), ("refcount", [0], 1)], hidden=True),
    case("hidden 2", 8, [
        ("allocate", [], 0), ("allocate", [], 1), ("share", [0], 0), ("share", [0], 0), ("share", [1], 1),
        ("share", [1], 1), ("refcount", [0], 3), ("write", [1], 2), ("write", [1], 3), ("write", [1], 1),
        ("num_free", [], 4), ("free", [0], None), ("free", [0], None), ("free", [0], None), ("num_free", [], 5)],
        hidden=True),
    case("hidden 3", 2, [
        ("free", [5], raises("ValueError")), ("refcount", [1], 0), ("share", [-1], raises("ValueError")),
        ("write", [0], raises("ValueError")), ("refcount", [7], raises("ValueError"))], hidden=True),
)

EXERCISE = Exercise(
    id="paged-block-allocator", title="A paged KV-cache block allocator", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(CLS,),
    summary="Blocks handed out by number, shared by sequences with reference counts, copied on write.")
