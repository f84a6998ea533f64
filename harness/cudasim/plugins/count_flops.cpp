// SPDX-License-Identifier: GPL-3.0-or-later
// (A GCC plugin uses GCC's internal interfaces and must be GPL-compatible; GCC refuses to load one
// that does not say so with plugin_is_GPL_compatible.)
//
// cudasim's FLOP counter: a GCC plugin loaded when kernel translation units are compiled for
// checking and counting (cmake/Cudasim.cmake, cudasim-cc). After GCC's optimisations and the
// thread-sanitizer instrumentation, it counts the floating-point operations of each basic block of
// each function and starts the block with one instruction that adds that number to the running
// OS thread's counter, __cudasim_flops (thread-local, in the cudasim runtime). Counting mode reads
// the counter when a block of threads starts and ends (profile.cpp): the difference is what the
// block's threads executed, since only kernel code compiled with this plugin runs in between.
//
// What counts, as Nsight Compute's single-precision FLOP count does (additions, multiplications,
// and two per fused multiply-add): +, -, * and / of float or double values, each lane of a vector
// operation, and fused multiply-adds (fma(), or a multiply and add the compiler fused) as two.
// Comparisons, conversions, negation, min/max and calls of math functions (expf, sqrtf) count
// nothing, and neither does the arithmetic of code in the folders given as
// -fplugin-arg-cudasim_flops-skip=DIR: the CPU backend's headers, whose emulations of GPU
// instructions and math functions (cudasim/intrinsics.h) are not the kernel's arithmetic. A fused
// multiply-add counts wherever it is written (fmaf, __fmaf_rn).
// GCC's internal headers depend on one another in this order; standard headers come through its
// system.h, asked for with INCLUDE_*.
#define INCLUDE_STRING
#define INCLUDE_VECTOR
#include <gcc-plugin.h>
#include <plugin-version.h>
#include <tree.h>
#include <tree-pass.h>
#include <context.h>
#include <function.h>
#include <basic-block.h>
#include <gimple-expr.h>
#include <gimple.h>
#include <gimple-iterator.h>
#include <internal-fn.h>
#include <stringpool.h>
#include <attribs.h>
#include <input.h>
#include <ssa.h>
#include <tree-into-ssa.h>

int plugin_is_GPL_compatible;

namespace {

// Lanes of the value a statement computes when it is floating point, 0 otherwise.
unsigned float_lanes(tree type) {
  unsigned lanes = 1;
  if (VECTOR_TYPE_P(type)) {
    if (!TYPE_VECTOR_SUBPARTS(type).is_constant()) return 0;
    lanes = static_cast<unsigned>(TYPE_VECTOR_SUBPARTS(type).to_constant());
    type = TREE_TYPE(type);
  }
  return SCALAR_FLOAT_TYPE_P(type) ? lanes : 0;
}

std::vector<std::string> g_skip;  // folders whose code counts nothing (but fused multiply-adds)

bool skipped(const gimple* g) {
  if (g_skip.empty()) return false;
  const location_t loc = gimple_location(g);
  if (loc == UNKNOWN_LOCATION) return false;
  const char* file = LOCATION_FILE(loc);
  if (!file) return false;
  // File names are shared strings of the line maps: one answer per name, from its real path.
  static std::vector<std::pair<const char*, bool>> known;
  for (const auto& [name, skip] : known) {
    if (name == file) return skip;
  }
  char* real = lrealpath(file);
  bool skip = false;
  for (const std::string& dir : g_skip) skip = skip || std::strncmp(real, dir.c_str(), dir.size()) == 0;
  free(real);
  known.emplace_back(file, skip);
  return skip;
}

unsigned flops_of(const gimple* g) {
  if (is_gimple_assign(g)) {
    const tree lhs = gimple_assign_lhs(g);
    const unsigned lanes = lhs ? float_lanes(TREE_TYPE(lhs)) : 0;
    if (!lanes) return 0;
    switch (gimple_assign_rhs_code(g)) {
      case PLUS_EXPR:
      case MINUS_EXPR:
      case MULT_EXPR:
      case RDIV_EXPR:
        return skipped(g) ? 0 : lanes;
      default:
        return 0;
    }
  }
  if (is_gimple_call(g)) {
    const tree lhs = gimple_call_lhs(g);
    const unsigned lanes = lhs ? float_lanes(TREE_TYPE(lhs)) : 0;
    if (!lanes) return 0;
    if (gimple_call_internal_p(g)) {
      switch (gimple_call_internal_fn(g)) {
        case IFN_FMA:
        case IFN_FMS:
        case IFN_FNMA:
        case IFN_FNMS:
          return 2 * lanes;
        default:
          return 0;
      }
    }
    const tree fn = gimple_call_fndecl(g);
    if (fn && fndecl_built_in_p(fn, BUILT_IN_NORMAL)) {
      switch (DECL_FUNCTION_CODE(fn)) {
        CASE_FLT_FN(BUILT_IN_FMA):
          return 2 * lanes;
        default:
          return 0;
      }
    }
  }
  return 0;
}

const pass_data kPassData = {
    GIMPLE_PASS, "cudasim_flops", OPTGROUP_NONE, TV_NONE, PROP_cfg, 0, 0, 0, 0,
};

class CountFlops : public gimple_opt_pass {
 public:
  explicit CountFlops(gcc::context* ctx) : gimple_opt_pass(kPassData, ctx) {}
  unsigned int execute(function* fn) override {
    basic_block bb;
    bool inserted = false;
    FOR_EACH_BB_FN(bb, fn) {
      unsigned long n = 0;
      for (gimple_stmt_iterator gsi = gsi_start_bb(bb); !gsi_end_p(gsi); gsi_next(&gsi)) n += flops_of(gsi_stmt(gsi));
      if (!n) continue;
      // One instruction, no registers: a thread-local add at the block's start (after its labels).
      char text[96];
      snprintf(text, sizeof text, "addq $%lu, %%fs:__cudasim_flops@tpoff", n);
      gasm* add = gimple_build_asm_vec(xstrdup(text), nullptr, nullptr, nullptr, nullptr);
      gimple_asm_set_volatile(add, true);
      gimple_asm_set_input(add, true);  // basic asm: the text is not a template
      gimple_set_location(add, DECL_SOURCE_LOCATION(fn->decl));  // final prints a basic asm's file
      gimple_stmt_iterator at = gsi_after_labels(bb);
      gsi_insert_before(&at, add, GSI_SAME_STMT);
      inserted = true;
    }
    // A volatile asm is a side effect: in SSA form it takes part in the chain of virtual operands.
    if (!inserted) return 0;
    mark_virtual_operands_for_renaming(fn);
    return TODO_update_ssa_only_virtuals;
  }
};

}  // namespace

int plugin_init(plugin_name_args* info, plugin_gcc_version* version) {
  if (!plugin_default_version_check(version, &gcc_version)) {
    fprintf(stderr, "cudasim flops plugin: built for GCC %s, loaded by GCC %s\n", gcc_version.basever,
            version->basever);
    return 1;
  }
  for (int i = 0; i < info->argc; ++i) {
    if (std::strcmp(info->argv[i].key, "skip") == 0 && info->argv[i].value) {
      char* real = lrealpath(info->argv[i].value);
      std::string dir = real;
      free(real);
      if (!dir.empty() && dir.back() != '/') dir += '/';
      g_skip.push_back(dir);
    } else {
      fprintf(stderr, "cudasim flops plugin: unknown argument -fplugin-arg-%s-%s\n", info->base_name, info->argv[i].key);
      return 1;
    }
  }
  // After every GIMPLE optimisation and the instrumentation: what is left is what runs.
  register_pass_info pass = {new CountFlops(g), "optimized", 1, PASS_POS_INSERT_BEFORE};
  register_callback(info->base_name, PLUGIN_PASS_MANAGER_SETUP, nullptr, &pass);
  return 0;
}
