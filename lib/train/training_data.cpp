#include "train/training_data.h"

#include "distributed/process_group.h"

namespace titan {

TrainingData make_training_data(const RunContext& context, const ModelArgs& args,
                                const BatchPlan& plan) {
  const Config& config = context.config;
  const TrainingConfig& t = config.training;
  TrainingData data;
  data.text = text_encoding_for(config, args.vocab_size);
  data.source = make_token_source(training_dataset(t), context.determinism.seed, t.seq_len + 1,
                                  args.vocab_size, data.text.encoder);
  BatchLayout layout;
  layout.local_batch_size = t.local_batch_size;
  layout.seq_len = t.seq_len;
  layout.micro_batches = plan.micro_batches;
  layout.rank = context.process_group->rank();
  layout.world = context.process_group->size();
  layout.global_order = config.debug.batch_invariant;
  data.batches = std::make_unique<StepBatches>(data.source, layout);
  return data;
}

}  // namespace titan
