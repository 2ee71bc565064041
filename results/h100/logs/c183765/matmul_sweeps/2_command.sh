. $REPO/.gpux/env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
V(){ echo "{\"bm\":$1,\"bn\":$2,\"bk\":$3,\"occupancy\":$4,\"cga\":$5,\"persistent\":$6,\"group\":$7,\"splits\":$8}"; }
S1='[{"dtype":"bfloat16","m":256,"n":6144,"k":4096,"bt":1},{"dtype":"bfloat16","m":256,"n":4096,"k":14336,"bt":1},{"dtype":"bfloat16","m":256,"n":28672,"k":4096,"bt":1}]'
E1="[$(V 64 128 64 2 1 false 8 2),$(V 64 128 128 2 1 false 8 1),$(V 128 64 128 2 1 false 8 1),$(V 128 128 64 1 2 false 8 1),$(V 64 128 64 2 2 false 8 1),$(V 64 128 64 1 1 true 8 1),$(V 64 128 64 2 1 false 8 1),$(V 64 256 64 1 2 false 8 1)]"
S2='[{"dtype":"bfloat16","m":8192,"n":4096,"k":14336,"bt":1},{"dtype":"bfloat16","m":8192,"n":6144,"k":4096,"bt":1}]'
E2="[$(V 128 128 64 1 1 true 8 1),$(V 128 128 64 1 1 true 4 1),$(V 128 128 64 1 1 true 16 1),$(V 128 128 64 1 1 true 32 1),$(V 128 128 128 1 1 true 8 1),$(V 256 128 64 1 2 true 8 1),$(V 128 128 64 1 2 true 8 1),$(V 128 128 64 1 2 false 8 1),$(V 128 128 64 1 1 false 4 1)]"
timeout ${MT:-400} python3 scripts/sweep_variants.py --kernel matmul --nrep 20 --backends cutile_rs torch --shapes "$S1" --extra "$E1" --only-extra 2>&1 | grep -v Warning | tee /tmp/o/matmul_m256.log
timeout ${MT:-400} python3 scripts/sweep_variants.py --kernel matmul --nrep 20 --backends cutile_rs torch --shapes "$S2" --extra "$E2" --only-extra 2>&1 | grep -v Warning | tee /tmp/o/matmul_m8192.log
