#!/usr/bin/env bash
# Save and Read of a 1,000,000 x 64 float32 table (256 MB) against cp and
# cat of a file of the same size on the same disk, in alternating rounds:
#   bench/save_vs_cp.sh [dir] [rounds]
# dir (default: a new directory under the repository's parent) must be on
# the disk to measure. Prints each round and the medians, in ms.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-$(mktemp -d -p ..)}
rounds=${2:-5}
bin=$(mktemp)
go test -c -o "$bin" ./checkpoint
head -c 268435456 /dev/urandom >"$dir/src.bin"
ms() { echo $(( ($2 - $1) / 1000000 )); }
bench() { GATHER_BENCH_DIR=$dir "$bin" -test.run '^$' -test.bench "^Benchmark$1\$" -test.benchtime 1x | awk '/ns\/op/ {printf "%d", $3 / 1e6}'; }
declare -a save read cp cpsync cat
for r in $(seq "$rounds"); do
	save+=("$(bench Save)")
	read+=("$(bench Read)")
	sync
	a=$(date +%s%N); cp "$dir/src.bin" "$dir/dst.bin"; b=$(date +%s%N); sync "$dir/dst.bin"; c=$(date +%s%N)
	cp+=("$(ms "$a" "$b")"); cpsync+=("$(ms "$a" "$c")"); rm "$dir/dst.bin"
	a=$(date +%s%N); cat "$dir/src.bin" >/dev/null; b=$(date +%s%N); cat+=("$(ms "$a" "$b")")
	echo "round $r: Save ${save[-1]}  cp+sync ${cpsync[-1]}  cp ${cp[-1]}  Read ${read[-1]}  cat ${cat[-1]}"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "medians (ms): Save $(median "${save[@]}"), cp+sync $(median "${cpsync[@]}"), cp $(median "${cp[@]}"), Read $(median "${read[@]}"), cat $(median "${cat[@]}")"
rm -f "$dir/src.bin" "$bin"
