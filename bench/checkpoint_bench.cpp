// Save and load time of a model-only checkpoint of a freshly initialized model (no optimizer, so
// the 1B flavor fits a 24 GB machine): the figures scripts/bench_checkpoint.sh sets beside dd.
//
//   titan-bench-checkpoint FLAVOR FOLDER ROUNDS
// Each round prints "save S seconds B bytes"; "dd S seconds": dd copying the saved weights file
// (from the page cache) with fsync into the same folder, the disk's sequential write of the same
// bytes measured side by side with the save (dd from /dev/zero is no baseline: virtual disks
// store zero blocks for free); "read S seconds" (verify and parse the files) and "load S
// seconds" (read, then copy into the model). FOLDER is emptied between rounds.
#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/model_checkpoint.h"
#include "model/model.h"
#include "models/registry.h"

using namespace titan;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// dd copying `source` to `path` with fsync; returns seconds, or -1 on failure.
double time_dd(const std::string& source, const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  const int rc = std::system(
      fmt::format("dd if={} of={} bs=64M conv=fsync status=none", source, path).c_str());
  const double seconds = seconds_since(start);
  std::filesystem::remove(path);
  return rc == 0 ? seconds : -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: titan-bench-checkpoint FLAVOR FOLDER ROUNDS\n";
    return 2;
  }
  ModelArgs args;
  try {
    args = flavor_args("llama3", argv[1]);
  } catch (const std::invalid_argument& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  const std::string folder = argv[2];
  const int rounds = std::stoi(argv[3]);
  torch::NoGradGuard no_grad;
  Model model = build_model(args);
  model->init_weights();
  CheckpointContents contents;
  contents.model_only = true;
  contents.model = named_parameters(*model);
  contents.config_toml = "";
  for (int r = 0; r < rounds; ++r) {
    std::filesystem::remove_all(folder);
    const auto record = save_checkpoint(folder, contents);
    std::cout << fmt::format("save {:.3f} seconds {} bytes\n", record.seconds, record.bytes);
    std::cout << fmt::format("dd {:.3f} seconds\n",
                             time_dd(record.path + "/model.safetensors", folder + ".dd"))
              << std::flush;
    auto start = std::chrono::steady_clock::now();
    {
      const auto loaded = load_checkpoint(record.path);
      std::cout << fmt::format("read {:.3f} seconds\n", seconds_since(start));
      load_parameters(*model, loaded.model);
    }
    std::cout << fmt::format("load {:.3f} seconds\n", seconds_since(start)) << std::flush;
  }
  std::filesystem::remove_all(folder);
  return 0;
}
