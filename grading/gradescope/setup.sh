#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image from autograder.zip
# (unpacked in /autograder/source). It has two steps, which can also run alone:
#
#   packages  the Debian/Ubuntu packages the build needs: the Makefile's list (make print-packages,
#             which leaves out the documentation tools), and NVIDIA's CUDA header wheels when the
#             CUDA toolkit is not installed (the Makefile's `deps` fetches them)
#   build     configures the solution tree (source/ of the zip) with the cpu-only preset, or the
#             gpu preset, and builds the grader (clockwork-grade) and the handout generator there,
#             and nothing else of it. The framework whose objects every grading reuses (so that a
#             grading compiles only the student's files) is built from a copy of the solution tree
#             with every solution region replaced by its stub, hidden tests kept: no solution is
#             ever compiled, so none is in an object, archive or program a submission links or
#             can read. The hidden tests and their rubric are left readable to root only.
#
# usage: setup.sh [--packages-only | --build-only] [--gpu]
#
# --gpu is for an autograder machine with an NVIDIA GPU and the CUDA toolkit installed: the
# framework is built by nvcc for that GPU, and run_autograder then grades on the GPU. A zip made
# with `CLOCKWORK_AUTOGRADER_PRESET=gpu make autograder` does so without the argument.
#
# Variables (the defaults are Gradescope's layout):
#   AUTOGRADER_ROOT            /autograder
#   CLOCKWORK_SOURCE           the solution tree: $AUTOGRADER_ROOT/source/source
#   CLOCKWORK_BUILD            its build folder: $CLOCKWORK_SOURCE/build. One that already exists is
#                              configured again and brought up to date, not rebuilt from scratch.
#   CLOCKWORK_FRAMEWORK_TREE   the stubbed copy the framework is built from: $AUTOGRADER_ROOT/framework,
#                              built in its build/ folder (kept up to date when set up again)
#   CLOCKWORK_PRESET           cpu-only (the default unless packed for the GPU), or gpu (--gpu)
#   CLOCKWORK_FRAMEWORK_BUILD  an already built solution tree (of identical framework files) whose
#                              objects both builds reuse, so that only the grader and the stubs
#                              compile (for tests of this package; the stubbed build still serves
#                              the gradings)
#   CLOCKWORK_CMAKE_ARGS       more configure arguments, e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
#   CLOCKWORK_JOBS             parallel build jobs (default: one per CPU)
set -eu

usage() {
  sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//' >&2
  exit "$1"
}

do_packages=yes
do_build=yes
for arg in "$@"; do
  case $arg in
    --packages-only) do_build=no ;;
    --build-only) do_packages=no ;;
    --gpu) CLOCKWORK_PRESET=gpu ;;
    -h | --help) usage 0 ;;
    *) echo "setup.sh: unknown argument '$arg'" >&2; usage 2 ;;
  esac
done
if [ $do_packages = no ] && [ $do_build = no ]; then
  echo "setup.sh: --packages-only and --build-only together leave nothing to do" >&2
  exit 2
fi

AUTOGRADER_ROOT=${AUTOGRADER_ROOT:-/autograder}
CLOCKWORK_SOURCE=${CLOCKWORK_SOURCE:-$AUTOGRADER_ROOT/source/source}
CLOCKWORK_BUILD=${CLOCKWORK_BUILD:-$CLOCKWORK_SOURCE/build}
CLOCKWORK_FRAMEWORK_TREE=${CLOCKWORK_FRAMEWORK_TREE:-$AUTOGRADER_ROOT/framework}
CLOCKWORK_PRESET=${CLOCKWORK_PRESET:-cpu-only}
CLOCKWORK_FRAMEWORK_BUILD=${CLOCKWORK_FRAMEWORK_BUILD:-}
CLOCKWORK_CMAKE_ARGS=${CLOCKWORK_CMAKE_ARGS:-}
CLOCKWORK_JOBS=${CLOCKWORK_JOBS:-$(nproc)}

if [ ! -f "$CLOCKWORK_SOURCE/CMakeLists.txt" ] || [ ! -f "$CLOCKWORK_SOURCE/Makefile" ]; then
  echo "setup.sh: no solution tree in $CLOCKWORK_SOURCE (set CLOCKWORK_SOURCE or AUTOGRADER_ROOT)" >&2
  exit 2
fi

packages() {
  local as_root=""
  [ "$(id -u)" = 0 ] || as_root=sudo
  # The package list lives in the Makefile, so make comes first.
  if ! command -v make >/dev/null 2>&1; then
    $as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends make
  fi
  local list
  list=$(make --no-print-directory -s -C "$CLOCKWORK_SOURCE" print-packages)
  echo "setup.sh: installing $list"
  make --no-print-directory -C "$CLOCKWORK_SOURCE" deps PACKAGES="$list"
}

build() {
  local started handout students headers framework_build
  started=$(date +%s)
  # The solution tree: the grader and the handout generator only (no kernel compiles there).
  # Word splitting of CLOCKWORK_CMAKE_ARGS is wanted: it holds several arguments.
  # shellcheck disable=SC2086
  cmake --preset "$CLOCKWORK_PRESET" -S "$CLOCKWORK_SOURCE" -B "$CLOCKWORK_BUILD" \
    ${CLOCKWORK_FRAMEWORK_BUILD:+"-DCLOCKWORK_FRAMEWORK_BUILD=$CLOCKWORK_FRAMEWORK_BUILD"} $CLOCKWORK_CMAKE_ARGS
  cmake --build "$CLOCKWORK_BUILD" -j "$CLOCKWORK_JOBS" --target clockwork-grade clockwork-handout

  # The framework: the tree a grading starts from (every region stubbed, the hidden tests in),
  # told which files are the students' since its markers are gone, and built against the same
  # CUDA headers as the solution tree.
  handout=$CLOCKWORK_BUILD/bin/clockwork-handout
  "$handout" --milestone 1 --solutions-through 0 --instructor --update --quiet \
    --source "$CLOCKWORK_SOURCE" --out "$CLOCKWORK_FRAMEWORK_TREE"
  students=$("$handout" --list-student-files --source "$CLOCKWORK_SOURCE" | cut -d' ' -f1 | paste -sd ';' -)
  headers=$(sed -n 's/^CLOCKWORK_CUDA_HEADERS:[A-Z]*=//p' "$CLOCKWORK_BUILD/CMakeCache.txt")
  framework_build=$CLOCKWORK_FRAMEWORK_TREE/build
  # shellcheck disable=SC2086
  cmake --preset "$CLOCKWORK_PRESET" -S "$CLOCKWORK_FRAMEWORK_TREE" -B "$framework_build" \
    "-DCLOCKWORK_STUDENT_FILES=$students" ${headers:+"-DCLOCKWORK_CUDA_HEADERS=$headers"} \
    ${CLOCKWORK_FRAMEWORK_BUILD:+"-DCLOCKWORK_FRAMEWORK_BUILD=$CLOCKWORK_FRAMEWORK_BUILD"} $CLOCKWORK_CMAKE_ARGS
  cmake --build "$framework_build" -j "$CLOCKWORK_JOBS" --target clockwork_framework
  # The grader hides the hidden tests from the student user at every grading too; this covers
  # the time before the first one.
  chmod -R go-rwx "$CLOCKWORK_FRAMEWORK_TREE/grading/hidden" "$CLOCKWORK_FRAMEWORK_TREE/grading/rubric-hidden.json" \
    "$CLOCKWORK_SOURCE/grading/hidden" "$CLOCKWORK_SOURCE/grading/rubric-hidden.json"
  echo "setup.sh: built the grader in $CLOCKWORK_BUILD and the framework from the stubbed tree" \
    "$CLOCKWORK_FRAMEWORK_TREE in $framework_build ($CLOCKWORK_PRESET preset) in $(($(date +%s) - started)) s"
}

[ $do_packages = no ] || packages
[ $do_build = no ] || build
