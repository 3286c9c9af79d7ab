"""Dequantize one GGUF block from its bytes: Q8_0, Q4_0 and Q4_1, as llama.cpp stores them (the traps: the fp16
scale read as a float32 or an int, Q4_0's codes used without subtracting 8, and the nibbles taken in byte order
instead of low halves first). The blocks are real: two from the course model's own file (tests check every expected
value against the `gguf` package's dequantization)."""
from __future__ import annotations

from .base import Case, Exercise, call

FN = "dequantize_block"

PROMPT = """\
Write `dequantize_block(type_name, raw)`: the 32 weights (floats) one GGUF block of `type_name` stores in `raw`, a
list of its bytes (integers 0–255), little-endian as in the file:

* **Q8_0** (34 bytes): a scale `d` as fp16 (2 bytes), then 32 signed 8-bit codes. weight i = d × code i.
* **Q4_0** (18 bytes): `d` as fp16, then 16 bytes holding 32 codes of 4 bits. weight i = d × (code i − 8).
* **Q4_1** (20 bytes): `d` as fp16, a min `m` as fp16, then 16 bytes of 4-bit codes. weight i = d × code i + m.

In both 4-bit types, byte j holds code j in its **low** 4 bits and code j + 16 in its **high** 4 bits.
`struct.unpack("<e", bytes(raw[0:2]))` reads an fp16.
"""

STARTER = '''\
import struct


def dequantize_block(type_name, raw):
    """The 32 weights one block stores."""
    d = struct.unpack("<e", bytes(raw[0:2]))[0]
    codes = []
    for byte in raw[2:18]:
        codes += [byte >> 4, byte & 0x0F]
    return [d * q for q in codes]
'''

REFERENCE = '''\
import struct


def dequantize_block(type_name, raw):
    raw = bytes(raw)
    d = struct.unpack("<e", raw[0:2])[0]
    if type_name == "Q8_0":
        return [d * q for q in struct.unpack("<32b", raw[2:34])]
    start = 4 if type_name == "Q4_1" else 2
    packed = raw[start:start + 16]
    codes = [b & 0x0F for b in packed] + [b >> 4 for b in packed]
    if type_name == "Q4_1":
        m = struct.unpack("<e", raw[2:4])[0]
        return [d * q + m for q in codes]
    return [d * (q - 8) for q in codes]
'''

# Real blocks: blk.0.attn_q.weight's first (Q4_1) and token_embd.weight's first (Q8_0) in the course model's GGUF;
# the Q4_0 blocks are the gguf package's quantization of 32 sine and cosine samples.
BLOCKS = {
    "q4_1 attn_q": ("Q4_1", [15, 48, 216, 185, 69, 135, 101, 64, 111, 101, 22, 75, 103, 118, 100, 80, 34, 103, 101, 90]),
    "q4_1 ffn_down": ("Q4_1", [21, 43, 152, 181, 91, 131, 100, 182, 31, 96, 120, 99, 148, 180, 112, 147, 5, 134, 137, 21]),
    "q8_0 embedding": ("Q8_0", [50, 25, 214, 13, 19, 247, 229, 238, 8, 208, 42, 168, 1, 222, 86, 129, 134, 8, 253, 33,
                                219, 238, 16, 79, 232, 30, 250, 249, 226, 17, 40, 57, 31, 177]),
    "q8_0 embedding 2": ("Q8_0", [250, 24, 42, 10, 14, 253, 42, 172, 239, 26, 195, 6, 238, 252, 49, 246, 10, 237, 25,
                                  79, 68, 233, 251, 242, 246, 255, 12, 10, 26, 10, 129, 15, 243, 233]),
    "q4_0 sine": ("Q4_0", [91, 158, 248, 211, 128, 49, 5, 27, 111, 191, 253, 248, 211, 128, 49, 5, 27, 111]),
    "q4_0 cosine": ("Q4_0", [83, 39, 78, 9, 97, 210, 186, 62, 7, 112, 227, 171, 45, 22, 144, 228, 157, 29]),
}


def _expected() -> dict[str, list[float]]:
    scope: dict = {}
    exec(REFERENCE, scope)  # the reference is plain Python; tests tie every value to the gguf package
    return {name: scope[FN](*block) for name, block in BLOCKS.items()}


EXPECTED = _expected()
NIBBLE_HINT = "Byte j holds code j in its low 4 bits and code j + 16 in its high 4 bits."
TOL = {"rel_tol": 1e-5, "abs_tol": 1e-7}  # Python's float64 against llama.cpp's float32 arithmetic


def _case(label: str, name: str, hidden: bool = False, hint: str = "") -> Case:
    return Case(label, call(FN, *BLOCKS[name]), EXPECTED[name], hidden=hidden, hint=hint, **TOL)


CASES = (
    _case("Q8_0: token_embd.weight's first block (the model's own file)", "q8_0 embedding"),
    _case("Q4_0: 32 sine samples", "q4_0 sine", hint=NIBBLE_HINT + " Q4_0 codes are offset by 8."),
    _case("Q4_1: blk.0.attn_q.weight's first block (the model's own file)", "q4_1 attn_q",
          hint=NIBBLE_HINT + " Q4_1 adds the min m: d × code + m."),
    _case("hidden 1", "q4_1 ffn_down", hidden=True),
    _case("hidden 2", "q8_0 embedding 2", hidden=True),
    _case("hidden 3", "q4_0 cosine", hidden=True),
)

EXERCISE = Exercise(
    id="gguf-block", title="Dequantize a GGUF block from its bytes", prompt=PROMPT, starter=STARTER,
    reference=REFERENCE, cases=CASES, functions=(FN,),
    summary="Read Q8_0, Q4_0 and Q4_1 blocks as llama.cpp stores them: an fp16 scale (and min), then the codes.")
