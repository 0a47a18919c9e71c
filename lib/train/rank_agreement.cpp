#include "train/rank_agreement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include <string>
#include <vector>

#include "config/loader.h"
#include "config/schema.h"
#include "metrics/fingerprint.h"
#include "util/error.h"

namespace titan {
namespace {

// What rank `rank`'s config changes against rank 0's: "optimizer.lr 0.0008 -> 0.5, ...", or ""
// when they agree on every key that must agree: the hashed ones, and those that decide a rank's
// collectives (logging, TensorBoard, checkpoints, reruns, timeouts) or the files it writes.
std::string differences_from_rank0(const Config& rank0, const std::string& toml, int64_t rank) {
  Config other;
  try {
    apply_toml(other, toml, fmt::format("rank {}'s config", rank));
  } catch (const std::exception& e) {
    return fmt::format("(its config cannot be read: {})", e.what());
  }
  std::vector<std::string> keys;
  for (const auto& d : config_differences(rank0, other)) {
    if (d.must_agree_between_ranks) keys.push_back(fmt::format("{} {} -> {}", d.key, d.a, d.b));
  }
  return fmt::format("{}", fmt::join(keys, ", "));
}

}  // namespace

void check_ranks_agree(const Config& config, ProcessGroup& group) {
  if (group.size() == 1) return;
  const std::string mine =
      fmt::format("{:#018x} {}\n{}", config_hash(config), config.training.steps, to_toml(config));
  const auto all = group.gather("config_agreement", mine);
  std::vector<std::string> differing;
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const std::string keys = differences_from_rank0(config, all[r].substr(all[r].find('\n') + 1),
                                                    static_cast<int64_t>(r));
    if (!keys.empty()) differing.push_back(fmt::format("rank {}: {}", r, keys));
  }
  const std::string verdict =
      group.broadcast("config_agreement_verdict", fmt::format("{}", fmt::join(differing, "; ")));
  if (!verdict.empty()) {
    throw ConfigError("config",
                      fmt::format("the ranks were started with different configs "
                                  "(against rank 0's: {})",
                                  verdict),
                      "start every rank with the same --config file and flags");
  }
}

void check_replicas_agree(ProcessGroup& group, uint64_t checksum, int64_t step) {
  if (group.size() == 1) return;
  const auto checksums =
      group.gather(fmt::format("parameters/{}", step), fmt::format("{:#018x}", checksum));
  std::vector<std::string> differing;
  for (size_t r = 1; r < checksums.size(); ++r) {
    if (checksums[r] != checksums[0]) {
      differing.push_back(fmt::format("rank {} has {}", r, checksums[r]));
    }
  }
  const std::string verdict = group.broadcast(
      fmt::format("parameters_verdict/{}", step),
      differing.empty()
          ? ""
          : fmt::format("rank 0 has {}, {}", checksums[0], fmt::join(differing, ", ")));
  if (verdict.empty()) return;
  if (step == 0) {
    throw RuntimeFailure(
        fmt::format("the ranks start from different parameters (checksums: {})", verdict),
        "start every rank with the same config (model, debug.seed) and the same checkpoint or "
        "initial_load_path");
  }
  throw CheckFailure(
      fmt::format("the replicas' parameters parted after step {} (checksums: {})", step, verdict),
      "the gradient all-reduce or the optimizer step differs between ranks; compare their "
      "fingerprint.rank<N>.log files with titan-train compare");
}

}  // namespace titan
