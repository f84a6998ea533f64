#!/usr/bin/env bash
# Profiles one kernel with Nsight Compute: runs `clockwork-cuda bench --op NAME` once (no warm-up,
# one repetition) so that each case of the op launches its kernel exactly once, and collects the
# roofline, memory-workload and occupancy sections of the launch picked by --kernel and --skip.
# Builds nothing; run `cmake --build build --target clockwork-cuda` first.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: tools/profile/ncu-kernel.sh --op NAME [options]

Runs `ncu` on `clockwork-cuda bench --op NAME --warmup 0 --repetitions 1` and profiles one kernel
launch: where it sits on the roofline, how it uses the memory hierarchy, and its occupancy.

options:
  --op NAME          bench op to run (clockwork bench --list); required
  --variant NAME     bench variant (for matmul: tiled unless given, or naive)
  --kernel REGEX     kernel-name filter (default: the op's kernel, e.g. matmul_tiled)
  --shape SPEC       bench shape (default: prefill)
  --skip N           matching launches to skip first (default 0); the matmul cases run in the
                     order q_proj, k_proj, gate_proj, down_proj, so --skip 2 profiles gate_proj
  --count N          launches to profile (default 1)
  --set NAME         an ncu section set (e.g. full) instead of the default sections
  --section NAME     one more section (repeatable); the defaults are SpeedOfLight,
                     SpeedOfLight_RooflineChart, MemoryWorkloadAnalysis, Occupancy, LaunchStats
  --output PATH      report path without extension (default: ncu-<op>)
  --build DIR        build directory holding bin/clockwork-cuda (default: the repository's build/)
  --binary PATH      the program to run (default: <build>/bin/clockwork-cuda)
  --dry-run          print the commands instead of running them (no tool or GPU needed)
  -h, --help         show this help

Open the report in the Nsight Compute GUI (ncu-ui PATH.ncu-rep) for the roofline chart.
USAGE
}

show() {
  local out="" a
  for a in "$@"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then out+="$a "; else out+="$(printf '%q' "$a") "; fi
  done
  echo "${out% }"
}

die() {
  echo "ncu-kernel.sh: error: $*" >&2
  exit 2
}

need_value() {
  [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"
}

whole_number() {
  [[ "$2" =~ ^[0-9]+$ ]] || die "$1 is '$2', expected a whole number"
}

# The repository holding this script (plain bash: no tool is needed before the checks below).
here="${BASH_SOURCE[0]%/*}"
[[ "$here" != "${BASH_SOURCE[0]}" ]] || here=.
repo="$(cd "$here/../.." && pwd)"
op="" variant="" kernel="" shape="prefill" skip=0 count=1 set_name="" output=""
build="$repo/build" binary="" dry_run=0
sections=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --op) need_value "$@"; op="$2"; shift 2 ;;
    --variant) need_value "$@"; variant="$2"; shift 2 ;;
    --kernel) need_value "$@"; kernel="$2"; shift 2 ;;
    --shape) need_value "$@"; shape="$2"; shift 2 ;;
    --skip) need_value "$@"; whole_number "$1" "$2"; skip="$2"; shift 2 ;;
    --count) need_value "$@"; whole_number "$1" "$2"; count="$2"; shift 2 ;;
    --set) need_value "$@"; set_name="$2"; shift 2 ;;
    --section) need_value "$@"; sections+=("$2"); shift 2 ;;
    --output) need_value "$@"; output="$2"; shift 2 ;;
    --build) need_value "$@"; build="$2"; shift 2 ;;
    --binary) need_value "$@"; binary="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

[[ -n "$op" ]] || die "missing --op NAME (see --help; clockwork bench --list names the ops)"
[[ "$count" -ge 1 ]] || die "--count is 0, expected at least 1"
binary="${binary:-$build/bin/clockwork-cuda}"
output="${output:-ncu-$op}"

# The kernel each op launches (kernels/*.cu). attention launches several: pass --kernel.
if [[ -z "$kernel" ]]; then
  case "$op" in
    matmul)
      variant="${variant:-tiled}"
      case "$variant" in
        naive) kernel="matmul_naive" ;;
        tiled) kernel="matmul_tiled" ;;
        *) ;;  # cuBLAS picks its own kernels: no filter
      esac ;;
    embedding) kernel="embedding_kernel" ;;
    rmsnorm) kernel="rmsnorm_kernel" ;;
    rope) kernel="rope_apply_kernel" ;;
    softmax) kernel="causal_softmax_kernel" ;;
    swiglu) kernel="swiglu_kernel" ;;
    residual) kernel="residual_add_kernel" ;;
    lm_head) kernel="lm_head_kernel" ;;
    argmax) kernel="argmax_kernel" ;;
    *) ;;
  esac
fi

ncu_cmd=(ncu --force-overwrite --output "$output" --launch-skip "$skip" --launch-count "$count")
if [[ -n "$kernel" ]]; then ncu_cmd+=(--kernel-name "regex:$kernel"); fi
if [[ -n "$set_name" ]]; then
  ncu_cmd+=(--set "$set_name")
else
  for s in SpeedOfLight SpeedOfLight_RooflineChart MemoryWorkloadAnalysis Occupancy LaunchStats; do
    ncu_cmd+=(--section "$s")
  done
fi
for s in "${sections[@]}"; do ncu_cmd+=(--section "$s"); done
ncu_cmd+=("$binary" bench --op "$op" --shape "$shape" --warmup 0 --repetitions 1)
if [[ -n "$variant" ]]; then ncu_cmd+=(--variant "$variant"); fi
print_cmd=(ncu --import "$output.ncu-rep" --page details)

if [[ $dry_run -eq 1 ]]; then
  show "${ncu_cmd[@]}"
  show "${print_cmd[@]}"
  exit 0
fi

command -v ncu >/dev/null 2>&1 ||
  die "ncu (Nsight Compute) is not on PATH; it ships with the CUDA toolkit" \
      "(nsight-compute package) or from developer.nvidia.com/nsight-compute"
[[ -x "$binary" ]] ||
  die "$binary does not exist or is not executable; build it with" \
      "'cmake --build $build --target clockwork-cuda' or pass --build/--binary"

echo "== $(show "${ncu_cmd[@]}")"
"${ncu_cmd[@]}"
[[ -f "$output.ncu-rep" ]] ||
  die "ncu wrote no report: no launch matched --kernel '${kernel:-any}' after --skip $skip" \
      "(is the op's kernel named differently? pass --kernel)"
echo
"${print_cmd[@]}"
echo
echo "report: $output.ncu-rep (open it with ncu-ui for the roofline chart)"
