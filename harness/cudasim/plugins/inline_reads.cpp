// SPDX-License-Identifier: GPL-3.0-or-later
// (A GCC plugin uses GCC's internal interfaces and must be GPL-compatible; GCC refuses to load one
// that does not say so with plugin_is_GPL_compatible.)
//
// cudasim's inline read check: a GCC plugin loaded when kernel translation units are compiled
// for checking (cmake/Cudasim.cmake, cudasim-cc). After the thread-sanitizer instrumentation, each
// call __tsan_read4(p) (a plain aligned 4-byte read, most of a tiled kernel's accesses) gets a
// test in front of it that skips the call when the checker has already said that such a read of
// that word needs nothing (a grant, see ReadFilter in harness/cudasim/src/check.h):
//
//   i = (p - base) rotated right by 2          a misaligned p puts bits at the top: i >= words
//   if (i < words && (tokens[i] == token || tokens[i] == any)) skip the call
//
// base, words, tokens, token and any are fields of the running OS thread's __cudasim_read_filter
// (thread-local, in the cudasim runtime). The test is an asm goto that reads them from the thread
// pointer and uses two scratch registers: the call, with the registers it makes the caller save,
// remains only on the path where the test fails. Without the plugin every read makes the call,
// with the same outcome, so the plugin only changes the speed.
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
#include <cfghooks.h>
#include <cfganal.h>
#include <tree-cfg.h>
#include <stringpool.h>
#include <ssa.h>
#include <tree-into-ssa.h>
#include <profile-count.h>

int plugin_is_GPL_compatible;

namespace {

// %0: the address read; %l1: where the code goes on when the read needs no call.
constexpr const char* kTest =
    "movq %0, %%rax\n\t"
    "subq %%fs:__cudasim_read_filter@tpoff, %%rax\n\t"
    "rorq $2, %%rax\n\t"
    "cmpq %%fs:__cudasim_read_filter@tpoff+8, %%rax\n\t"
    "jae 1f\n\t"
    "movq %%fs:__cudasim_read_filter@tpoff+16, %%rdx\n\t"
    "movl (%%rdx,%%rax,4), %%edx\n\t"
    "cmpl %%fs:__cudasim_read_filter@tpoff+24, %%edx\n\t"
    "je %l1\n\t"
    "cmpl %%fs:__cudasim_read_filter@tpoff+28, %%edx\n\t"
    "je %l1\n"
    "1:";

tree string_of(const char* s) { return build_string(static_cast<int>(std::strlen(s)) + 1, s); }

// Puts the test in front of `call`: [head][test] -> [call] -> [rest], and [test] -> [rest].
void guard(gcall* call) {
  basic_block head = gimple_bb(call);
  gimple_stmt_iterator at = gsi_for_stmt(call);
  gsi_prev(&at);
  edge to_call = gsi_end_p(at) ? split_block_after_labels(head) : split_block(head, gsi_stmt(at));
  basic_block call_bb = to_call->dest;
  basic_block rest = split_block(call_bb, call)->dest;

  vec<tree, va_gc>* inputs = nullptr;
  vec<tree, va_gc>* clobbers = nullptr;
  vec<tree, va_gc>* labels = nullptr;
  vec_safe_push(inputs, build_tree_list(build_tree_list(NULL_TREE, string_of("r")), gimple_call_arg(call, 0)));
  for (const char* r : {"rax", "rdx", "cc"}) vec_safe_push(clobbers, build_tree_list(NULL_TREE, string_of(r)));
  vec_safe_push(labels, build_tree_list(NULL_TREE, gimple_block_label(rest)));
  gasm* test = gimple_build_asm_vec(kTest, inputs, nullptr, clobbers, labels);
  gimple_asm_set_volatile(test, true);
  gimple_set_location(test, gimple_location(call));
  gimple_stmt_iterator end = gsi_last_bb(head);
  gsi_insert_after(&end, test, GSI_NEW_STMT);

  // Most reads skip the call.
  to_call->probability = profile_probability::unlikely();
  edge skip = make_edge(head, rest, 0);
  skip->probability = to_call->probability.invert();
  call_bb->count = head->count.apply_probability(to_call->probability);
}

const pass_data kPassData = {
    GIMPLE_PASS, "cudasim_inline_reads", OPTGROUP_NONE, TV_NONE, PROP_cfg | PROP_ssa, 0, 0, 0, 0,
};

class InlineReads : public gimple_opt_pass {
 public:
  explicit InlineReads(gcc::context* ctx) : gimple_opt_pass(kPassData, ctx) {}
  unsigned int execute(function* fn) override {
    std::vector<gcall*> calls;
    basic_block bb;
    FOR_EACH_BB_FN(bb, fn) {
      for (gimple_stmt_iterator gsi = gsi_start_bb(bb); !gsi_end_p(gsi); gsi_next(&gsi)) {
        gimple* g = gsi_stmt(gsi);
        if (gimple_call_builtin_p(g, BUILT_IN_TSAN_READ4)) calls.push_back(as_a<gcall*>(g));
      }
    }
    if (calls.empty()) return 0;
    for (gcall* call : calls) guard(call);
    free_dominance_info(CDI_DOMINATORS);
    // The call's virtual operands no longer dominate what follows it: let GCC rebuild them.
    mark_virtual_operands_for_renaming(fn);
    return TODO_update_ssa_only_virtuals;
  }
};

}  // namespace

int plugin_init(plugin_name_args* info, plugin_gcc_version* version) {
  if (!plugin_default_version_check(version, &gcc_version)) {
    fprintf(stderr, "cudasim inline reads plugin: built for GCC %s, loaded by GCC %s\n", gcc_version.basever,
            version->basever);
    return 1;
  }
  if (info->argc) {
    fprintf(stderr, "cudasim inline reads plugin: unknown argument -fplugin-arg-%s-%s\n", info->base_name,
            info->argv[0].key);
    return 1;
  }
  // After every GIMPLE optimisation and the instrumentation.
  register_pass_info pass = {new InlineReads(g), "optimized", 1, PASS_POS_INSERT_BEFORE};
  register_callback(info->base_name, PLUGIN_PASS_MANAGER_SETUP, nullptr, &pass);
  return 0;
}
