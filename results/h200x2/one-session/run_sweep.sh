#!/usr/bin/env bash
# session 3, call 2 (nvidia-h200-x2): make KERNEL=all baseline perf, GPUS=1 then GPUS=2, each with its
# own empty caches (cold), then each again with its caches filled (warm); nvidia-smi samples both GPUs.
set -u
R=$PWD
cd /tmp && rm -rf tilekit-bundle && tar -xf $R/dist/tilekit-bundle-*.tar && cd tilekit-bundle
export PYTHONUNBUFFERED=1
./run.sh doctor > /tmp/doctor.txt 2>&1   # unpacks the toolchain once, outside the timed runs
nproc > $OUT/walls.txt
run() {  # run NAME GPUS
  local name=$1 g=$2
  export TRITON_CACHE_DIR=/tmp/c$g/triton CUDA_TILE_CACHE_DIR=/tmp/c$g/cutile TILEKIT_AUTOTUNE_CACHE=/tmp/c$g/autotune.json
  mkdir -p /tmp/c$g
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader -lms 250 > /tmp/util_$name.csv &
  local mon=$! s=$(date +%s%N)
  ./run.sh GPUS=$g KERNEL=all OUT_ROOT=out_$name baseline perf > /tmp/make_$name.txt 2>&1
  local rc=$?
  echo "$name GPUS=$g rc=$rc wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))" | tee -a $OUT/walls.txt
  kill $mon
}
run cold1 1
run cold2 2
run warm1 1
run warm2 2
# where a port case's time goes: JIT stages of one rms_norm case, compiled from scratch
( . scripts/gpu_host_env.sh bundle >/dev/null; . env/env.sh
  export TILEKIT_AUTOTUNE_CACHE=/tmp/jit/autotune.json CUTILE_JIT_TIMING=1
  s=$(date +%s%N)
  python3 -m pytest -s -p no:cacheprovider tests/kernels/test_rms_norm.py -k "cutile_rs and test_perf and 262144-4096" > /tmp/jit.txt 2>&1
  echo "jit case wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))" >> $OUT/walls.txt )
cp /tmp/make_*.txt /tmp/util_*.csv /tmp/jit.txt .
tar czf $OUT/x2.tgz out_cold1 out_cold2 out_warm1 out_warm2 make_*.txt util_*.csv jit.txt
for n in cold1 cold2 warm1 warm2; do echo "== $n"; cat out_$n/summary.md | grep -E "^\|" | head -8; grep -E "passed|failed" out_$n/logs/*.session.txt | tail -2; done
cat $OUT/walls.txt
