// The replicas' agreement checks (lib/train/rank_agreement.h) as rank 0 sees them, over a group
// whose other ranks are scripted: what a 2-rank run stops with when a rank's parameters or config
// differ. (test_hostile_runs.cpp runs the config check through real processes.)
#include <string>
#include <vector>

#include "catch_torch.h"
#include "config/loader.h"
#include "distributed/process_group.h"
#include "train/rank_agreement.h"
#include "util/error.h"

using namespace titan;

namespace {

// Rank 0 of 2: gather returns rank 0's value followed by rank 1's scripted one; broadcast
// returns rank 0's value (the verdict).
class ScriptedGroup : public ProcessGroup {
 public:
  explicit ScriptedGroup(std::string rank1_value) : rank1_(std::move(rank1_value)) {}
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 2; }
  std::string backend() const override { return "scripted"; }
  std::unique_ptr<PendingCollective> start_all_reduce_sum(at::Tensor, const std::string&) override {
    throw std::logic_error("not used");
  }
  std::unique_ptr<PendingCollective> start_all_gather(at::Tensor, at::Tensor,
                                                      const std::string&) override {
    throw std::logic_error("not used");
  }
  std::unique_ptr<PendingCollective> start_reduce_scatter_sum(at::Tensor, at::Tensor,
                                                              const std::string&) override {
    throw std::logic_error("not used");
  }
  std::unique_ptr<PendingCollective> start_all_to_all(at::Tensor, at::Tensor,
                                                      const std::string&) override {
    throw std::logic_error("not used");
  }
  bool any_rank(bool flag, const std::string&) override { return flag; }
  std::string broadcast(const std::string&, const std::string& value) override { return value; }
  std::vector<std::string> gather(const std::string&, const std::string& value) override {
    return {value, rank1_.empty() ? value : rank1_};
  }
  void set_timeout(std::chrono::seconds) override {}
  std::unique_ptr<ProcessGroup> subgroup(const std::vector<int64_t>&, const std::string&) override {
    throw std::logic_error("not used");
  }

 private:
  std::string rank1_;
};

}  // namespace

TEST_CASE(
    "rank agreement: replicas whose parameters part after a step stop with exit 3 naming "
    "the step",
    "[distributed]") {
  ScriptedGroup agree("");
  CHECK_NOTHROW(check_replicas_agree(agree, 0x1234, 7));
  ScriptedGroup parted("0x000000000000beef");
  try {
    check_replicas_agree(parted, 0x1234, 7);
    FAIL("no CheckFailure");
  } catch (const CheckFailure& e) {
    CHECK_THAT(std::string(e.what()),
               Catch::Contains("the replicas' parameters parted after step 7") &&
                   Catch::Contains("rank 0 has 0x0000000000001234, rank 1 has 0x000000000000beef"));
  }
  // Before the first step it is a set-up problem (exit 1), not a failed check.
  CHECK_THROWS_AS(check_replicas_agree(parted, 0x1234, 0), RuntimeFailure);
}

TEST_CASE(
    "rank agreement: a config that differs in a key that decides collectives or files is "
    "named, the threads and console keys are not",
    "[distributed]") {
  Config mine;
  Config theirs;
  theirs.optimizer.lr = 0.5;
  theirs.training.steps = mine.training.steps + 1;
  theirs.metrics.log_freq = mine.metrics.log_freq + 1;  // outside the hash, but decides collectives
  theirs.metrics.enable_tensorboard = true;
  theirs.job.dump_folder = "elsewhere";
  ScriptedGroup differ("0x0 0\n" + to_toml(theirs));
  try {
    check_ranks_agree(mine, differ);
    FAIL("no ConfigError");
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("rank 1: ") && Catch::Contains("optimizer.lr 0.0008 -> 0.5") &&
                         Catch::Contains("training.steps ") &&
                         Catch::Contains("metrics.log_freq") &&
                         Catch::Contains("metrics.enable_tensorboard false -> true") &&
                         Catch::Contains("job.dump_folder"));
  }
  Config local_only;
  local_only.training.cpu_threads = mine.training.cpu_threads + 1;
  local_only.metrics.disable_color_printing = !mine.metrics.disable_color_printing;
  local_only.job.print_config = !mine.job.print_config;
  local_only.model.print_after_conversion = !mine.model.print_after_conversion;
  ScriptedGroup fine("0x0 0\n" + to_toml(local_only));
  CHECK_NOTHROW(check_ranks_agree(mine, fine));
}
