#!/usr/bin/env bash
# Tests of nsys-forward.sh and ncu-kernel.sh that need no GPU and no Nsight tools: argument
# handling, the errors for a missing tool or binary, and the commands they would run (through
# stand-ins for nsys and ncu that record their arguments). Registered with ctest (label cli).
set -euo pipefail

here="${BASH_SOURCE[0]%/*}"
[[ "$here" != "${BASH_SOURCE[0]}" ]] || here=.
nsys_sh="$here/nsys-forward.sh"
ncu_sh="$here/ncu-kernel.sh"
bash_bin="$(command -v bash)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect CODE TEXT -- command...: the exit code is CODE and stdout+stderr contain TEXT.
expect() {
  local code="$1" text="$2"
  shift 3
  local out rc=0
  out="$("$@" 2>&1)" || rc=$?
  if [[ $rc -ne $code ]]; then
    fail "$* exited $rc, expected $code; output: $out"
  elif [[ "$out" != *"$text"* ]]; then
    fail "$* does not mention '$text'; output: $out"
  fi
}

# An empty PATH: neither nsys nor ncu can be found (the scripts need nothing else before that).
empty="$tmp/empty-path"
mkdir "$empty"
no_tools() { env -i PATH="$empty" "$bash_bin" "$@"; }

# Stand-ins that record their arguments, and a fake program and model for them to "profile".
fake="$tmp/fake-tools"
mkdir "$fake"
for tool in nsys ncu; do
  cat >"$fake/$tool" <<STUB
#!$bash_bin
echo "$tool \$*" >>"$tmp/calls"
# ncu writes a report named by --output; the script checks that it exists.
if [[ "$tool" == ncu && "\$1" == --force-overwrite ]]; then : >"\$3.ncu-rep"; fi
STUB
  chmod +x "$fake/$tool"
done
program="$tmp/clockwork-cuda"
printf '#!%s\nexit 0\n' "$bash_bin" >"$program"
chmod +x "$program"
mkdir "$tmp/model"
with_tools() { env -i PATH="$fake:$empty" "$bash_bin" "$@"; }

# ---- nsys-forward.sh ----
expect 0 "usage: tools/profile/nsys-forward.sh" -- "$bash_bin" "$nsys_sh" --help
expect 2 "missing --model DIR" -- "$bash_bin" "$nsys_sh"
expect 2 "--model needs a value" -- "$bash_bin" "$nsys_sh" --model
expect 2 "unknown option '--frobnicate'" -- "$bash_bin" "$nsys_sh" --model m --frobnicate
expect 2 "--max-new-tokens is 'many'" -- "$bash_bin" "$nsys_sh" --model m --max-new-tokens many
expect 2 "nsys (Nsight Systems) is not on PATH" -- no_tools "$nsys_sh" --model m
expect 2 "$tmp/none does not exist" -- with_tools "$nsys_sh" --model m --binary "$tmp/none"
expect 2 "--model $tmp/no-model is not a directory" -- \
  with_tools "$nsys_sh" --model "$tmp/no-model" --binary "$program"
expect 0 "--trace=cuda,nvtx,osrt" -- "$bash_bin" "$nsys_sh" --dry-run --model m
expect 0 "generate --model m --prompt Hi --max-new-tokens 2 --chat --top-k 5" -- \
  "$bash_bin" "$nsys_sh" --dry-run --model m --prompt Hi --max-new-tokens 2 --chat -- --top-k 5

: >"$tmp/calls"
expect 0 "report: $tmp/out.nsys-rep" -- with_tools "$nsys_sh" --model "$tmp/model" \
  --binary "$program" --output "$tmp/out"
calls="$(cat "$tmp/calls")"
[[ "$calls" == *"nsys profile --trace=cuda,nvtx,osrt"*"$program generate --model $tmp/model"* ]] ||
  fail "nsys profile was not run as expected: $calls"
[[ "$calls" == *"nsys stats"*"--report nvtx_sum,cuda_gpu_kern_sum"*"$tmp/out.nsys-rep"* ]] ||
  fail "nsys stats was not run as expected: $calls"

# ---- ncu-kernel.sh ----
expect 0 "usage: tools/profile/ncu-kernel.sh" -- "$bash_bin" "$ncu_sh" --help
expect 2 "missing --op NAME" -- "$bash_bin" "$ncu_sh"
expect 2 "--skip is 'two'" -- "$bash_bin" "$ncu_sh" --op matmul --skip two
expect 2 "--count is 0" -- "$bash_bin" "$ncu_sh" --op matmul --count 0
expect 2 "unknown option '-k'" -- "$bash_bin" "$ncu_sh" --op matmul -k x
expect 2 "ncu (Nsight Compute) is not on PATH" -- no_tools "$ncu_sh" --op matmul
expect 2 "$tmp/none does not exist" -- with_tools "$ncu_sh" --op matmul --binary "$tmp/none"
expect 0 "--kernel-name regex:matmul_tiled" -- "$bash_bin" "$ncu_sh" --dry-run --op matmul
expect 0 "--section SpeedOfLight_RooflineChart --section MemoryWorkloadAnalysis" -- \
  "$bash_bin" "$ncu_sh" --dry-run --op rmsnorm
expect 0 "--kernel-name regex:matmul_naive" -- \
  "$bash_bin" "$ncu_sh" --dry-run --op matmul --variant naive
expect 0 "bench --op matmul --shape decode --warmup 0 --repetitions 1 --variant tiled" -- \
  "$bash_bin" "$ncu_sh" --dry-run --op matmul --shape decode
expect 0 "--set full" -- "$bash_bin" "$ncu_sh" --dry-run --op swiglu --set full

: >"$tmp/calls"
expect 0 "report: $tmp/k.ncu-rep" -- with_tools "$ncu_sh" --op rmsnorm --binary "$program" \
  --output "$tmp/k" --skip 1
calls="$(cat "$tmp/calls")"
[[ "$calls" == *"--launch-skip 1 --launch-count 1 --kernel-name regex:rmsnorm_kernel"* ]] ||
  fail "ncu was not run as expected: $calls"
[[ "$calls" == *"ncu --import $tmp/k.ncu-rep --page details"* ]] ||
  fail "the report was not printed: $calls"

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "profile scripts: all checks passed"
