// Hugging Face Llama checkpoint folders (what LlamaForCausalLM.save_pretrained writes and
// from_pretrained reads), loaded into and written from titan-train's parameters. Names, RoPE
// permutation and tied embeddings: hf_llama.h; config.json: hf_config.h.
//
// A folder holds config.json and either
//   model.safetensors                       every tensor, or
//   model.safetensors.index.json            {"metadata": {"total_size": N},
//                                            "weight_map": {"<tensor>": "<shard file>", ...}}
//   model-00001-of-0000K.safetensors ...    the shards it names, beside it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/hf_config.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/sharded_checkpoint.h"
#include "model/model_args.h"

namespace titan {

constexpr const char* kHfConfigFile = "config.json";
constexpr const char* kHfSingleFile = "model.safetensors";
constexpr const char* kHfIndexFile = "model.safetensors.index.json";

// transformers' default max_shard_size ("5GB").
constexpr uint64_t kHfDefaultShardBytes = 5'000'000'000ull;

struct HfLoadReport {
  HfConfig config;
  std::vector<std::string> files;  // the safetensors files read, in order
  uint64_t bytes = 0;              // the bytes read from them (headers and the rows kept)
  // Of the files' headers: equal on ranks that read the same files (whatever rows each keeps).
  uint64_t headers_checksum = 0;
  bool tied = false;  // output.weight is embed_tokens (tie_word_embeddings)
  // Things transformers would also pass over, one line each: skipped rotary tables, an
  // lm_head.weight that tie_word_embeddings overrides.
  std::vector<std::string> notes;
};

// Whether `folder` is a Hugging Face checkpoint folder: config.json beside model.safetensors or
// model.safetensors.index.json (titan-train's own checkpoints have config.toml instead).
bool is_hf_checkpoint_folder(const std::string& folder);

// The largest safetensors file load_hf_checkpoint reads for `args`: every parameter in float32
// plus 64 MiB for headers and skipped tables. A larger shard is refused (ConfigError naming it)
// before it is read.
uint64_t hf_max_file_bytes(const ModelArgs& args);

// Loads the Hugging Face checkpoint at `path` (its folder, its model.safetensors or its
// model.safetensors.index.json) for the model `args` builds: config.json (beside the weights)
// is checked first (check_hf_config: every mismatch named), then each safetensors file (a regular
// file no larger than hf_max_file_bytes), one at a time, its header first, then tensor by
// tensor: renamed, wq and wk permuted to titan-train's RoPE layout and converted to `dtype`
// (float32, bfloat16, float16 or float64 files alike).
// `keep` chooses the rows (first dimension) of each parameter to read: all (shards 0), or an
// FSDP rank's (RowShare). Only those rows' bytes are read; for wq and wk, the whole heads that
// hold them (the permutation works within a head).
// Returns titan-train's parameters (their kept rows) in module order (model_parameter_shapes);
// with tied embeddings output.weight is the same tensor as tok_embeddings.weight.
// Throws ConfigError (exit 2) naming the file for a missing config.json, safetensors file or
// tensor, a tensor of another shape or not floating, an unknown tensor, a shard other than the
// one the index names, a tensor in two files; FileRefused for a path that is not a regular file;
// RuntimeFailure (exit 1) for a damaged safetensors file.
std::vector<NamedTensor> load_hf_checkpoint(const std::string& path, const ModelArgs& args,
                                            at::ScalarType dtype, HfLoadReport* report = nullptr,
                                            RowShare keep = {});

struct HfWriteOptions {
  at::ScalarType dtype = at::kFloat;  // float32, bfloat16 or float16
  // Tensors go into shards of at most this many bytes (one larger tensor alone in its shard),
  // in hf_llama.h's order; one shard is written as model.safetensors without an index.
  uint64_t max_shard_bytes = kHfDefaultShardBytes;
  // Leave lm_head.weight out and set tie_word_embeddings when output.weight equals
  // tok_embeddings.weight bit for bit (hf_ties_embeddings of the flavor).
  bool tie_if_equal = false;
  // Replace an existing `folder`, but only one that holds nothing but what this writer writes
  // (config.json, model.safetensors, the index, model-*-of-*.safetensors).
  bool replace = false;
};

struct HfWriteRecord {
  std::string path;
  std::vector<std::string> files;  // as named in the folder, config.json last
  uint64_t bytes = 0;              // all files together
  bool tied = false;
};

// Refuses `folder` as write_hf_checkpoint's target, before anything is written: a link or not a
// folder (FileRefused), any existing folder without `replace`, or one holding anything that
// write_hf_checkpoint does not write (ConfigError naming it). Returns whether it exists.
bool check_hf_checkpoint_target(const std::string& folder, bool replace);

// Writes titan-train's parameters `tensors` (exactly model_parameter_shapes(args), any order,
// any floating dtype and device) as a Hugging Face checkpoint folder `folder`, with its
// config.json (hf_config_for). The folder is complete or absent: it is written as
// .<name>.tmp beside it (a stale one removed first), every file flushed, then renamed into
// place and the rename flushed. Throws ConfigError naming `folder` when it exists (unless
// `replace` allows it) or a tensor is missing, extra or mis-shaped; FileRefused when `folder`
// is a link or not a folder; RuntimeFailure for I/O errors (the temporary folder removed).
// `should_abort` is polled between pieces of the files, as save_checkpoint does (WriteAborted).
HfWriteRecord write_hf_checkpoint(const std::string& folder,
                                  const std::vector<NamedTensor>& tensors, const ModelArgs& args,
                                  const HfWriteOptions& options,
                                  const std::function<bool()>& should_abort = {});

}  // namespace titan
