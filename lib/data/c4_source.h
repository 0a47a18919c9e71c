// The c4 datasets (training.dataset = "c4", "c4_test", "c4_validation") read from a local copy in
// the c4 layout: files of JSON lines whose "text" field is a document, plain (.json) or gzipped
// (.json.gz), read in sorted name order. torchtitan reads c4 through Hugging Face's datasets
// library (allenai/c4 from the hub, tests/assets/c4_test from the working directory); titan-train
// reads no network, so c4 and c4_validation need the shards on disk (a clone of allenai/c4's en/
// folder: c4-train.*.json.gz and c4-validation.*.json.gz).
//
// Internal to lib/data. Documents are counted once at start (one decompression pass) and each
// file is read again when the loader reaches it; one file's documents are held at a time.
#pragma once

#include <memory>
#include <string>

#include "config/enums.h"
#include "data/sources.h"

namespace titan {

// torchtitan's default path of a c4 dataset, relative to the working directory:
// "tests/assets/c4_test" for c4_test, "allenai/c4" for the other two.
std::string default_c4_path(DatasetKind kind);

// The c4 dataset `kind` at `path` ("" for its default), its bytes made tokens by `encode`. In a
// folder that holds an en/ folder, that is read; among its files, those of the split (c4-train.*
// or c4-validation.*) when there are any, else every .json and .json.gz file. Throws ConfigError
// naming the dataset, the path and what to put there when it is missing, or the file:line:col
// of a line that is not one JSON object with a "text" string.
std::unique_ptr<TokenSource> make_c4_source(DatasetKind kind, const std::string& path,
                                            const std::string& path_key,
                                            std::shared_ptr<const TextEncoder> encoder);

}  // namespace titan
