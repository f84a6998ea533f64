/// @file batched_generator.cpp
/// BatchedGenerator (batched_generator.h).
///
/// Device buffers: the weights; the RoPE tables of every position (for prefill); a prefill set
/// ([capacity, ·], grown for longer prompts) with one page table; a decode set for max_batch
/// rows, with the index arrays of a step (ids, positions, lens, the page tables as a
/// [max_batch, table_stride] matrix, the split plan) and the split-KV workspaces. The host keeps
/// every request's page table; a step packs the running requests' tables into rows 0 .. B−1 and
/// uploads them with the other index arrays, so the kernels never see a request's number, only
/// its row in this step's batch.
#include "harness/pipeline/batched_generator.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <stdexcept>
#include <string>
#include <utility>

#include "harness/check/cuda_check.h"
#include "harness/profiling/nvtx.h"
#include "kernels/kernels.h"
#include "harness/pipeline/layer_buffers.h"
#include "kernels/steps.h"

namespace clockwork {

namespace {

int pages_for(long long positions, int page_size) {
  return static_cast<int>((positions + page_size - 1) / page_size);
}

}  // namespace

struct BatchedGenerator::Impl {
  struct Request {
    std::vector<int32_t> prompt;
    int max_new = 0;
    std::vector<int32_t> generated;
    std::vector<int32_t> table;  // logical page -> physical page
    int length = 0;              // positions in the pool
    int need_pages = 0;          // pages it may hold at most
    bool done = false;
  };

  ModelConfig config;
  BatchedGeneratorOptions options;
  int multiprocessors = 1;
  int table_stride = 0;
  int target_blocks = 0;
  int max_chunks = 0;

  std::vector<void*> weight_memory;
  const __nv_bfloat16* embed = nullptr;
  std::vector<LayerWeights> layers;
  const __nv_bfloat16* norm = nullptr;
  const __nv_bfloat16* lm_head = nullptr;
  const double* inv_freq = nullptr;

  std::vector<void*> fixed_memory;
  float* rope_cos = nullptr;  // [context, h_d/2]
  float* rope_sin = nullptr;
  int32_t* prefill_table = nullptr;  // [table_stride]
  float* prefill_norm = nullptr;     // [d]
  float* prefill_logits = nullptr;   // [V]
  // The decode step, [max_batch, ·].
  int32_t* ids = nullptr;
  int32_t* positions = nullptr;
  int32_t* lens = nullptr;
  int32_t* tables = nullptr;  // [max_batch, table_stride]
  int32_t* chunk_request = nullptr;
  int32_t* chunk_begin = nullptr;
  int32_t* chunk_end = nullptr;
  int32_t* first_chunk = nullptr;  // [max_batch + 1]
  float* cos_b = nullptr;          // [max_batch, h_d/2]
  float* sin_b = nullptr;
  float* x = nullptr;  // [max_batch, d]
  LayerBuffers step_buffers;  // [max_batch, ·]; scores unused
  float* partial_o = nullptr;
  float* partial_lse = nullptr;
  float* x_norm = nullptr;  // [max_batch, d]
  float* logits = nullptr;  // [max_batch, V]

  int capacity = 0;  // of the prefill set
  std::vector<void*> prefill_memory;
  int32_t* prefill_ids = nullptr;
  float* prefill_x = nullptr;
  LayerBuffers prefill_buffers;

  std::unique_ptr<PagePool> pool;
  std::vector<Request> requests;
  std::deque<int> queue;     // waiting, in submission order
  std::vector<int> batch;    // running, in request order
  int reserved = 0;          // pages the running requests may still take
  int n_finished = 0;
  BatchStepStats stats;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    pool.reset();
    free_device_memory(prefill_memory);
    free_device_memory(fixed_memory);
    free_device_memory(weight_memory);
  }

  template <class T>
  T* allocate(std::vector<void*>& memory, size_t count, const std::string& what) {
    return allocate_device<T>(memory, count, "BatchedGenerator", what);
  }
  // allocate<float> into `memory`, for allocate_layer_buffers().
  auto float_allocator(std::vector<void*>& memory) {
    return [this, &memory](size_t count, const std::string& what) {
      return allocate<float>(memory, count, what);
    };
  }

  int context() const { return static_cast<int>(config.max_position_embeddings); }
  int vocab() const { return static_cast<int>(config.vocab_size); }

  void setup() {
    const ModelConfig& c = config;
    const BatchedGeneratorOptions& o = options;
    if (o.max_batch < 1 || o.max_batch > 65535) {
      throw std::invalid_argument("BatchedGenerator: max_batch must be in [1, 65535] (got " +
                                  std::to_string(o.max_batch) + ")");
    }
    if (o.page_size < 1 || o.num_pages < 0 || o.min_chunk < 1) {
      throw std::invalid_argument(
          "BatchedGenerator: page_size and min_chunk must be positive and num_pages >= 0 (got " +
          std::to_string(o.page_size) + ", " + std::to_string(o.min_chunk) + " and " +
          std::to_string(o.num_pages) + ")");
    }
    table_stride = pages_for(context(), o.page_size);
    const int pages = o.num_pages > 0 ? o.num_pages : o.max_batch * table_stride;
    const int h_k = static_cast<int>(c.num_kv_heads);
    target_blocks = o.split_blocks > 0 ? o.split_blocks : split_kv_target_blocks(multiprocessors);
    max_chunks = o.split_blocks < 0 ? o.max_batch
                                    : max_split_kv_chunks(o.max_batch, h_k, target_blocks);

    const size_t B = static_cast<size_t>(o.max_batch);
    const size_t d = static_cast<size_t>(c.hidden_size);
    const size_t qw = static_cast<size_t>(c.num_heads * c.head_dim);
    const size_t half = static_cast<size_t>(c.head_dim / 2);
    auto& m = fixed_memory;
    rope_cos = allocate<float>(m, static_cast<size_t>(context()) * half, "RoPE cos table");
    rope_sin = allocate<float>(m, static_cast<size_t>(context()) * half, "RoPE sin table");
    prefill_table = allocate<int32_t>(m, static_cast<size_t>(table_stride), "prefill page table");
    prefill_norm = allocate<float>(m, d, "prefill final norm");
    prefill_logits = allocate<float>(m, static_cast<size_t>(vocab()), "prefill logits");
    ids = allocate<int32_t>(m, B, "batch ids");
    positions = allocate<int32_t>(m, B, "batch positions");
    lens = allocate<int32_t>(m, B, "batch lengths");
    tables = allocate<int32_t>(m, B * static_cast<size_t>(table_stride), "batch page tables");
    const size_t chunks = static_cast<size_t>(max_chunks);
    chunk_request = allocate<int32_t>(m, chunks, "split chunk requests");
    chunk_begin = allocate<int32_t>(m, chunks, "split chunk begins");
    chunk_end = allocate<int32_t>(m, chunks, "split chunk ends");
    first_chunk = allocate<int32_t>(m, B + 1, "split first chunks");
    cos_b = allocate<float>(m, B * half, "batch RoPE cos");
    sin_b = allocate<float>(m, B * half, "batch RoPE sin");
    x = allocate<float>(m, B * d, "batch residual stream");
    allocate_layer_buffers(step_buffers, c, B, false, "batch ", float_allocator(m));
    partial_o = allocate<float>(m, chunks * qw, "split partial outputs");
    partial_lse = allocate<float>(m, chunks * static_cast<size_t>(c.num_heads), "split LSEs");
    x_norm = allocate<float>(m, B * d, "batch final norm");
    logits = allocate<float>(m, B * static_cast<size_t>(vocab()), "batch logits");

    // RoPE tables of every position, for prefill (as CachedModel computes them).
    std::vector<int32_t> pos(static_cast<size_t>(context()));
    for (int i = 0; i < context(); ++i) pos[static_cast<size_t>(i)] = i;
    std::vector<void*> scratch;
    try {
      auto* p = allocate<int32_t>(scratch, pos.size(), "positions");
      CUDA_CHECK(cudaMemcpy(p, pos.data(), pos.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
      kernels::rope_tables(p, inv_freq, rope_cos, rope_sin, context(), static_cast<int>(half));
      CUDA_CHECK(cudaDeviceSynchronize());
    } catch (...) {
      free_device_memory(scratch);
      throw;
    }
    free_device_memory(scratch);
    pool = std::make_unique<PagePool>(KvCacheShape::of(c), o.page_size, pages);
  }

  void reserve_prefill(int s) {
    if (s <= capacity) return;
    const ModelConfig& c = config;
    const int cap = std::min(context(), std::max({s, 2 * capacity, 16}));
    free_device_memory(prefill_memory);
    capacity = 0;
    const size_t n = static_cast<size_t>(cap);
    auto& m = prefill_memory;
    prefill_ids = allocate<int32_t>(m, n, "prompt ids");
    prefill_x =
        allocate<float>(m, n * static_cast<size_t>(c.hidden_size), "prompt residual stream");
    allocate_layer_buffers(prefill_buffers, c, n, !options.fused_attention, "prompt ",
                           float_allocator(m));
    capacity = cap;
  }

  std::string name(int r) const { return "request " + std::to_string(r); }

  // Greedy choice among the choosable tokens; ties go to the lowest id, NaN is never chosen.
  int32_t pick(const float* row, int r, const char* phase) const {
    const int n = options.choosable > 0 ? std::min<int>(options.choosable, vocab()) : vocab();
    int32_t best = 0;
    float best_v = 0.f;
    bool have = false;
    for (int i = 0; i < n; ++i) {
      const float v = row[i];
      if (v != v) continue;
      if (!have || v > best_v) {
        best = i;
        best_v = v;
        have = true;
      }
    }
    if (!have) {
      throw std::runtime_error(
          "BatchedGenerator: every logit of " + name(r) + " is NaN after " + phase +
          (std::string(phase) == "prefill"
               ? "; run clockwork verify to find the first layer that goes wrong"
               : "; the batched decode kernels of milestone 5 (batched_kv_cache_append, "
                 "batched_decode_attention) are missing or broken: run ctest -L milestone5"));
    }
    return best;
  }

  // Records token t of request r; returns whether r is finished.
  bool record(int r, int32_t t, std::vector<BatchToken>& out) {
    Request& q = requests[static_cast<size_t>(r)];
    q.generated.push_back(t);
    const bool stop =
        std::find(options.stop_ids.begin(), options.stop_ids.end(), t) != options.stop_ids.end();
    const bool last = stop || static_cast<int>(q.generated.size()) >= q.max_new ||
                      static_cast<int>(q.prompt.size() + q.generated.size()) >= context();
    out.push_back({r, t, last});
    if (last) finish(r);
    return last;
  }

  void finish(int r) {
    Request& q = requests[static_cast<size_t>(r)];
    reserved -= q.need_pages - static_cast<int>(q.table.size());
    pool->give_back(q.table);
    q.done = true;
    ++n_finished;
  }

  // Prefill of request r alone, through its own page table; its first token.
  void prefill(int r, std::vector<BatchToken>& out) {
    Request& q = requests[static_cast<size_t>(r)];
    const int s = static_cast<int>(q.prompt.size());
    const nvtx::Range range("prefill request ", r);
    pool->take(pages_for(s, options.page_size), q.table, name(r));
    reserved += q.need_pages - static_cast<int>(q.table.size());
    q.length = s;
    reserve_prefill(s);
    CUDA_CHECK(cudaMemcpy(prefill_table, q.table.data(), q.table.size() * sizeof(int32_t),
                          cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(prefill_ids, q.prompt.data(), q.prompt.size() * sizeof(int32_t),
                          cudaMemcpyHostToDevice));
    const ModelConfig& c = config;
    kernels::embedding(prefill_ids, embed, prefill_x, s, static_cast<int>(c.hidden_size), vocab());
    const RopeTablesView rope{rope_cos, rope_sin};
    for (size_t i = 0; i < layers.size(); ++i) {
      prefill_layer(c, layers[i], rope,
                    pool->sequence_view(static_cast<int>(i), prefill_table,
                                        static_cast<int>(q.table.size())),
                    prefill_x, prefill_buffers, s);
    }
    output_logits(c, prefill_x, s, norm, lm_head, prefill_norm, prefill_logits);
    std::vector<float> host(static_cast<size_t>(vocab()));
    CUDA_CHECK(cudaMemcpy(host.data(), prefill_logits, host.size() * sizeof(float),
                          cudaMemcpyDeviceToHost));
    if (!record(r, pick(host.data(), r, "prefill"), out)) batch.push_back(r);
  }

  void admit(std::vector<BatchToken>& out) {
    while (!queue.empty() && static_cast<int>(batch.size()) < options.max_batch) {
      const int r = queue.front();
      const Request& q = requests[static_cast<size_t>(r)];
      const int available = pool->free_pages() - reserved;
      if (q.need_pages > available) {
        if (batch.empty()) {
          throw PagePoolExhausted(
              "page pool exhausted after " + std::to_string(n_finished) + " finished request(s): " +
              name(r) + " needs " + std::to_string(q.need_pages) + " page(s) of " +
              std::to_string(options.page_size) + " positions, but the pool of " +
              std::to_string(pool->num_pages()) + " pages has only " +
              std::to_string(pool->free_pages()) +
              " free and no request is running: pages of finished requests did not come back");
        }
        break;  // it waits until a running request finishes and frees its pages
      }
      queue.pop_front();
      ++stats.admitted;
      prefill(r, out);
    }
  }

  void decode(std::vector<BatchToken>& out) {
    const int B = static_cast<int>(batch.size());
    if (B == 0) return;
    const ModelConfig& c = config;
    const int d = static_cast<int>(c.hidden_size), d_ff = static_cast<int>(c.intermediate_size);
    const int h = static_cast<int>(c.num_heads), h_k = static_cast<int>(c.num_kv_heads);
    const int h_d = static_cast<int>(c.head_dim);
    const float eps = static_cast<float>(c.rms_norm_eps);
    const nvtx::Range range("batched decode B=", B);

    std::vector<int32_t> h_ids(static_cast<size_t>(B)), h_pos(static_cast<size_t>(B)),
        h_lens(static_cast<size_t>(B));
    std::vector<int32_t> h_tables(static_cast<size_t>(B) * table_stride, -1);
    std::vector<int> lens_host(static_cast<size_t>(B));
    for (int i = 0; i < B; ++i) {
      const int r = batch[static_cast<size_t>(i)];
      Request& q = requests[static_cast<size_t>(r)];
      const int pos = q.length;  // the newest token's position
      const int want = pages_for(pos + 1, options.page_size);
      const int more = want - static_cast<int>(q.table.size());
      if (more > 0) {
        pool->take(more, q.table, name(r) + " at position " + std::to_string(pos));
        reserved -= more;
      }
      q.length = pos + 1;
      h_ids[static_cast<size_t>(i)] = q.generated.back();
      h_pos[static_cast<size_t>(i)] = pos;
      h_lens[static_cast<size_t>(i)] = pos + 1;
      lens_host[static_cast<size_t>(i)] = pos + 1;
      std::copy(q.table.begin(), q.table.end(),
                h_tables.begin() + static_cast<std::ptrdiff_t>(i) * table_stride);
    }
    auto upload = [](int32_t* dst, const std::vector<int32_t>& src) {
      CUDA_CHECK(cudaMemcpy(dst, src.data(), src.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    };
    upload(ids, h_ids);
    upload(positions, h_pos);
    upload(lens, h_lens);
    upload(tables, h_tables);

    SplitKvPlan plan;
    bool split = false;
    if (options.split_blocks >= 0) {
      plan = plan_split_kv(lens_host, h_k, target_blocks, options.min_chunk);
      split = plan.splits();
      if (split && plan.n_chunks() > max_chunks) {
        throw std::logic_error("BatchedGenerator: the plan has " + std::to_string(plan.n_chunks()) +
                               " chunks, more than the " + std::to_string(max_chunks) +
                               " the workspace holds");
      }
    }
    kernels::SplitKvWork work;
    if (split) {
      upload(chunk_request, plan.chunk_request);
      upload(chunk_begin, plan.chunk_begin);
      upload(chunk_end, plan.chunk_end);
      upload(first_chunk, plan.first_chunk);
      work = {chunk_request, chunk_begin, chunk_end, first_chunk, plan.n_chunks()};
    }
    stats.decoded = B;
    stats.chunks = split ? plan.n_chunks() : B;

    kernels::embedding(ids, embed, x, B, d, vocab());
    kernels::rope_tables(positions, inv_freq, cos_b, sin_b, B, h_d / 2);
    const LayerBuffers& b = step_buffers;
    for (size_t i = 0; i < layers.size(); ++i) {
      const nvtx::Range layer_range("layer ", static_cast<int>(i));
      const LayerWeights& w = layers[i];
      qkv_projection(c, {w.input_layernorm, w.q_proj, w.k_proj, w.v_proj}, x, b.attn_norm, b.q,
                     b.k, b.v, B);
      kernels::rope_apply(b.q, cos_b, sin_b, B, h, h_d);
      kernels::rope_apply(b.k, cos_b, sin_b, B, h_k, h_d);
      kernels::BatchedKvView view = pool->layer(static_cast<int>(i));
      view.page_tables = tables;
      view.lens = lens;
      view.batch = B;
      view.table_stride = table_stride;
      kernels::batched_kv_cache_append(b.k, b.v, view);
      if (split) {
        kernels::batched_decode_attention_split(b.q, view, work, b.attn, h, partial_o,
                                                partial_lse);
      } else {
        kernels::batched_decode_attention(b.q, view, b.attn, h);
      }
      kernels::matmul(b.attn, w.o_proj, b.attn_out, B, d, h * h_d);
      kernels::residual_add(x, b.attn_out, static_cast<size_t>(B) * d);
      kernels::rmsnorm(x, w.post_attention_layernorm, b.ffn_norm, B, d, eps);
      kernels::matmul(b.ffn_norm, w.gate_proj, b.gate, B, d_ff, d);
      kernels::matmul(b.ffn_norm, w.up_proj, b.up, B, d_ff, d);
      kernels::swiglu(b.gate, b.up, b.ffn_hidden, static_cast<size_t>(B) * d_ff);
      kernels::matmul(b.ffn_hidden, w.down_proj, b.ffn_out, B, d, d_ff);
      kernels::residual_add(x, b.ffn_out, static_cast<size_t>(B) * d);
    }
    kernels::rmsnorm(x, norm, x_norm, B, d, eps);
    kernels::matmul(x_norm, lm_head, logits, B, vocab(), d);
    std::vector<float> host(static_cast<size_t>(B) * vocab());
    CUDA_CHECK(cudaMemcpy(host.data(), logits, host.size() * sizeof(float), cudaMemcpyDeviceToHost));

    std::vector<int> still;
    for (int i = 0; i < B; ++i) {
      const int r = batch[static_cast<size_t>(i)];
      if (!record(r, pick(host.data() + static_cast<size_t>(i) * vocab(), r, "the batched decode step"), out))
        still.push_back(r);
    }
    batch = std::move(still);
  }
};

BatchedGenerator BatchedGenerator::load(const std::filesystem::path& dir,
                                        const BatchedGeneratorOptions& options,
                                        const LoadProgress& progress) {
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.config = ModelConfig::from_file(dir / "config.json");
  m.options = options;
  DeviceWeights w = load_device_weights(dir, m.config, m.weight_memory, progress, "BatchedGenerator");
  m.embed = w.embed;
  m.layers = std::move(w.layers);
  m.norm = w.norm;
  m.lm_head = w.lm_head;
  m.inv_freq = w.inv_freq;
  if (cudaDeviceGetAttribute(&m.multiprocessors, cudaDevAttrMultiProcessorCount, 0) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    m.multiprocessors = 1;
  }
  m.setup();
  return BatchedGenerator(std::move(impl));
}

BatchedGenerator::BatchedGenerator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BatchedGenerator::BatchedGenerator(BatchedGenerator&&) noexcept = default;
BatchedGenerator& BatchedGenerator::operator=(BatchedGenerator&&) noexcept = default;
BatchedGenerator::~BatchedGenerator() = default;

const ModelConfig& BatchedGenerator::config() const { return impl_->config; }
const BatchedGeneratorOptions& BatchedGenerator::options() const { return impl_->options; }
const PagePool& BatchedGenerator::pool() const { return *impl_->pool; }

int BatchedGenerator::submit(const std::vector<int32_t>& prompt, int max_new_tokens) {
  Impl& m = *impl_;
  const int r = static_cast<int>(m.requests.size());
  const std::string who = "BatchedGenerator::submit: request " + std::to_string(r);
  if (prompt.empty() || static_cast<int>(prompt.size()) > m.context()) {
    throw std::invalid_argument(who + " has a prompt of " + std::to_string(prompt.size()) +
                                " tokens; it must hold 1 .. " + std::to_string(m.context()) +
                                " (the context)");
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= m.vocab()) {
      throw std::invalid_argument(who + ": token " + std::to_string(i) + " is " +
                                  std::to_string(prompt[i]) + ", outside the vocabulary [0, " +
                                  std::to_string(m.vocab()) + ")");
    }
  }
  if (max_new_tokens < 1) {
    throw std::invalid_argument(who + ": max_new_tokens must be at least 1 (got " +
                                std::to_string(max_new_tokens) + ")");
  }
  Impl::Request q;
  q.prompt = prompt;
  q.max_new = max_new_tokens;
  // Positions it may hold: the prompt and every new token but the last, within the context.
  const long long positions = std::min<long long>(
      m.context(), static_cast<long long>(prompt.size()) + max_new_tokens - 1);
  q.need_pages = pages_for(positions, m.options.page_size);
  if (q.need_pages > m.pool->num_pages()) {
    throw PagePoolExhausted("page pool too small: request " + std::to_string(r) + " (prompt of " +
                            std::to_string(prompt.size()) + " tokens, up to " +
                            std::to_string(max_new_tokens) + " new) needs " +
                            std::to_string(q.need_pages) + " pages of " +
                            std::to_string(m.options.page_size) + " positions, the pool holds " +
                            std::to_string(m.pool->num_pages()));
  }
  m.requests.push_back(std::move(q));
  m.queue.push_back(r);
  return r;
}

std::vector<BatchToken> BatchedGenerator::step() {
  Impl& m = *impl_;
  m.stats = {};
  std::vector<BatchToken> out;
  m.admit(out);
  m.decode(out);
  return out;
}

bool BatchedGenerator::idle() const { return impl_->queue.empty() && impl_->batch.empty(); }
int BatchedGenerator::running() const { return static_cast<int>(impl_->batch.size()); }
int BatchedGenerator::waiting() const { return static_cast<int>(impl_->queue.size()); }
int BatchedGenerator::finished() const { return impl_->n_finished; }

const std::vector<int32_t>& BatchedGenerator::generated(int request) const {
  if (request < 0 || request >= static_cast<int>(impl_->requests.size())) {
    throw std::out_of_range("BatchedGenerator::generated: no request " + std::to_string(request));
  }
  return impl_->requests[static_cast<size_t>(request)].generated;
}

const BatchStepStats& BatchedGenerator::last_step() const { return impl_->stats; }

}  // namespace clockwork
