"""Byte-level BPE tokenizer rebuilt from the GGUF's vocabulary and merges (no hub, no transformers).

SmolLM2 splits digits one by one, then applies GPT-2's byte-level regex; special tokens
(`<|im_start|>`, `<|im_end|>`, …) are matched whole before BPE.
"""
from __future__ import annotations

from functools import lru_cache

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers

CONTROL = 3  # llama.cpp token_type for special/control tokens
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def build_tokenizer_json(tok: dict) -> str:
    vocab = {t: i for i, t in enumerate(tok["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in tok["merges"]]
    bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False)
    hf = HFTokenizer(bpe)
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    hf.decoder = decoders.ByteLevel()
    from tokenizers import AddedToken

    specials = [t for t, kind in zip(tok["tokens"], tok["token_type"]) if kind == CONTROL]
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return hf.to_str()


class Tokenizer:
    """Thin wrapper: ids ↔ text, per-token display text, and the ChatML chat template."""

    def __init__(self, path: str, bos_token_id: int, eos_token_id: int) -> None:
        self._tok = HFTokenizer.from_file(path)
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.vocab_size: int = self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int], skip_special: bool = False) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special)

    def token_text(self, token_id: int) -> str:
        """What one token contributes to the text (bytes of a split UTF-8 char show as U+FFFD)."""
        return self._tok.decode([token_id], skip_special_tokens=False)

    def chat_prompt(self, user: str, system: str | None = None) -> str:
        """SmolLM2's ChatML template with the generation prompt appended."""
        sys_text = DEFAULT_SYSTEM if system is None else system
        return (
            f"<|im_start|>system\n{sys_text}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
        )


@lru_cache(maxsize=4)
def load_tokenizer(name: str = "smollm2-135m") -> Tokenizer:
    from .weights import load_config, prepared_dir

    cfg = load_config(name)
    return Tokenizer(str(prepared_dir(name) / "tokenizer.json"), cfg.bos_token_id, cfg.eos_token_id)
