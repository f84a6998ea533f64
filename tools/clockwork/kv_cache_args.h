// --kv-cache and --page-size, read the same way by `generate` and `verify`.
#pragma once

#include <stdexcept>
#include <string>

#include "harness/pipeline/kv_cache.h"
#include "tools/clockwork/cli.h"

namespace clockwork::cli {

struct KvCacheArgs {
  KvCacheKind kind = KvCacheKind::Contiguous;
  int page_size = 16;
};

/// --kv-cache KIND (default contiguous) and --page-size N (default 16, only with paged).
/// Throws UsageError naming the option for anything else.
inline KvCacheArgs kv_cache_args(const Args& args) {
  KvCacheArgs out;
  try {
    out.kind = parse_kv_cache_kind(args.get("kv-cache").value_or("contiguous"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--kv-cache: ") + e.what());
  }
  out.page_size = static_cast<int>(args.get_int("page-size", 16, 1, 1 << 20));
  if (args.has("page-size") && out.kind != KvCacheKind::Paged) {
    throw UsageError("--page-size needs --kv-cache paged");
  }
  return out;
}

}  // namespace clockwork::cli
