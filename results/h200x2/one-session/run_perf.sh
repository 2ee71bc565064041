#!/usr/bin/env bash
# session 3, call 4 (nvidia-h200-x2): make KERNEL=all perf, GPUS=1 then GPUS=2 with empty caches (cold),
# then both again with their caches filled (warm); nvidia-smi samples both GPUs.
set -u
R=$PWD
cd /tmp && rm -rf tilekit-bundle && tar -xf $R/dist/tilekit-bundle-*.tar && cd tilekit-bundle
export PYTHONUNBUFFERED=1
./run.sh doctor > /tmp/doctor.txt 2>&1
run() {  # run NAME GPUS
  local name=$1 g=$2
  export TRITON_CACHE_DIR=/tmp/c$g/triton CUDA_TILE_CACHE_DIR=/tmp/c$g/cutile TILEKIT_AUTOTUNE_CACHE=/tmp/c$g/autotune.json
  mkdir -p /tmp/c$g
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader -lms 250 > util_$name.csv &
  local mon=$! s=$(date +%s%N)
  ./run.sh GPUS=$g KERNEL=all OUT_ROOT=out_$name perf > make_$name.txt 2>&1
  local rc=$?
  echo "$name GPUS=$g rc=$rc wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))" | tee -a $OUT/walls.txt
  kill $mon
}
run pcold1 1
run pcold2 2
run pwarm1 1
run pwarm2 2
tar czf $OUT/perf4.tgz out_p* make_p*.txt util_p*.csv
for n in pcold1 pcold2 pwarm1 pwarm2; do echo "== $n"; grep -E "^\|" out_$n/summary.md | cut -c1-140 | head -6; grep -E "passed|failed" out_$n/logs/perf.session.txt | tail -1; done
