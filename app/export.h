// `titan-train export CHECKPOINT_DIR -o FILE.safetensors [--dtype float32|bfloat16] [--force]`:
// a checkpoint's model weights as a safetensors file under torchtitan's Llama names.
// `titan-train export CHECKPOINT_DIR -o FOLDER --hf [--dtype float32|bfloat16|float16] [--force]`:
// the same weights as a Hugging Face Llama checkpoint folder (checkpoint/hf_checkpoint.h), for
// the model the checkpoint's config.toml builds.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace titan {

// `args` are the words after "export". CHECKPOINT_DIR is a step-N folder, or a checkpoint folder
// (its latest complete step-N is taken). The file (or --hf folder) is written whole (a temporary
// one renamed into place) and never over an existing one unless --force; with --hf, --force
// replaces only a folder that holds nothing but such an export. Returns 0; throws ConfigError
// (exit 2) for bad usage, a missing checkpoint or an existing output, RuntimeFailure (exit 1)
// for a damaged checkpoint.
int run_export(const std::vector<std::string>& args, std::ostream& out);

std::string export_usage();

}  // namespace titan
