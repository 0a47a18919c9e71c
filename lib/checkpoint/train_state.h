// TrainState: everything besides the model and optimizer tensors that the next training step
// depends on, in one plain struct with a versioned binary encoding.
//
// With the model's parameters and buffers and the optimizer's state, a TrainState is sufficient
// to continue a run bitwise (test_train_state proves it through Trainer::snapshot/restore). The LR
// schedule is a pure function of the config and `step`, so it needs nothing of its own here.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "data/loader.h"
#include "determinism/rng_state.h"

namespace titan {

struct TrainState {
  int64_t step = 0;         // optimizer steps completed (the next step is step + 1)
  int64_t tokens_seen = 0;  // over all ranks, up to and including `step`
  LoaderState loader;       // this rank's data position
  RngState rng;             // global generators (CPU, every CUDA device)
  // The instruments' own positions (validation's reader), by instrument name: opaque bytes.
  std::map<std::string, std::string> instruments;
  // The model's state besides its parameters that later steps depend on, by torchtitan's name:
  // each MoE layer's expert_bias ("layers.3.moe.expert_bias"), float32 on the CPU.
  std::map<std::string, at::Tensor> model_buffers;

  bool operator==(const TrainState& other) const;
  bool operator!=(const TrainState& other) const { return !(*this == other); }
};

// "TITNSTAT", a format version, then the fields, little-endian: version 1 without instrument
// states or model buffers (written when there are none, so such files read anywhere), version 2
// with instrument states, version 3 with model buffers too.
std::string encode_train_state(const TrainState& state);

// Inverse of encode_train_state. Throws RuntimeFailure naming `source` (a file name, for messages)
// for a wrong magic number, an unknown version, or truncated or trailing bytes.
TrainState decode_train_state(const std::string& bytes, const std::string& source);

}  // namespace titan
