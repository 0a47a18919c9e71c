// titan-train tokenize: the token stream the training loader reads from a text dataset, written
// as raw little-endian uint32 (a `tokens` dataset with dataset_token_dtype = "uint32").
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace titan {

// args: the arguments after "tokenize": -o OUT [--force], and the training command's --config
// and --section.key flags (model.hf_assets_path, training.dataset, training.dataset_path, ...).
// Writes every document of the training dataset in the loader's order (one process: 0, 1, ...),
// each with the BOS and EOS the loader adds, to OUT, whole or not at all (a temporary file renamed
// into place); an existing OUT is replaced only with --force, and only a regular file. Progress
// lines go to `progress` on long inputs, the summary to `out`. Returns the exit code; throws
// ConfigError for bad arguments, a dataset that is not text, or what the tokenizer refuses.
int run_tokenize(const std::vector<std::string>& args, std::ostream& out, std::ostream& progress);

}  // namespace titan
