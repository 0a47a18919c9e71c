// A checkpoint's manifest.txt (written last; its presence makes a step-N folder complete):
//   titan-train checkpoint 1
//   step N / kind full|model_only / config_hash 0x... / [world_size W] / [data_order global]
//   [mesh replicate R shard S]
//   file <name> <size> <checksum>   (one line per other file, hash_bytes of its contents)
// Private to lib/checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"

namespace titan {

constexpr const char* kManifest = "manifest.txt";

// The manifest's step, kind, config hash, world size and mesh.
struct ManifestSummary {
  int64_t step = 0;
  bool model_only = false;
  uint64_t config_hash = 0;
  int64_t world_size = 1;          // "world_size N" in the manifest; absent before data parallelism
  bool global_data_order = false;  // "data_order global"; absent when each rank reads its own
  int64_t shards = 0;              // "mesh replicate R shard S"; absent when saved whole
  int64_t replicas = 1;
};

struct Manifest {
  ManifestSummary summary;
  std::vector<CheckpointFile> files;
};

// The manifest's text for `c` listing `files`.
std::string format_manifest(const CheckpointContents& c, const std::vector<CheckpointFile>& files);

// Parses a manifest's `text` read from `path`. Throws RuntimeFailure naming the path and line.
Manifest parse_manifest(const std::string& text, const std::string& path);

// <step_folder>/manifest.txt, parsed. Throws RuntimeFailure when it is missing or damaged.
Manifest read_manifest(const std::string& step_folder);

}  // namespace titan
