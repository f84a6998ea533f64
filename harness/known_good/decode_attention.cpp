// Known-good decode attention, split-KV decode attention and the merge of attention states
// (kernels/decode_attention.cu's launchers), on the host.
#include <algorithm>

#include "harness/known_good/kv_slots.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

void check_decode_args(const char* who, const float* q, const KvCacheView& cache, int len, const float* out,
                       int n_heads) {
  check_kv_cache_view(cache, who);
  known_good::require(q && out, who, "q and out must be device pointers");
  known_good::require(out != q, who, "out must not alias q");
  known_good::require(n_heads > 0 && n_heads % cache.n_kv_heads == 0, who,
                      "n_heads (" + std::to_string(n_heads) + ") must be a positive multiple of cache.n_kv_heads (" +
                          std::to_string(cache.n_kv_heads) + ")");
  known_good::require(len >= 1, who,
                      "len must be at least 1 (the new token attends to itself; got " + std::to_string(len) + ")");
  if (len > kv_cache_capacity(cache)) {
    throw std::out_of_range(std::string(who) + ": len = " + std::to_string(len) + " exceeds the cache's " +
                            std::to_string(kv_cache_capacity(cache)) + " positions");
  }
}

// The attention state of every query head over positions [begin, end): o [h·h_d] (the
// softmax-weighted mean of the values) and lse [h] (log Σ exp(score)).
void attend(const std::vector<float>& q, const KvCacheView& cache, const known_good::KvSlots& slots, int begin,
            int end, int n_heads, std::vector<double>& o, std::vector<double>& lse) {
  const int h_d = cache.head_dim, group = n_heads / cache.n_kv_heads;
  const size_t width = slots.width();
  const double scale = known_good::attention_scale(h_d);
  std::vector<float> k_rows, v_rows;
  for (int p = begin; p < end; ++p) {
    const std::vector<float> k = known_good::download(cache.k + slots.of(p) * width, width);
    const std::vector<float> v = known_good::download(cache.v + slots.of(p) * width, width);
    k_rows.insert(k_rows.end(), k.begin(), k.end());
    v_rows.insert(v_rows.end(), v.begin(), v.end());
  }
  o.assign(static_cast<size_t>(n_heads) * h_d, 0.0);
  lse.assign(static_cast<size_t>(n_heads), -std::numeric_limits<double>::infinity());
  std::vector<double> s(static_cast<size_t>(end - begin));
  for (int h = 0; h < n_heads; ++h) {
    const size_t g = static_cast<size_t>(h / group) * h_d;
    double top = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < end - begin; ++j) {
      double dot = 0;
      for (int t = 0; t < h_d; ++t) dot += static_cast<double>(q[static_cast<size_t>(h) * h_d + t]) * k_rows[j * width + g + t];
      s[j] = dot * scale;
      top = std::max(top, s[j]);
    }
    if (end == begin) continue;
    double sum = 0;
    for (int j = 0; j < end - begin; ++j) sum += (s[j] = std::exp(s[j] - top));
    for (int j = 0; j < end - begin; ++j) {
      for (int t = 0; t < h_d; ++t) o[static_cast<size_t>(h) * h_d + t] += s[j] / sum * v_rows[j * width + g + t];
    }
    lse[h] = top + std::log(sum);
  }
}

std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace

void decode_attention(const float* q, const KvCacheView& cache, int len, float* out, int n_heads,
                      cudaStream_t stream) {
  check_decode_args("decode_attention", q, cache, len, out, n_heads);
  known_good::wait_for(stream);
  const known_good::KvSlots slots(cache);
  std::vector<double> o, lse;
  attend(known_good::download(q, static_cast<size_t>(n_heads) * cache.head_dim), cache, slots, 0, len, n_heads, o, lse);
  known_good::upload(out, to_float(o));
}

int decode_attention_splits(int len, int split_size) {
  known_good::require(len >= 0 && split_size >= 1, "decode_attention_splits",
                      "need len >= 0 and split_size >= 1 (got len=" + std::to_string(len) +
                          ", split_size=" + std::to_string(split_size) + ")");
  return static_cast<int>((static_cast<long long>(len) + split_size - 1) / split_size);
}

void decode_attention_split(const float* q, const KvCacheView& cache, int len, float* out, int n_heads,
                            int split_size, float* partial_o, float* partial_lse, cudaStream_t stream) {
  check_decode_args("decode_attention_split", q, cache, len, out, n_heads);
  known_good::require(split_size >= 1, "decode_attention_split",
                      "split_size must be at least 1 (got " + std::to_string(split_size) + ")");
  known_good::require(partial_o && partial_lse, "decode_attention_split",
                      "partial_o and partial_lse must be device workspaces");
  known_good::require(partial_o != out && partial_o != q && partial_lse != out && partial_lse != partial_o,
                      "decode_attention_split", "partial_o, partial_lse and out must be distinct buffers");
  known_good::wait_for(stream);
  const known_good::KvSlots slots(cache);
  const std::vector<float> qs = known_good::download(q, static_cast<size_t>(n_heads) * cache.head_dim);
  const int splits = decode_attention_splits(len, split_size);
  std::vector<float> all_o, all_lse;
  for (int c = 0; c < splits; ++c) {
    std::vector<double> o, lse;
    attend(qs, cache, slots, c * split_size, std::min(len, (c + 1) * split_size), n_heads, o, lse);
    all_o.insert(all_o.end(), o.begin(), o.end());
    all_lse.insert(all_lse.end(), lse.begin(), lse.end());
  }
  known_good::upload(partial_o, all_o);
  known_good::upload(partial_lse, all_lse);
  merge_attention_states(partial_o, partial_lse, splits, out, nullptr, n_heads, cache.head_dim, stream);
}

void merge_attention_states(const float* o, const float* lse, int n_states, float* out, float* out_lse,
                            int n_heads, int head_dim, cudaStream_t stream) {
  known_good::require(n_states >= 1 && n_heads >= 1 && head_dim >= 1, "merge_attention_states",
                      "n_states, n_heads and head_dim must be positive (got " + std::to_string(n_states) + ", " +
                          std::to_string(n_heads) + " and " + std::to_string(head_dim) + ")");
  known_good::require(o && lse && out, "merge_attention_states", "o, lse and out must be device pointers");
  known_good::require(out != o && out != lse && !(out_lse && (out_lse == o || out_lse == lse || out_lse == out)),
                      "merge_attention_states", "out and out_lse must not alias the states or each other");
  known_good::wait_for(stream);
  const size_t width = static_cast<size_t>(n_heads) * head_dim;
  const std::vector<float> os = known_good::download(o, static_cast<size_t>(n_states) * width);
  const std::vector<float> ls = known_good::download(lse, static_cast<size_t>(n_states) * n_heads);
  std::vector<float> merged(width, 0.f), merged_lse(static_cast<size_t>(n_heads));
  for (int h = 0; h < n_heads; ++h) {
    double top = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < n_states; ++j) top = std::max(top, static_cast<double>(ls[static_cast<size_t>(j) * n_heads + h]));
    if (top == -std::numeric_limits<double>::infinity()) {  // no state saw a key
      merged_lse[h] = -std::numeric_limits<float>::infinity();
      continue;
    }
    double total = 0;
    std::vector<double> acc(static_cast<size_t>(head_dim), 0.0);
    for (int j = 0; j < n_states; ++j) {
      const double weight = std::exp(ls[static_cast<size_t>(j) * n_heads + h] - top);
      total += weight;
      for (int t = 0; t < head_dim; ++t) acc[t] += weight * os[j * width + static_cast<size_t>(h) * head_dim + t];
    }
    for (int t = 0; t < head_dim; ++t) merged[static_cast<size_t>(h) * head_dim + t] = static_cast<float>(acc[t] / total);
    merged_lse[h] = static_cast<float>(top + std::log(total));
  }
  known_good::upload(out, merged);
  if (out_lse) known_good::upload(out_lse, merged_lse);
}

}  // namespace clockwork::kernels
