#!/usr/bin/env bash
# The published GPU reference runs, on a lent GPU machine (see README, "Published results"):
#   OUT=/some/dir bash scripts/gpu_publish.sh suite    # gpu suite on CUDA + CPU comparison + report
#   OUT=/some/dir bash scripts/gpu_publish.sh extras   # MFU with torch.compile
#   OUT=/some/dir bash scripts/gpu_publish.sh answers  # issue 28: the default sweep, max-batch,
#       tune, effective batch with checkpointing, DDP and FSDP at nproc 1, each with its report
# Each stage leaves one tarball under $OUT (runs-<stage>.tar.gz) and prints its tables.
set -euo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
: "${OUT:?set OUT to a folder}"
stage=${1:?suite or extras}
stamp=$(date -u +%Y%m%d)
gpu=$(python -c "import torch; print(torch.cuda.get_device_name(0).split()[1].lower())")
cd_out() { tar -C "$OUT" -czf "$OUT/runs-$stage.tar.gz" "$@"; (cd "$OUT" && rm -rf "$@"); }

if [ "$stage" = suite ]; then
    # The gpu suite on CUDA (SGD and AdamW; Adam measures like AdamW), batch sizes to the OOM.
    python -m gpubench sweep gpu --devices cuda --optimizers sgd,adamw --quiet \
        --out "$OUT/$stamp-$gpu-gpu" | tail -4
    # The same machine's CPU on the MLP and CNN points it can finish in minutes.
    python -m gpubench sweep gpu --devices cpu --models mlp,cnn --batch-sizes 16,64,256 \
        --precisions fp32,bf16 --optimizers sgd,adamw --max-time 2 --quiet \
        --out "$OUT/$stamp-$gpu-cpu" | tail -3
    python -m gpubench report "$OUT/$stamp-$gpu-gpu" "$OUT/$stamp-$gpu-cpu" \
        --out "$OUT/$stamp-$gpu-report"
    cd_out "$stamp-$gpu-gpu" "$stamp-$gpu-cpu" "$stamp-$gpu-report"
elif [ "$stage" = extras ]; then
    # Utilisation: the base Transformer in bf16, eager and torch.compile, by batch size.
    python -m gpubench sweep gpu --devices cuda --models transformer --precisions bf16 \
        --optimizers adamw --batch-sizes 8,16,32 --compile eager,compile --quiet \
        --out "$OUT/$stamp-$gpu-mfu" | tail -2
    python - "$OUT/$stamp-$gpu-mfu" <<'PY' | tee "$OUT/mfu.txt"
import sys, gpubench
f = gpubench.load_results(sys.argv[1])
print(f[["compile", "batch_size", "status", "step_time_s", "tflops", "peak_tflops", "mfu",
         "compile_time_s", "avg_power_w", "throttle_reasons"]].to_string(index=False))
PY
    cd_out "$stamp-$gpu-mfu"
elif [ "$stage" = answers ]; then
    # The default sweep as a new user runs it (cpu + cuda), its verdict per device and across.
    python -m gpubench sweep --quiet --out "$OUT/$stamp-$gpu-quick" | tail -30
    python -m gpubench max-batch --model transformer --size base --device cuda --precision bf16 \
        --optimizer adamw --json | tee "$OUT/$stamp-$gpu-max-batch.json"
    python -m gpubench tune --model cnn --device cuda --out "$OUT/$stamp-$gpu-tune" | tail -20
    # Checkpointing must lower the peak: B=256 as 4 x 64 fits without it and must fit with it.
    python -m gpubench sweep --models transformer --size base --devices cuda --precisions bf16 \
        --optimizers adamw --batch-sizes 256 --accumulate 1,4 --checkpoint none,blocks \
        --max-time 3 --quiet --out "$OUT/$stamp-$gpu-effective-batch" | tail -12
    python -m gpubench sweep --models mlp,transformer --size small --devices cuda \
        --precisions bf16 --optimizers adamw --batch-sizes 64 --parallel ddp,fsdp --nproc 1 \
        --max-time 3 --quiet --out "$OUT/$stamp-$gpu-ddp" | tail -8
    cd_out "$stamp-$gpu-quick" "$stamp-$gpu-tune" "$stamp-$gpu-effective-batch" "$stamp-$gpu-ddp"
else
    echo "unknown stage $stage; allowed: suite, extras, answers" >&2; exit 2
fi
