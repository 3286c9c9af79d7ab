"""Byte-level BPE tokenizer rebuilt from the GGUF's vocabulary and merges (no hub, no transformers)."""
from __future__ import annotations

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers

CONTROL, USER_DEFINED = 3, 4  # llama.cpp token_type values for special and added tokens
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def build_tokenizer_json(tok: dict) -> str:
    vocab = {t: i for i, t in enumerate(tok["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in tok["merges"]]
    bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False)
    hf = HFTokenizer(bpe)
    if tok.get("pre") == "qwen2":
        hf.normalizer = normalizers.NFC()
        hf.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
    else:
        hf.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    hf.decoder = decoders.ByteLevel()
    kinds = list(zip(tok["tokens"], tok["token_type"]))
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, kind in kinds if kind == CONTROL])
    hf.add_tokens([AddedToken(t, special=False, normalized=False) for t, kind in kinds if kind == USER_DEFINED])
    return hf.to_str()


class Tokenizer:
    """Thin wrapper: ids ↔ text, per-token display text, and the ChatML chat template."""

    def __init__(self, path: str, bos_token_id: int, eos_token_id: int, default_system: str = DEFAULT_SYSTEM) -> None:
        self._tok = HFTokenizer.from_file(path)
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.default_system = default_system
        self.vocab_size: int = self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int], skip_special: bool = False) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special)

    def token_text(self, token_id: int) -> str:
        """What one token contributes to the text (bytes of a split UTF-8 char show as U+FFFD)."""
        return self._tok.decode([token_id], skip_special_tokens=False)

    def chat_prompt(self, user: str, system: str | None = None) -> str:
        """ChatML with the generation prompt (SmolLM2's and Qwen2.5's; Qwen's tool calling not reproduced)."""
        sys_text = self.default_system if system is None else system
        return (f"<|im_start|>system\n{sys_text}<|im_end|>\n"
                f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
