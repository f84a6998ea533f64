// Whole-model checks (see end_to_end.h).
#include "milestones/milestone3/tests/end_to_end.h"

#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "harness/check/tolerances.h"
#include "harness/check/torch_bridge.h"
#include "harness/pipeline/model.h"
#include "milestones/milestone3/tests/candidates.h"
#include "milestones/milestone3/tests/chain.h"

namespace clockwork {

namespace {

// One layer's ops, each with its own allowance.
std::vector<Tolerance> layer_ops(const ModelConfig& c, int64_t s) {
  const int64_t d = c.hidden_size;
  return {tol::rms_norm(d),
          tol::matmul(d),
          tol::rope(s),
          tol::attention(c.head_dim, s),
          tol::matmul(c.num_heads * c.head_dim),
          tol::rms_norm(d),
          tol::matmul(d),
          tol::swiglu(),
          tol::matmul(c.intermediate_size)};
}

std::vector<int64_t> widen(const std::vector<int32_t>& ids) {
  return {ids.begin(), ids.end()};
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// How far `got` is from `want`, for the printed table.
struct Measured {
  double max_abs_over_rms = 0;  // max |Δ| in units of rms(want)
  double cosine = 0;
  double share = 0;  // the largest |Δ| / (the element's allowance): below 1 passes
  bool finite = true;
};

Measured measure(const std::vector<float>& got, const std::vector<float>& want,
                 const Tolerance& t) {
  Measured m;
  if (got.size() != want.size() || want.empty()) return {NAN, NAN, NAN, false};
  double ss = 0, dot = 0, gg = 0, max_abs = 0;
  for (size_t i = 0; i < want.size(); ++i) ss += static_cast<double>(want[i]) * want[i];
  const double rms = std::sqrt(ss / static_cast<double>(want.size()));
  const double abs_limit = t.atol + t.rms_atol * rms;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!std::isfinite(g)) m.finite = false;
    const double diff = std::fabs(g - w);
    max_abs = std::max(max_abs, diff);
    m.share = std::max(m.share, diff / (abs_limit + t.rtol * std::fabs(w)));
    dot += g * w;
    gg += g * g;
  }
  m.max_abs_over_rms = rms > 0 ? max_abs / rms : max_abs;
  m.cosine = gg > 0 && ss > 0 ? dot / std::sqrt(gg * ss) : (gg == ss ? 1.0 : 0.0);
  if (!m.finite) m = {NAN, NAN, NAN, false};
  return m;
}

// One row of the table: the measured error, and the allowance (rms_atol·rms + rtol·|ref|).
void print_row(const std::string& what, const Measured& m, const Tolerance& t) {
  char used[32];
  if (m.share <= 10) {
    std::snprintf(used, sizeof used, "%.2f%%", 100 * m.share);
  } else {
    std::snprintf(used, sizeof used, "%.3gx", m.share);  // far outside: how many times over
  }
  std::printf("  %-18s %11.3e %13.9f %9.3e %9.3e %9s%s\n", what.c_str(), m.max_abs_over_rms,
              m.cosine, t.rms_atol, t.rtol, used,
              !m.finite     ? "   <- NaN/inf"
              : m.share > 1 ? "   <- outside"
                            : "");
}

// The k largest logits' ids, largest first (ties to the lower id, like the argmax kernel).
std::vector<int32_t> top_ids(const std::vector<float>& logits, int k) {
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  k = std::min<int>(k, static_cast<int>(ids.size()));
  // NaN ranks last, which keeps the order strict (and a NaN logit never looks likely).
  auto key = [&](int32_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return key(a) > key(b) || (key(a) == key(b) && a < b);
  });
  ids.resize(static_cast<size_t>(k));
  return ids;
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// "1234 ' Paris'". Control bytes and bytes above ASCII are escaped (\xNN): a token may hold part
// of a UTF-8 character, and the line must stay on one line.
std::string show_token(const Tokenizer* tok, int32_t id) {
  std::string out = std::to_string(id);
  if (!tok || id < 0 || id >= tok->vocab_size()) return out;
  out += " '";
  for (char ch : tok->token_bytes(id)) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out += ch;
    }
  }
  return out + "'";
}


}  // namespace

Tolerance after_layers(const ModelConfig& c, int64_t s, int64_t layers) {
  Tolerance t{0, 0,
              "each layer adds the rounding of its nine ops (norms, projections, RoPE, attention, "
              "SwiGLU) and carries the earlier layers' errors on: the sum of the op tolerances "
              "times the number of layers so far",
              0};
  for (const Tolerance& p : layer_ops(c, s)) {
    t.rtol += layers * p.rtol;
    t.rms_atol += layers * p.rms_atol;
  }
  return t;
}

Tolerance logits_tolerance(const ModelConfig& c, int64_t s) {
  Tolerance t = after_layers(c, s, c.num_layers);
  t.rtol += tol::rms_norm(c.hidden_size).rtol + tol::matmul(c.hidden_size).rtol;
  t.rms_atol += tol::rms_norm(c.hidden_size).rms_atol + tol::matmul(c.hidden_size).rms_atol;
  t.why = "every layer's allowance, then the final RMSNorm and the lm_head GEMV over d";
  return t;
}

void expect_same_choice(int32_t got, int64_t want, const torch::Tensor& ref_logits,
                        const Tolerance& t, const std::string& what) {
  if (got == want) return;
  const std::vector<float> l = to_vector(ref_logits);
  ASSERT_TRUE(got >= 0 && got < static_cast<int32_t>(l.size()))
      << what << ": token " << got << " is not in the vocabulary";
  double rms = 0;
  for (float v : l) rms += static_cast<double>(v) * v;
  rms = std::sqrt(rms / static_cast<double>(l.size()));
  const double gap = l[static_cast<size_t>(want)] - l[static_cast<size_t>(got)];
  EXPECT_LE(gap, 2 * (t.rms_atol * rms + t.rtol * std::fabs(l[static_cast<size_t>(want)])))
      << what << ": chose token " << got << " but the reference chooses " << want << " (logit "
      << l[want] << " vs " << l[got] << "), which is not a near-tie";
}


void check_end_to_end(const std::filesystem::path& dir, const std::vector<int32_t>& ids,
                      const EndToEndOptions& options) {
  using Clock = std::chrono::steady_clock;
  const ModelConfig c = ModelConfig::from_file(dir / "config.json");
  const int64_t s = static_cast<int64_t>(ids.size()), d = c.hidden_size;
  SCOPED_TRACE(options.label + ", " + std::to_string(s) + " tokens");
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const ref::WeightLookup lookup = ref::checkpoint_lookup(checkpoint);
  const ref::Model reference(c, lookup);
  torch::NoGradGuard no_grad;

  auto t0 = Clock::now();
  Model model = Model::load(dir);
  const double load_s = seconds_since(t0);
  t0 = Clock::now();
  ForwardCapture capture;
  const std::vector<float> logits = model.forward(ids, &capture);
  const double model_s = seconds_since(t0);
  t0 = Clock::now();
  const ref::ForwardResult r = reference.forward(widen(ids));
  const double ref_s = seconds_since(t0);
  std::printf(
      "%s: d=%lld h=%lld h_k=%lld h_d=%lld d_ff=%lld V=%lld, %lld layers; s = %lld tokens\n"
      "  load %.1f s; forward pass: Model %.1f s, reference %.1f s\n",
      options.label.c_str(), static_cast<long long>(d), static_cast<long long>(c.num_heads),
      static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.head_dim),
      static_cast<long long>(c.intermediate_size), static_cast<long long>(c.vocab_size),
      static_cast<long long>(c.num_layers), static_cast<long long>(s), load_s, model_s, ref_s);

  // Compares, and only when something differs pays for the pitfall candidates that name it.
  auto check = [&](const std::string& what, const std::vector<float>& got,
                   const std::vector<float>& want, const std::vector<int64_t>& shape,
                   const Tolerance& t,
                   const std::function<std::vector<PitfallCandidate>()>& candidates) {
    const bool ok = got.size() == want.size() && compare(got, want, shape, t).ok();
    std::vector<PitfallCandidate> named;
    if (!ok && options.name_pitfalls) named = candidates();
    EXPECT_TRUE(matches_reference(what, got, want, shape, t, named));
    return ok;
  };
  const torch::Tensor& x0 = r.embeddings;
  auto chain_at = [&](int64_t layers, std::function<torch::Tensor(const Chain&)> pick,
                      const std::vector<float>& got) {
    return [&c, &lookup, &x0, layers, pick, &got] {
      return explaining(chain_pitfalls(c, lookup, x0, layers, pick), got);
    };
  };

  ASSERT_EQ(capture.layer_outputs.size(), static_cast<size_t>(c.num_layers))
      << "Model::forward captured the wrong number of layer outputs";
  std::vector<std::vector<float>> want_layers;
  for (const torch::Tensor& h : r.hidden) want_layers.push_back(to_vector(h));
  const Tolerance t_logits = logits_tolerance(c, s);
  const std::vector<float> want_norm = to_vector(r.final_norm_last);
  const std::vector<float> want_logits = to_vector(r.logits);

  // The table first, so that it reads as one block above any failure report.
  // max|d|/rms: the largest difference in units of the reference's root-mean-square; used: the
  // largest ratio of an element's difference to its allowance (100% is the limit).
  std::printf("  %-18s %11s %13s %9s %9s %9s\n", "output", "max|d|/rms", "cosine", "rms_atol",
              "rtol", "used");
  for (size_t l = 0; l < want_layers.size(); ++l) {
    const Tolerance t = after_layers(c, s, static_cast<int64_t>(l) + 1);
    print_row("layer " + std::to_string(l), measure(capture.layer_outputs[l], want_layers[l], t),
              t);
  }
  print_row("final norm (last)", measure(capture.final_norm_last, want_norm, t_logits), t_logits);
  print_row("logits", measure(logits, want_logits, t_logits), t_logits);
  std::fflush(stdout);

  // Later layers inherit the first bad layer's error: only that one is reported.
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::vector<float>& got = capture.layer_outputs[static_cast<size_t>(l)];
    const std::vector<float>& want = want_layers[static_cast<size_t>(l)];
    auto pick = [l](const Chain& ch) { return ch.hidden.at(l); };
    if (!check("output of layer " + std::to_string(l), got, want, {s, d}, after_layers(c, s, l + 1),
               chain_at(l + 1, pick, got))) {
      ADD_FAILURE() << "layer " << l << " is the first whose output differs; the later layers, "
                    << "the final norm and the logits inherit its error and were not checked. "
                    << "`ctest -L milestone3` runs each operator on its own.";
      return;
    }
  }
  auto last_norm = [s](const Chain& ch) { return ch.final_norm[s - 1]; };
  check("final_norm_last", capture.final_norm_last, want_norm, {d}, t_logits,
        chain_at(-1, last_norm, capture.final_norm_last));
  check("logits", logits, want_logits, {c.vocab_size}, t_logits, [&] {
    std::vector<PitfallCandidate> all = explaining(
        chain_pitfalls(c, lookup, x0, -1, [](const Chain& ch) { return ch.logits; }), logits);
    add_first_row_views(all, static_cast<size_t>(c.vocab_size));
    return all;
  });

  const int32_t next = options.device_argmax ? model.next_token(ids) : top_ids(logits, 1)[0];
  std::printf("  next token: Model %s, reference %s\n", show_token(options.tokenizer, next).c_str(),
              show_token(options.tokenizer, static_cast<int32_t>(r.next_token)).c_str());
  expect_same_choice(next, r.next_token, r.logits, t_logits, "next token");

  // The gate: the sequence grows with the reference's choice, so both sides always see the same
  // ids even where a near-tie made them pick differently.
  std::vector<int32_t> seq = ids;
  std::vector<float> dev = logits, ref = want_logits;
  for (int step = 1; step <= options.gate_steps; ++step) {
    if (step > 1) {
      if (static_cast<int64_t>(seq.size()) >= c.max_position_embeddings) break;
      dev = model.forward(seq);
      ref = to_vector(reference.forward(widen(seq)).logits);
    }
    const std::vector<int32_t> dev_top = top_ids(dev, 5), ref_top = top_ids(ref, 5);
    std::printf("  gate step %d: Model %s, reference %s\n", step,
                show_token(options.tokenizer, dev_top[0]).c_str(),
                show_token(options.tokenizer, ref_top[0]).c_str());
    EXPECT_TRUE(contains(ref_top, dev_top[0]))
        << "gate step " << step << " (" << seq.size() << " tokens): the Model's choice "
        << show_token(options.tokenizer, dev_top[0])
        << " is not among the reference's five most likely tokens; rounding differences swap "
        << "close neighbours, not this";
    EXPECT_TRUE(contains(dev_top, ref_top[0]))
        << "gate step " << step << " (" << seq.size() << " tokens): the reference's choice "
        << show_token(options.tokenizer, ref_top[0])
        << " is not among the Model's five most likely tokens";
    seq.push_back(ref_top[0]);
  }
}

}  // namespace clockwork
