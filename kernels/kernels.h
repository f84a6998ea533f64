/// @file kernels.h
/// The launchers of every student kernel, as the framework calls them.
///
/// Precision policy of the course: **weights stay bf16** on the device, exactly as the checkpoint
/// stores them (Llama-3-8B is 16 GB in bf16 and fits a 24 GB card; in fp32 it would need 32 GB);
/// **activations and every accumulation are fp32**. A kernel reads a bf16 weight, widens it to
/// fp32 (`__bfloat162float`) and accumulates in fp32.
///
/// Layouts are row-major. Linear weights are stored (out_features, in_features), so a projection
/// computes y = x·Wᵀ. Every launcher checks its arguments (throwing std::invalid_argument naming
/// the argument), launches on `stream`, and checks the launch (throwing std::runtime_error).
///
/// This header is included by kernels and by host code alike: keep it free of libtorch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace clockwork::kernels {

// ---- milestone 1 ------------------------------------------------------------------------------

/// Embedding lookup: x[i, :] = float(table[ids[i], :]) for i < s.
/// An id outside [0, vocab) is an error: the kernel flags it and the launcher throws
/// std::out_of_range naming the position and the id (the launcher synchronises `stream` to see it).
/// @param ids     [s] token ids on the device
/// @param table   [vocab, d] bf16 embedding table (`model.embed_tokens.weight`)
/// @param x       [s, d] fp32 output
/// @param s       number of tokens
/// @param d       hidden size
/// @param vocab   rows of the table
/// @param stream  stream to run on
void embedding(const int32_t* ids, const __nv_bfloat16* table, float* x, int s, int d, int vocab,
               cudaStream_t stream = nullptr);

/// The matmul kernels of milestone 1, kept side by side for the profiling exercises.
enum class MatmulVariant {
  Naive = 0,  ///< one thread per output element, operands straight from global memory
  Tiled = 1,  ///< shared-memory tiles with coalesced loads (the handout's design; the default)
};

/// Projection with bf16 weights: y[m, n] = x[m, k] · w[n, k]ᵀ.
/// @param x        [m, k] fp32 activations
/// @param w        [n, k] bf16 weight, as stored (out_features, in_features)
/// @param y        [m, n] fp32 output
/// @param m        rows of x (tokens)
/// @param n        output features
/// @param k        input features
/// @param stream   stream to run on
/// @param variant  which kernel (the tiled one unless profiling the naive one)
void matmul(const float* x, const __nv_bfloat16* w, float* y, int m, int n, int k,
            cudaStream_t stream = nullptr, MatmulVariant variant = MatmulVariant::Tiled);

/// fp32 matmul for attention: c[m, n] = a[m, k] · b[k, n], or a[m, k] · b[n, k]ᵀ when
/// `transpose_b` (scores Q·Kᵀ use the transposed form, P·V the plain one).
/// @param a            [m, k] fp32
/// @param b            [k, n] fp32, or [n, k] when transpose_b
/// @param c            [m, n] fp32 output
/// @param m            rows of a and c
/// @param n            columns of c
/// @param k            length of the sums
/// @param transpose_b  whether b is stored [n, k]
/// @param stream       stream to run on
/// @param lda          row stride of a in elements (0: packed, k)
/// @param ldb          row stride of b in elements (0: packed, n or k)
/// @param ldc          row stride of c in elements (0: packed, n); the strides let one head of a
///                     [s, h·h_d] activation be used in place
void matmul_f32(const float* a, const float* b, float* c, int m, int n, int k, bool transpose_b,
                cudaStream_t stream = nullptr, int lda = 0, int ldb = 0, int ldc = 0);

// ---- milestone 2 ------------------------------------------------------------------------------

/// RMSNorm of each row: y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) ⊙ gamma.
/// @param x       [rows, d] fp32
/// @param gamma   [d] bf16 (`input_layernorm.weight` or `post_attention_layernorm.weight`)
/// @param y       [rows, d] fp32 (may not alias x)
/// @param rows    number of rows
/// @param d       row length (hidden size)
/// @param eps     added to the mean square inside the square root (`rms_norm_eps`)
/// @param stream  stream to run on
void rmsnorm(const float* x, const __nv_bfloat16* gamma, float* y, int rows, int d, float eps,
             cudaStream_t stream = nullptr);

// ---- milestone 3 ------------------------------------------------------------------------------

/// The `rope_scaling` of Llama 3.1/3.2 checkpoints (`rope_type: "llama3"`), as plain numbers so
/// that this header stays free of the config reader. Llama-3-8B has none (pass nullptr).
struct RopeScalingParams {
  double factor = 1.0;                            ///< how much long wavelengths are stretched
  double low_freq_factor = 1.0;                   ///< wavelengths above original/low are scaled
  double high_freq_factor = 1.0;                  ///< wavelengths below original/high are kept
  double original_max_position_embeddings = 0.0;  ///< context length the model was trained for
};

/// RoPE inverse frequencies on the host, in double: θ_i = theta^(−2i/h_d) for i < h_d/2, then,
/// with `scaling`, the llama3 rescaling (divide long wavelengths by `factor`, keep short ones,
/// blend the band between). Upload the result once and pass it to rope_tables().
/// Throws std::invalid_argument for an odd or non-positive head_dim, theta <= 0 or bad scaling.
/// @param head_dim  h_d (even)
/// @param theta     `rope_theta` (500000 for Llama 3)
/// @param scaling   llama3 scaling, or nullptr
/// @return          [h_d/2] inverse frequencies
std::vector<double> rope_inv_freq(int head_dim, double theta,
                                  const RopeScalingParams* scaling = nullptr);

/// RoPE tables: cos_table[r, i] = cos(positions[r]·inv_freq[i]), sin_table[r, i] likewise with
/// sin. The angle reaches the position in radians (θ_0 = 1), so it is formed in double.
/// @param positions  [s] int32 positions on the device (0 .. s−1 for a prompt)
/// @param inv_freq   [half] double inverse frequencies on the device (from rope_inv_freq())
/// @param cos_table  [s, half] fp32 output
/// @param sin_table  [s, half] fp32 output
/// @param s          number of positions
/// @param half       h_d / 2
/// @param stream     stream to run on
void rope_tables(const int32_t* positions, const double* inv_freq, float* cos_table,
                 float* sin_table, int s, int half, cudaStream_t stream = nullptr);

/// RoPE in place on every head of every row, pairing element i with element i + h_d/2 of the
/// same head (first half with second half, not even/odd):
///   x'_i = x_i·cos − x_{i+h_d/2}·sin,   x'_{i+h_d/2} = x_i·sin + x_{i+h_d/2}·cos.
/// Called once for Q (n_heads = h) and once for K (n_heads = h_k) with the same tables.
/// @param x          [s, n_heads·head_dim] fp32, rotated in place
/// @param cos_table  [s, head_dim/2] from rope_tables(), row r for the position of row r
/// @param sin_table  [s, head_dim/2] from rope_tables()
/// @param s          number of rows (tokens)
/// @param n_heads    heads per row
/// @param head_dim   h_d (even)
/// @param stream     stream to run on
void rope_apply(float* x, const float* cos_table, const float* sin_table, int s, int n_heads,
                int head_dim, cudaStream_t stream = nullptr);

/// Causal softmax of a score matrix, in place: row r sits at position cols − rows + r, so every
/// column c > cols − rows + r is masked (probability exactly 0); the visible entries become
/// softmax(scale · scores) with the row maximum subtracted before exp.
/// @param scores  [rows, cols] fp32 raw scores Q_i·K_gᵀ in, probabilities out
/// @param rows    query rows (s_q)
/// @param cols    key columns (s_k >= rows)
/// @param scale   multiplies every score first (1/sqrt(h_d))
/// @param stream  stream to run on
void causal_softmax(float* scores, int rows, int cols, float scale, cudaStream_t stream = nullptr);

/// Causal grouped-query attention over a prompt: for every query head i, with KV head
/// g = i / (h/h_k): S = Q_i·K_gᵀ / sqrt(h_d), causal mask, row softmax, O_i = softmax(S)·V_g,
/// written to columns i·h_d .. (i+1)·h_d of `out` (heads concatenated). One head at a time.
/// @param q           [s, n_heads·head_dim] fp32 (after RoPE)
/// @param k           [s, n_kv_heads·head_dim] fp32 (after RoPE)
/// @param v           [s, n_kv_heads·head_dim] fp32
/// @param out         [s, n_heads·head_dim] fp32 output (may not alias q, k or v)
/// @param scores      [s, s] fp32 workspace, reused by every head
/// @param s           number of tokens
/// @param n_heads     h
/// @param n_kv_heads  h_k (divides h)
/// @param head_dim    h_d
/// @param stream      stream to run on
void attention(const float* q, const float* k, const float* v, float* out, float* scores, int s,
               int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream = nullptr);

/// SwiGLU, element-wise: out = SiLU(gate) ⊙ up with SiLU(z) = z / (1 + e^(−z)).
/// @param gate    [n] fp32 (X_norm·W_gateᵀ)
/// @param up      [n] fp32 (X_norm·W_upᵀ)
/// @param out     [n] fp32 (may alias gate or up)
/// @param n       number of elements (s · d_ff)
/// @param stream  stream to run on
void swiglu(const float* gate, const float* up, float* out, size_t n,
            cudaStream_t stream = nullptr);

/// Residual connection in place: x += y, element-wise (used after attention and after the FFN).
/// @param x       [n] fp32 residual stream, updated in place
/// @param y       [n] fp32 sub-layer output
/// @param n       number of elements (s · d)
/// @param stream  stream to run on
void residual_add(float* x, const float* y, size_t n, cudaStream_t stream = nullptr);

/// lm_head as a GEMV over ONE row: logits[j] = x_last · w[j, :] (never all s rows).
/// @param x_last  [d] fp32: RMSNorm(model.norm) of the last position
/// @param w       [vocab, d] bf16 (`lm_head.weight`, or `model.embed_tokens.weight` when tied)
/// @param logits  [vocab] fp32 output
/// @param vocab   V
/// @param d       hidden size
/// @param stream  stream to run on
void lm_head(const float* x_last, const __nv_bfloat16* w, float* logits, int vocab, int d,
             cudaStream_t stream = nullptr);

/// Index of the largest of n values; ties go to the lowest index. NaN is never chosen (when all
/// values are NaN the result is n).
/// @param values  [n] fp32 on the device (the logits)
/// @param n       number of values (>= 1)
/// @param index   [1] int32 output on the device
/// @param stream  stream to run on
void argmax(const float* values, int n, int32_t* index, cudaStream_t stream = nullptr);

// ---- milestone 4 (extension): the KV cache and decode attention --------------------------------

/// One layer's K and V cache as the kernels see it.
///
/// Storage is a pool of pages, token-major: `k` and `v` are each
/// [num_pages, page_size, n_kv_heads, head_dim] fp32. A *slot* (physical page, offset) holds one
/// position: a row of n_kv_heads·head_dim values laid out exactly like one row of the flat K (or
/// V) activation, so writing a position is a row copy and head g of it is the contiguous slice
/// g·head_dim .. (g+1)·head_dim of the slot.
///
/// Position p of the sequence lives in slot (page_table[p / page_size], p % page_size). A
/// contiguous cache is the special case `page_table == nullptr`: one page of page_size
/// (= capacity) slots in which position p is slot p.
struct KvCacheView {
  float* k = nullptr;                   ///< [num_pages, page_size, n_kv_heads, head_dim]
  float* v = nullptr;                   ///< [num_pages, page_size, n_kv_heads, head_dim]
  const int32_t* page_table = nullptr;  ///< [table_pages] physical page of each logical page
                                        ///< (device memory); nullptr for a contiguous cache
  int table_pages = 0;  ///< entries of page_table (1 for a contiguous cache): the sequence can
                        ///< address table_pages·page_size positions
  int num_pages = 0;    ///< physical pages in k and v (1 for a contiguous cache)
  int page_size = 0;    ///< slots per page (the capacity, for a contiguous cache)
  int n_kv_heads = 0;   ///< h_k
  int head_dim = 0;     ///< h_d
};

/// Positions a view can address: table_pages·page_size (0 for an invalid view).
int kv_cache_capacity(const KvCacheView& cache);

/// The checks every launcher that reads or writes a cache makes on the view itself: non-null and
/// distinct k and v, positive sizes, and num_pages = table_pages = 1 without a page table.
/// Throws std::invalid_argument starting with `who` and naming the field.
void check_kv_cache_view(const KvCacheView& cache, const char* who);

/// Writes the K and V rows of positions first_pos .. first_pos+n−1 into their slots; every other
/// slot is left untouched. Prefill calls it once per layer with all s prompt positions
/// (first_pos = 0), a decode step with its one new position (first_pos = pos, n = 1).
/// Throws std::out_of_range when first_pos + n exceeds kv_cache_capacity(cache) (a full cache is
/// an error, never a silent overwrite) and std::invalid_argument, naming the field, for a
/// malformed view. The page table's entries must lie in [0, num_pages) (KvCache keeps them so).
/// @param k          [n, n_kv_heads·head_dim] fp32 keys of these positions, after RoPE
/// @param v          [n, n_kv_heads·head_dim] fp32 values
/// @param cache      the layer's cache
/// @param first_pos  position of row 0 (>= 0)
/// @param n          number of positions (>= 0)
/// @param stream     stream to run on
void kv_cache_append(const float* k, const float* v, const KvCacheView& cache, int first_pos,
                     int n, cudaStream_t stream = nullptr);

/// Decode attention: ONE new query row against positions 0 .. len−1 of the cache (the new
/// token's own K and V included, so append before attending). For query head i with KV head
/// g = i / (h/h_k): out_i = softmax(q_i·K_gᵀ / sqrt(h_d))·V_g over the len cached positions.
/// One block per KV head: the h/h_k query heads of a group share every K and V tile it loads.
/// @param q        [n_heads·head_dim] fp32 query of the new token (after RoPE at position len−1)
/// @param cache    the layer's cache
/// @param len      cached positions to attend to (1 .. kv_cache_capacity(cache))
/// @param out      [n_heads·head_dim] fp32 output, heads concatenated (may not alias q)
/// @param n_heads  h (a multiple of cache.n_kv_heads)
/// @param stream   stream to run on
void decode_attention(const float* q, const KvCacheView& cache, int len, float* out, int n_heads,
                      cudaStream_t stream = nullptr);

/// Number of chunks decode_attention_split() cuts len positions into: ceil(len / split_size).
int decode_attention_splits(int len, int split_size);

/// Split-KV decode attention (flash-decoding): the len positions are cut into chunks of
/// split_size (the last one may be shorter); block (g, c) computes the attention state (O, LSE)
/// of KV head g's query heads over chunk c, and merge_attention_states() combines the chunks.
/// Same result as decode_attention() up to rounding, with h_k·ceil(len/split_size) blocks
/// instead of h_k, so a long cache keeps the whole GPU busy.
/// @param q            [n_heads·head_dim] fp32 query (after RoPE)
/// @param cache        the layer's cache
/// @param len          cached positions to attend to (1 .. kv_cache_capacity(cache))
/// @param out          [n_heads·head_dim] fp32 output (may not alias q or the workspaces)
/// @param n_heads      h
/// @param split_size   positions per chunk (>= 1)
/// @param partial_o    [decode_attention_splits(len, split_size), n_heads·head_dim] workspace
/// @param partial_lse  [decode_attention_splits(len, split_size), n_heads] workspace
/// @param stream       stream to run on
void decode_attention_split(const float* q, const KvCacheView& cache, int len, float* out,
                            int n_heads, int split_size, float* partial_o, float* partial_lse,
                            cudaStream_t stream = nullptr);

/// Merges attention states of the same queries over disjoint key sets. State j of head i is
/// (O_j, LSE_j) with LSE_j = log Σ_{keys of j} exp(score) (scores already scaled by 1/sqrt(h_d))
/// and O_j the softmax-weighted mean of the values over those keys. The merge is associative:
///   LSE = log Σ_j e^{LSE_j},   O = Σ_j e^{LSE_j − LSE}·O_j
/// (computed with the largest LSE_j subtracted first, so that large scores cannot overflow).
/// A state over no keys has LSE = −inf and weight 0; when every state is empty O = 0 and
/// LSE = −inf.
/// @param o          [n_states, n_heads·head_dim] fp32 partial outputs
/// @param lse        [n_states, n_heads] fp32 log-sum-exps
/// @param n_states   number of states (>= 1)
/// @param out        [n_heads·head_dim] fp32 merged output (may not alias o)
/// @param out_lse    [n_heads] fp32 merged log-sum-exp, or nullptr when not needed
/// @param n_heads    h
/// @param head_dim   h_d
/// @param stream     stream to run on
void merge_attention_states(const float* o, const float* lse, int n_states, float* out,
                            float* out_lse, int n_heads, int head_dim,
                            cudaStream_t stream = nullptr);

// ---- milestone 5 (extension): fused prefill attention --------------------------------------

/// Query rows and key positions per tile of flash_attention(): a block owns one query tile of
/// one GQA group and walks the key tiles 0 .. its own (the later ones are in the future).
inline constexpr int kFlashAttentionTile = 32;

/// Fused causal grouped-query attention: the same result, inputs, output and layout as
/// attention(), in one kernel with an online softmax over K/V tiles held in shared memory and no
/// [s, s] score buffer (device memory beyond q, k, v and out: none). Block (t, g) computes query
/// tile t of the h/h_k query heads of KV head g, so they share every K and V tile it loads; key
/// tiles after the diagonal are skipped entirely.
/// Throws std::invalid_argument for bad sizes, aliasing, or a group·h_d too large for a block
/// (see flash_attention_shared_bytes()).
/// @param q           [s, n_heads·head_dim] fp32 (after RoPE)
/// @param k           [s, n_kv_heads·head_dim] fp32 (after RoPE)
/// @param v           [s, n_kv_heads·head_dim] fp32
/// @param out         [s, n_heads·head_dim] fp32 output (may not alias q, k or v)
/// @param s           number of tokens
/// @param n_heads     h
/// @param n_kv_heads  h_k (divides h)
/// @param head_dim    h_d
/// @param stream      stream to run on
void flash_attention(const float* q, const float* k, const float* v, float* out, int s,
                     int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream = nullptr);

/// Bytes of shared memory one flash_attention() block uses for these shapes (0 for invalid ones).
size_t flash_attention_shared_bytes(int n_heads, int n_kv_heads, int head_dim);

/// The tile flash_attention() uses for these shapes: kFlashAttentionTile, or half of it where a
/// block of the full tile would not fit; 0 for shapes it refuses.
int flash_attention_tile(int n_heads, int n_kv_heads, int head_dim);

/// flash_attention() with both products on tensor cores: Q, K, V and the softmax's
/// probabilities rounded to bf16, every sum in fp32 (nvcuda::wmma, compute capability 8.0 and
/// up). A bf16 operand keeps 8 significant bits, so the output is about 2^-8 relative from the
/// fp32 result: not for the model's pipeline, whose activations stay fp32, but the form every
/// serving engine runs, and what FlashAttention's published throughput is measured in.
/// Throws std::invalid_argument for bad sizes, aliasing, head_dim not a multiple of 16 or over
/// 128, or more than 8 query heads per KV head; std::runtime_error on a GPU older than sm_80.
/// Arguments as flash_attention().
void flash_attention_tensor_cores(const float* q, const float* k, const float* v, float* out,
                                  int s, int n_heads, int n_kv_heads, int head_dim,
                                  cudaStream_t stream = nullptr);

/// Query positions per flash_attention_tensor_cores() block (16·8/group, at least 16); 0 for
/// shapes it refuses.
int flash_attention_tensor_cores_tile(int n_heads, int n_kv_heads, int head_dim);

/// Bytes of shared memory one flash_attention_tensor_cores() block uses (0 for invalid shapes).
size_t flash_attention_tensor_cores_shared_bytes(int n_heads, int n_kv_heads, int head_dim);

/// flash_attention_tensor_cores() the way FlashAttention-2 issues it: mma.sync and ldmatrix
/// (kernels/warp_mma.h), whose register layouts are documented, so that each warp keeps its
/// scores, their softmax and the probabilities in registers instead of passing them through
/// shared memory. The same blocks (flash_attention_tensor_cores_tile()), rounding, arguments and
/// refusals as flash_attention_tensor_cores().
void flash_attention_mma(const float* q, const float* k, const float* v, float* out, int s,
                         int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream = nullptr);

/// Bytes of shared memory one flash_attention_mma() block uses (0 for invalid shapes): Q, then
/// one K and V tile over it.
size_t flash_attention_mma_shared_bytes(int n_heads, int n_kv_heads, int head_dim);

// ---- milestone 5 (extension): batched decode over a shared page pool ------------------------

/// One layer's K and V for a *batch* of requests that share one pool of pages.
///
/// The pool is laid out as in KvCacheView ([num_pages, page_size, n_kv_heads, head_dim] fp32 for K
/// and for V), but every request has its own page table and its own length: row b of
/// `page_tables` (table_stride entries, unused ones −1) maps request b's logical pages to physical
/// pages, and request b holds positions 0 .. lens[b] − 1. Position p of request b lives in slot
///   page_tables[b·table_stride + p / page_size]·page_size + p % page_size.
/// The batch is ragged: the requests' lengths differ, and nothing is padded to the longest.
struct BatchedKvView {
  float* k = nullptr;                    ///< [num_pages, page_size, n_kv_heads, head_dim]
  float* v = nullptr;                    ///< [num_pages, page_size, n_kv_heads, head_dim]
  const int32_t* page_tables = nullptr;  ///< [batch, table_stride] device
  const int32_t* lens = nullptr;         ///< [batch] device: positions each request holds
  int batch = 0;         ///< requests in the batch
  int table_stride = 0;  ///< entries per row of page_tables: a request addresses at most
                         ///< table_stride·page_size positions
  int num_pages = 0;     ///< physical pages in k and v
  int page_size = 0;     ///< slots per page
  int n_kv_heads = 0;    ///< h_k
  int head_dim = 0;      ///< h_d
};

/// The checks of every batched launcher on the view: non-null distinct pointers, positive sizes.
/// Throws std::invalid_argument starting with `who` and naming the field.
void check_batched_kv_view(const BatchedKvView& cache, const char* who);

/// The decode step's append for a whole batch, one launch: row b of k and v (the new token of
/// request b) goes to request b's position lens[b] − 1, through request b's own page table.
/// Nothing else is written. A position whose page lies outside the pool is skipped.
/// @param k       [batch, n_kv_heads·head_dim] fp32 keys of the new tokens, after RoPE
/// @param v       [batch, n_kv_heads·head_dim] fp32 values
/// @param cache   the layer's pool; lens[b] already counts the new token
/// @param stream  stream to run on
void batched_kv_cache_append(const float* k, const float* v, const BatchedKvView& cache,
                             cudaStream_t stream = nullptr);

/// Decode attention for a whole batch in one launch over (KV head, request): request b's query
/// row attends to its positions 0 .. lens[b] − 1 (read through its own page table), for every
/// query head i with KV head g = i / (h/h_k), exactly as decode_attention() does for one request.
/// @param q        [batch, n_heads·head_dim] fp32 queries (after RoPE at each request's position)
/// @param cache    the layer's pool, page tables and lengths (every lens[b] >= 1)
/// @param out      [batch, n_heads·head_dim] fp32 output (may not alias q)
/// @param n_heads  h (a multiple of cache.n_kv_heads)
/// @param stream   stream to run on
void batched_decode_attention(const float* q, const BatchedKvView& cache, float* out, int n_heads,
                              cudaStream_t stream = nullptr);

/// The work list of a split batched decode attention (device arrays, from a plan such as
/// plan_split_kv() in harness/pipeline/split_kv_plan.h): chunk c covers positions
/// chunk_begin[c] .. chunk_end[c] − 1 of request chunk_request[c]; the chunks of request b are
/// first_chunk[b] .. first_chunk[b+1] − 1, in order, and cover all its positions.
struct SplitKvWork {
  const int32_t* chunk_request = nullptr;  ///< [n_chunks]
  const int32_t* chunk_begin = nullptr;    ///< [n_chunks]
  const int32_t* chunk_end = nullptr;      ///< [n_chunks]
  const int32_t* first_chunk = nullptr;    ///< [batch + 1]
  int n_chunks = 0;                        ///< chunks in all (blocks per KV head)
};

/// Split-KV batched decode attention: block (g, c) computes the attention state (O, LSE) of
/// chunk c for KV head g's query heads into partial_o[c] and partial_lse[c]; then
/// merge_attention_states_batched() joins each request's chunks into its row of out. Same result
/// as batched_decode_attention() up to rounding, with the work spread evenly over the blocks
/// when a plan cuts long requests into chunks of about the same length.
/// @param q            [batch, n_heads·head_dim] fp32 queries
/// @param cache        the layer's pool, page tables and lengths
/// @param work         the chunks (device arrays)
/// @param out          [batch, n_heads·head_dim] fp32 output
/// @param n_heads      h
/// @param partial_o    [work.n_chunks, n_heads·head_dim] workspace
/// @param partial_lse  [work.n_chunks, n_heads] workspace
/// @param stream       stream to run on
void batched_decode_attention_split(const float* q, const BatchedKvView& cache,
                                    const SplitKvWork& work, float* out, int n_heads,
                                    float* partial_o, float* partial_lse,
                                    cudaStream_t stream = nullptr);

/// merge_attention_states() for a batch: request b's states are rows first_chunk[b] ..
/// first_chunk[b+1] − 1 of o and lse, merged into row b of out. One launch over (head, request).
/// @param o            [n_chunks, n_heads·head_dim] fp32 partial outputs
/// @param lse          [n_chunks, n_heads] fp32 log-sum-exps
/// @param first_chunk  [batch + 1] device offsets
/// @param batch        requests
/// @param out          [batch, n_heads·head_dim] fp32 merged output
/// @param n_heads      h
/// @param head_dim     h_d
/// @param stream       stream to run on
void merge_attention_states_batched(const float* o, const float* lse, const int32_t* first_chunk,
                                    int batch, float* out, int n_heads, int head_dim,
                                    cudaStream_t stream = nullptr);

// ---- milestone 6 (extension): Gemma 3 ----------------------------------------------------------

/// GeGLU, element-wise: out = GELU(gate) ⊙ up with the tanh approximation
/// GELU(z) ≈ 0.5·z·(1 + tanh(sqrt(2/π)·(z + 0.044715·z³))) (transformers' "gelu_pytorch_tanh").
/// @param gate    [n] fp32 (X_norm·W_gateᵀ)
/// @param up      [n] fp32 (X_norm·W_upᵀ)
/// @param out     [n] fp32 (may alias gate or up)
/// @param n       number of elements (s · d_ff)
/// @param stream  stream to run on
void geglu(const float* gate, const float* up, float* out, size_t n,
           cudaStream_t stream = nullptr);

/// Gemma's RMSNorm of each row: y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) ⊙ (1 + w), where w
/// is the stored weight (Gemma stores the scale minus one).
/// @param x       [rows, d] fp32
/// @param w       [d] bf16 (input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
///                post_feedforward_layernorm or model.norm)
/// @param y       [rows, d] fp32 (may be x: the norm can run in place)
/// @param rows    number of rows
/// @param d       row length
/// @param eps     inside the square root (`rms_norm_eps`, 1e-6 for Gemma 3)
/// @param stream  stream to run on
void rmsnorm_gemma(const float* x, const __nv_bfloat16* w, float* y, int rows, int d, float eps,
                   cudaStream_t stream = nullptr);

/// QK-norm, in place: rmsnorm_gemma of every head of every row of a flat [s, n_heads·head_dim]
/// activation (s·n_heads rows of head_dim), all heads sharing the weight. Gemma applies it to Q
/// and K after the projections and BEFORE RoPE.
/// @param x         [s, n_heads·head_dim] fp32, normalised in place
/// @param w         [head_dim] bf16 (`self_attn.q_norm.weight` or `self_attn.k_norm.weight`)
/// @param s         number of rows (tokens)
/// @param n_heads   h for Q, h_k for K
/// @param head_dim  h_d
/// @param eps       `rms_norm_eps`
/// @param stream    stream to run on
void qk_norm(float* x, const __nv_bfloat16* w, int s, int n_heads, int head_dim, float eps,
             cudaStream_t stream = nullptr);

/// Causal grouped-query attention with a score scale and an optional sliding window: query row p
/// of head i (KV head g = ⌊i / (h/h_k)⌋) attends to keys max(0, p − window + 1) .. p with scores
/// scale·q·k, or to 0 .. p when window is 0 (a global layer). Same layouts as attention().
/// @param q           [s, n_heads·head_dim] fp32 (after QK-norm and RoPE)
/// @param k           [s, n_kv_heads·head_dim] fp32 (after QK-norm and RoPE)
/// @param v           [s, n_kv_heads·head_dim] fp32
/// @param out         [s, n_heads·head_dim] fp32 (may not alias q, k or v)
/// @param s           number of tokens (at most 12288: one row's scores live in shared memory)
/// @param n_heads     h
/// @param n_kv_heads  h_k (divides h)
/// @param head_dim    h_d
/// @param scale       factor of the scores (Gemma 3: query_pre_attn_scalar^(−1/2))
/// @param window      keys a query sees, its own included (`sliding_window`); 0 for no window
/// @param stream      stream to run on
void sliding_window_attention(const float* q, const float* k, const float* v, float* out, int s,
                              int n_heads, int n_kv_heads, int head_dim, float scale, int window,
                              cudaStream_t stream = nullptr);

/// x *= factor, element-wise, in place (Gemma's embeddings times sqrt(d)).
/// @param x       [n] fp32
/// @param factor  the factor
/// @param n       number of elements (s · d)
/// @param stream  stream to run on
void scale(float* x, float factor, size_t n, cudaStream_t stream = nullptr);

/// Bytes of dynamic shared memory one sliding_window_attention() block uses for s tokens.
size_t sliding_window_attention_shared_bytes(int s);

/// The first position a decode query at position len − 1 sees: len − window on a local layer
/// once len > window, otherwise 0 (and always 0 for window = 0, a global layer).
int sliding_window_first_position(int len, int window);

/// Decode attention of Gemma 3: ONE new query row (the token at position len − 1, its own k and v
/// already in the cache) against a layer's cache, scores scale·q·k. On a local layer
/// (window > 0) it sees positions sliding_window_first_position(len, window) .. len − 1 only;
/// on a global layer (window = 0) all of 0 .. len − 1.
/// The cache is a ring: with C = kv_cache_capacity(cache) slots, position p lives in slot p mod C
/// (then through the page table, if any). A local layer's cache needs only C = window slots; a
/// global layer's holds every position (len ≤ C, so slot p). Throws std::out_of_range when the
/// visible positions outnumber C (some were overwritten), std::invalid_argument for a bad
/// argument, naming it.
/// @param q        [n_heads·head_dim] fp32 query (after QK-norm and RoPE at position len − 1)
/// @param cache    the layer's cache (ring of kv_cache_capacity(cache) slots)
/// @param len      positions of the sequence so far, the new token's included (>= 1)
/// @param out      [n_heads·head_dim] fp32 output, heads concatenated (may not alias q)
/// @param n_heads  h (a multiple of cache.n_kv_heads)
/// @param scale    factor of the scores (query_pre_attn_scalar^(−1/2))
/// @param window   keys the query sees, its own included (`sliding_window`); 0 for no window
/// @param stream   stream to run on
void sliding_window_decode_attention(const float* q, const KvCacheView& cache, int len, float* out,
                                     int n_heads, float scale, int window,
                                     cudaStream_t stream = nullptr);

}  // namespace clockwork::kernels
