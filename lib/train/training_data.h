// What a run trains on: how its text is tokenized, the token source, and this rank's step
// batches in the order its data layout fixes.
#pragma once

#include <memory>

#include "config/config.h"
#include "data/sources.h"
#include "data/step_batches.h"
#include "data/text_encoding.h"
#include "model/model_args.h"
#include "train/run_context.h"

namespace titan {

struct TrainingData {
  TextEncoding text;  // how text datasets are tokenized
  std::shared_ptr<const TokenSource> source;
  std::unique_ptr<StepBatches> batches;
};

// The training data of `context`'s config for a model of `args`, split into `plan`'s
// micro-batches on this rank. Throws ConfigError for a tokenizer, vocabulary or dataset file the
// config refuses. Writes nothing.
TrainingData make_training_data(const RunContext& context, const ModelArgs& args,
                                const BatchPlan& plan);

}  // namespace titan
