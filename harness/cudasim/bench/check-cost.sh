#!/usr/bin/env bash
# The cost of checking on the course's own tests: runs every milestone kernel test of a build
# twice, the normal binaries (<test>.sim) and the checked ones (<test>.check, CUDASIM_CHECK=all in
# warp-by-warp reverse order), one test at a time, and prints each pair's time and the totals.
#
#   harness/cudasim/bench/check-cost.sh [build-dir]     (default: build)
#
# Tests labelled slow or llama3-8b have no checked variant and are left out of both sums.
set -euo pipefail
build="${1:-build}"
cd "$build"

# "name seconds" for every test ctest ran, from its summary lines ("1/6 Test #45: name ... 3.21 sec").
run() {
  { ctest -L "milestone[1-4]" -LE "slow|llama3-8b" -R "$1" -j1 2>&1 || true; } |
    sed -n 's/^ *[0-9]*\/[0-9]* *Test *#[0-9]*: \([^ ]*\) .* \([0-9.]*\) sec$/\1 \2/p'
}

sim="$(run '\.sim$')"
check="$(run '\.check$')"
printf '%-28s %10s %10s %8s\n' test normal checked ratio
total_sim=0 total_check=0
while read -r name secs; do
  base="${name%.sim}"
  csecs="$(awk -v n="$base.check" '$1 == n { print $2 }' <<<"$check")"
  [[ -n "$csecs" ]] || continue
  printf '%-28s %9.2fs %9.2fs %7.1fx\n' "$base" "$secs" "$csecs" "$(awk -v a="$csecs" -v b="$secs" 'BEGIN { print a / b }')"
  total_sim="$(awk -v a="$total_sim" -v b="$secs" 'BEGIN { print a + b }')"
  total_check="$(awk -v a="$total_check" -v b="$csecs" 'BEGIN { print a + b }')"
done <<<"$sim"
printf '%-28s %9.2fs %9.2fs %7.1fx\n' "all milestone tests" "$total_sim" "$total_check" \
  "$(awk -v a="$total_check" -v b="$total_sim" 'BEGIN { print (b > 0 ? a / b : 0) }')"
