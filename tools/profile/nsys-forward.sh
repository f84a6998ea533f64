#!/usr/bin/env bash
# Profiles the forward passes of `clockwork-cuda generate` with Nsight Systems: a timeline of
# every CUDA call and kernel, named by the NVTX ranges of the model (domain "clockwork", one range
# per layer and per op), then the two summaries that answer "where does the time go": NVTX ranges
# and GPU kernels. Builds nothing; run `cmake --build build --target clockwork-cuda` first.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: tools/profile/nsys-forward.sh --model DIR [options] [-- extra generate options]

Runs `clockwork-cuda generate` under `nsys profile --trace=cuda,nvtx,osrt`, writes the report
and prints `nsys stats` summaries of the NVTX ranges and the GPU kernels.

options:
  --model DIR            model directory (config.json, safetensors, tokenizer); required
  --prompt TEXT          the prompt (default: "Why is the sky blue?")
  --max-new-tokens N     tokens to generate (default 4: each runs a whole forward pass)
  --chat                 wrap the prompt in the Instruct chat template
  --output PATH          report path without extension (default: nsys-forward)
  --build DIR            build directory holding bin/clockwork-cuda (default: the
                         repository's build/)
  --binary PATH          the program to profile (default: <build>/bin/clockwork-cuda)
  --reports LIST         nsys stats reports (default: nvtx_sum,cuda_gpu_kern_sum)
  --dry-run              print the commands instead of running them (no tool or GPU needed)
  -h, --help             show this help

Open the report in the Nsight Systems GUI (nsys-ui PATH.nsys-rep) for the timeline.
USAGE
}

# Prints a command so that it can be pasted back into a shell.
show() {
  local out="" a
  for a in "$@"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then out+="$a "; else out+="$(printf '%q' "$a") "; fi
  done
  echo "${out% }"
}

die() {
  echo "nsys-forward.sh: error: $*" >&2
  exit 2
}

# The repository holding this script (plain bash: no tool is needed before the checks below).
here="${BASH_SOURCE[0]%/*}"
[[ "$here" != "${BASH_SOURCE[0]}" ]] || here=.
repo="$(cd "$here/../.." && pwd)"
model="" prompt="Why is the sky blue?" max_new=4 chat=0 output="nsys-forward"
build="$repo/build" binary="" reports="nvtx_sum,cuda_gpu_kern_sum" dry_run=0
extra=()

need_value() {
  [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) need_value "$@"; model="$2"; shift 2 ;;
    --prompt) need_value "$@"; prompt="$2"; shift 2 ;;
    --max-new-tokens) need_value "$@"; max_new="$2"; shift 2 ;;
    --chat) chat=1; shift ;;
    --output) need_value "$@"; output="$2"; shift 2 ;;
    --build) need_value "$@"; build="$2"; shift 2 ;;
    --binary) need_value "$@"; binary="$2"; shift 2 ;;
    --reports) need_value "$@"; reports="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

[[ -n "$model" ]] || die "missing --model DIR (see --help)"
[[ "$max_new" =~ ^[0-9]+$ && "$max_new" -ge 1 ]] ||
  die "--max-new-tokens is '$max_new', expected a whole number from 1"
binary="${binary:-$build/bin/clockwork-cuda}"

profile_cmd=(nsys profile "--trace=cuda,nvtx,osrt" --sample=none --force-overwrite=true
             --output "$output" "$binary" generate --model "$model" --prompt "$prompt"
             --max-new-tokens "$max_new")
if [[ $chat -eq 1 ]]; then profile_cmd+=(--chat); fi
profile_cmd+=("${extra[@]}")
stats_cmd=(nsys stats --force-export=true --report "$reports" --format column "$output.nsys-rep")

if [[ $dry_run -eq 1 ]]; then
  show "${profile_cmd[@]}"
  show "${stats_cmd[@]}"
  exit 0
fi

command -v nsys >/dev/null 2>&1 ||
  die "nsys (Nsight Systems) is not on PATH; it ships with the CUDA toolkit" \
      "(nsight-systems package) or from developer.nvidia.com/nsight-systems"
[[ -x "$binary" ]] ||
  die "$binary does not exist or is not executable; build it with" \
      "'cmake --build $build --target clockwork-cuda' or pass --build/--binary"
[[ -d "$model" ]] || die "--model $model is not a directory"

echo "== $(show "${profile_cmd[@]}")"
"${profile_cmd[@]}"
echo
echo "== $(show "${stats_cmd[@]}")"
"${stats_cmd[@]}"
echo
echo "report: $output.nsys-rep (open it with nsys-ui for the timeline)"
