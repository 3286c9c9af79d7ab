"""`python -m inference_core generate … --json`: the JSON's metrics, --no-cache and --chat (in-process main())."""
from __future__ import annotations

import json

import pytest

from inference_core.__main__ import main
from inference_core.engine.loaded_model import GenerationParams

PROMPT = "The capital of France is"
N_NEW = 4
KV_BYTES_PER_TOKEN = 46_080  # SmolLM2-135M fp32: 2 × 30 layers × 3 KV heads × 64 dims × 4 bytes


def _generate(capsys, *extra: str) -> dict:
    assert main(["generate", "--prompt", PROMPT, "--max-new-tokens", str(N_NEW), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.model
def test_generate_json_metrics_no_cache_and_chat(engine, capsys):
    assert engine.config.kv_bytes_per_token(4) == KV_BYTES_PER_TOKEN
    plain_ids = engine.encode_prompt(PROMPT, chat=False)
    chat_ids = engine.encode_prompt(PROMPT, chat=True)

    cached = _generate(capsys)
    no_cache = _generate(capsys, "--no-cache")
    chat = _generate(capsys, "--chat")

    # The kernels this run's forwards took: every step of these runs (the chat template's prefill too) fuses.
    assert cached["kernels"] == no_cache["kernels"] == chat["kernels"] == ["cpu-fused-step fp32"]
    for out in (cached, no_cache, chat):
        assert set(out) == {"token_ids", "text", "finish_reason", "metrics", "kernels"}
        m = out["metrics"]
        assert set(m) == {"ttft_s", "tpot_s", "tokens_per_s", "kv_bytes", "n_prompt_tokens"}
        n = len(out["token_ids"])
        assert 1 <= n <= N_NEW and out["finish_reason"] in ("length", "eos")
        assert out["finish_reason"] == "eos" or n == N_NEW
        assert 0 < m["ttft_s"] < 60
        if n > 1:
            assert 0 < m["tpot_s"] < 60 and m["tokens_per_s"] > 0
            assert m["tokens_per_s"] == pytest.approx(1 / m["tpot_s"], rel=1e-6)  # same decode steps timed
        assert out["text"] == engine.tokenizer.decode(out["token_ids"], skip_special=True)

    # the cached run holds K/V for every position but the last sampled token (never fed back)
    n = len(cached["token_ids"])
    assert cached["metrics"]["n_prompt_tokens"] == len(plain_ids)
    assert cached["metrics"]["kv_bytes"] == KV_BYTES_PER_TOKEN * (len(plain_ids) + n - 1)
    # --no-cache keeps no K/V at all (engine.generate_events reports 0), and greedy decodes the same tokens
    assert no_cache["metrics"]["kv_bytes"] == 0
    assert no_cache["metrics"]["n_prompt_tokens"] == len(plain_ids)
    assert no_cache["token_ids"] == cached["token_ids"] == engine.generate_ids(
        plain_ids, GenerationParams(max_new_tokens=N_NEW))
    assert "Paris" in cached["text"]

    # --chat wraps the prompt in the ChatML template: other, longer prompt tokens
    assert chat_ids != plain_ids and len(chat_ids) > len(plain_ids)
    assert chat["metrics"]["n_prompt_tokens"] == len(chat_ids)
    assert chat["metrics"]["kv_bytes"] == KV_BYTES_PER_TOKEN * (len(chat_ids) + len(chat["token_ids"]) - 1)
    assert chat["token_ids"] == engine.generate_ids(chat_ids, GenerationParams(max_new_tokens=N_NEW))



# --- Bad arguments: one line, exit code 2, before any model loads -------------------------------------

BAD_ARGUMENTS = [
    (["generate", "--prompt", "hi", "--model", "nope"], "--model: unknown model 'nope'"),
    (["generate", "--prompt", "hi", "--max-new-tokens", "-3"], "--max-new-tokens: must be at least 1"),
    (["generate", "--prompt", "hi", "--max-new-tokens", "x"], "invalid int value: 'x'"),
    (["generate", "--prompt", "hi", "--quant", "int3"], "--quant: unknown quantization format 'int3'"),
    (["generate", "--prompt", "hi", "--top-p", "0"], "--top-p: must be in (0, 1]"),
    (["generate", "--prompt", "hi", "--temperature", "-1"], "--temperature: must be at least 0"),
    (["generate"], "the following arguments are required: --prompt"),
    (["generate", "--prompt", "hi", "--bogus"], "unrecognized arguments: --bogus"),
    (["bogus"], "invalid choice: 'bogus'"),
    (["speculate", "--prompt", "hi", "--draft", "nope"], "--draft: unknown model 'nope'"),
    (["speculate", "--prompt", "hi", "--k", "0"], "--k: must be at least 1"),
    (["speculate", "--prompt", "hi", "--draft", "ngram:7"], "ngram:N needs N in 1..3"),
    (["batch", "--prompts-file", "/no/such/prompts.txt"], "--prompts-file: '/no/such/prompts.txt' is not a file"),
    (["batch", "--prompts-file", "README.md", "--block-size", "0"], "--block-size: must be at least 1"),
    (["quantize-report", "--formats", "fp32,int3"], "--formats: unknown quantization format 'int3'"),
]


@pytest.mark.parametrize("argv,message", BAD_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_ARGUMENTS])
def test_bad_argument_is_one_line_and_exit_code_2(argv, message, capsys, monkeypatch):
    import importlib

    import inference_core.engine.loaded_model as engine_module
    from inference_core.__main__ import SUBCOMMANDS

    # the sub-command modules bind load_engine when imported: patch their names too (imported first, so a module
    # first imported here does not keep the stand-in after the test)
    refuse = lambda *a, **k: pytest.fail("loaded a model for a bad argument")  # noqa: E731
    for module in [engine_module, *(importlib.import_module(name) for name, _ in SUBCOMMANDS)]:
        if hasattr(module, "load_engine"):
            monkeypatch.setattr(module, "load_engine", refuse)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "error:" in lines[0], captured.err


def test_missing_model_pack_is_one_line_without_traceback():
    """A real process: a model whose files are not installed (the Qwen pair unless `make models-qwen` ran)."""
    import subprocess
    import sys

    from inference_core.model.weights import MODELS, is_installed

    missing = [name for name in MODELS if not is_installed(name)]
    if not missing:
        pytest.skip("every model is installed here")
    result = subprocess.run([sys.executable, "-m", "inference_core", "speculate", "--prompt", "hi", "--model",
                             missing[0]], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert f"model {missing[0]!r} is not installed: run " in result.stderr


def test_every_option_of_every_command_has_help(capsys):
    import argparse

    from inference_core.cli.args import OneLineParser
    from inference_core.__main__ import SUBCOMMANDS

    parser = OneLineParser(prog="x")
    sub = parser.add_subparsers(dest="command", parser_class=OneLineParser)
    import importlib

    for module, func in SUBCOMMANDS:
        getattr(importlib.import_module(module), func)(sub)
    for name, subparser in sub.choices.items():
        bare = [a.option_strings for a in subparser._actions if a.help in (None, "") and a.help != argparse.SUPPRESS]
        assert not bare, f"{name}: options without help: {bare}"
    with pytest.raises(SystemExit) as exit_info:
        main(["batch", "--help"])
    assert exit_info.value.code == 0 and "--jsonl" in capsys.readouterr().out


def test_batch_reads_json_lines_only_when_told(tmp_path):
    from inference_core.cli.batch import read_prompts

    text = tmp_path / "prompts.txt"
    text.write_text('{"prompt": "x"} is a prompt about JSON\nplain\n')
    assert read_prompts(str(text)) == [{"prompt": '{"prompt": "x"} is a prompt about JSON'}, {"prompt": "plain"}]
    lines = tmp_path / "prompts.jsonl"
    lines.write_text('{"prompt": "a", "max_new_tokens": 2}\n\n{"prompt": "b"}\n')
    assert read_prompts(str(lines), jsonl=True) == [{"prompt": "a", "max_new_tokens": 2}, {"prompt": "b"}]
    lines.write_text('{"prompt": "a"}\nnot json\n')
    with pytest.raises(ValueError, match="line 2: not JSON"):
        read_prompts(str(lines), jsonl=True)


@pytest.mark.model
def test_generate_names_the_kernel_that_ran(engine, capsys):
    assert main(["generate", "--prompt", PROMPT, "--max-new-tokens", "2", "--quant", "int8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernels"] in (["cpu-fused-step int8 avx2"], ["cpu-fused-step int8 vnni"])  # vnni: the CPU has AVX-512 VNNI
    assert _generate(capsys)["kernels"] == ["cpu-fused-step fp32"]
