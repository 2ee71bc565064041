#!/usr/bin/env bash
# GPU session 2, call 6 (nvidia-h200-x2): rms_norm baseline + perf, GPUS=1 then GPUS=2, each with
# its own empty Triton, cuTile Python and autotune caches (the first x2 call shared Triton's and
# cuTile's disk caches between the two runs); nvidia-smi samples both GPUs during each run.
set -u
R=$PWD
cd /tmp && rm -rf tilekit-bundle && tar -xf $R/dist/tilekit-bundle-*.tar && cd tilekit-bundle
export PYTHONUNBUFFERED=1
for g in 1 2; do
  export TRITON_CACHE_DIR=/tmp/c$g/triton CUDA_TILE_CACHE_DIR=/tmp/c$g/cutile TILEKIT_AUTOTUNE_CACHE=/tmp/c$g/autotune.json
  mkdir -p /tmp/c$g
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader -lms 250 > $OUT/util_gpus$g.csv &
  mon=$!
  s=$(date +%s%N)
  ./run.sh GPUS=$g KERNEL=rms_norm OUT_ROOT=out_gpus$g baseline perf > $OUT/run_gpus$g.txt 2>&1
  rc=$?
  echo "GPUS=$g rc=$rc wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))" | tee -a $OUT/walls.txt
  kill $mon
  tar czf $OUT/out_gpus$g.tgz out_gpus$g
done
