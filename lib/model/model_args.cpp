#include "model/model_args.h"

namespace titan {

int64_t ModelArgs::ffn_hidden_dim() const {
  if (hidden_dim) return *hidden_dim;
  int64_t hidden = static_cast<int64_t>(2.0 * (4 * dim) / 3.0);
  if (ffn_dim_multiplier) hidden = static_cast<int64_t>(*ffn_dim_multiplier * hidden);
  return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
}

int64_t ModelArgs::num_params() const {
  int64_t hd = head_dim();
  int64_t attention = dim * n_heads * hd + 2 * dim * kv_heads() * hd + n_heads * hd * dim;
  int64_t ffn = 3 * dim * ffn_hidden_dim();
  int64_t block = attention + ffn + 2 * dim;  // + attention_norm, ffn_norm
  if (qk_norm) block += 2 * hd;               // + q_norm, k_norm
  const int64_t output = tie_embeddings ? 0 : dim * vocab_size;
  return vocab_size * dim + n_layers * block + dim + output;  // + norm, output
}

}  // namespace titan
