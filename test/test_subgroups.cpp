// ProcessGroup::subgroup on real Gloo groups (one thread a rank in this process): HSDP's shard
// and replica groups sum among their members only, exchange through their own keys, and follow
// the job's group's set_timeout.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "catch_torch.h"
#include "distributed/process_group.h"
#include "parallel/hsdp_mesh.h"
#include "test_ranks.h"
#include "util/error.h"

namespace titan {
namespace {

using test::on_gloo_ranks;
using test::RankOutputs;

// A 2 x 2 mesh of 4 ranks: shard groups {0, 1} and {2, 3}, replica groups {0, 2} and {1, 3}.
std::vector<int64_t> shard_ranks(int64_t rank) { return {rank / 2 * 2, rank / 2 * 2 + 1}; }
std::vector<int64_t> replica_ranks(int64_t rank) { return {rank % 2, rank % 2 + 2}; }

}  // namespace

TEST_CASE(
    "subgroups: a 2 x 2 mesh's shard and replica groups sum among their members only, number "
    "their ranks from 0, and keep working after the job's group changes its timeout",
    "[distributed]") {
  auto outputs = on_gloo_ranks(4, [&](ProcessGroup& world) -> RankOutputs {
    const int64_t r = world.rank();
    auto shard = world.subgroup(shard_ranks(r), "shard" + std::to_string(r / 2));
    auto replica = world.subgroup(replica_ranks(r), "replica" + std::to_string(r % 2));
    // Powers of ten: which ranks' values a sum holds shows in its digits.
    at::Tensor in_shard = at::full({3}, std::pow(10.0, static_cast<double>(r)), at::kDouble);
    shard->all_reduce_sum(in_shard, "the shard group's sum");
    at::Tensor in_replica = at::full({3}, std::pow(10.0, static_cast<double>(r)), at::kDouble);
    replica->all_reduce_sum(in_replica, "the replica group's sum");
    // Each group's exchanges are its own, under the same key.
    const std::string shard_root = shard->broadcast("who", std::to_string(r));
    const auto gathered = replica->gather("who", std::to_string(r));
    // The job's group rebuilds its backends, then each rank its subgroups, in joining order.
    world.set_timeout(std::chrono::seconds(30));
    at::Tensor after = at::full({1}, static_cast<double>(r), at::kDouble);
    shard->all_reduce_sum(after, "the shard group's sum after the timeout");
    std::vector<double> facts{static_cast<double>(shard->rank()),
                              static_cast<double>(shard->size()),
                              static_cast<double>(replica->rank()),
                              static_cast<double>(replica->size()),
                              std::stod(shard_root),
                              static_cast<double>(gathered.size())};
    for (const auto& g : gathered) facts.push_back(std::stod(g));
    return {in_shard, in_replica, after, at::tensor(facts, at::kDouble)};
  });
  for (int64_t r = 0; r < 4; ++r) {
    INFO("rank " << r);
    const auto& o = outputs[r];
    const double shard_sum = r < 2 ? 11 : 1100, replica_sum = r % 2 == 0 ? 101 : 1010;
    CHECK(at::equal(o[0], at::full({3}, shard_sum, at::kDouble)));
    CHECK(at::equal(o[1], at::full({3}, replica_sum, at::kDouble)));
    CHECK(o[2].item<double>() == (r < 2 ? 1 : 5));
    std::vector<double> facts{static_cast<double>(r % 2), 2, static_cast<double>(r / 2), 2,
                              static_cast<double>(r / 2 * 2)};
    // The replica group's rank 0 gathers its members' values; the others get none.
    if (r < 2) {
      facts.insert(facts.end(), {2, static_cast<double>(r), static_cast<double>(r + 2)});
    } else {
      facts.push_back(0);
    }
    CHECK(at::equal(o[3], at::tensor(facts, at::kDouble)));
  }
}

TEST_CASE(
    "subgroups: ranks that are not ascending, distinct members including this rank are refused",
    "[distributed]") {
  auto outputs = on_gloo_ranks(2, [&](ProcessGroup& world) -> RankOutputs {
    const int64_t r = world.rank();
    int64_t refused = 0;
    for (const auto& ranks :
         std::vector<std::vector<int64_t>>{{}, {1 - r}, {1, 0}, {0, 0, 1}, {0, 1, 2}, {-1, r}}) {
      try {
        world.subgroup(ranks, "bad");
      } catch (const std::invalid_argument& e) {
        refused += std::string(e.what()).find("a subgroup needs ascending") == 0;
      }
    }
    try {
      world.subgroup({0, 1}, "a/b");
    } catch (const std::invalid_argument&) {
      ++refused;
    }
    // A group of this rank alone works without the other.
    auto alone = world.subgroup({r}, "alone" + std::to_string(r));
    at::Tensor one = at::ones({1});
    alone->all_reduce_sum(one, "a sum of one");
    return {at::tensor({refused}), one};
  });
  for (const auto& o : outputs) {
    CHECK(o[0].item<int64_t>() == 7);
    CHECK(o[1].item<float>() == 1.0f);
  }
}

TEST_CASE(
    "subgroups: HSDP's mesh is torchtitan's (dp_replicate, dp_shard): shard groups of "
    "consecutive ranks, a replica group one rank from each",
    "[distributed]") {
  CHECK(shard_group_ranks(4, 3) == std::vector<int64_t>{3, 4, 5});
  CHECK(replica_group_ranks(4, 2, 3) == std::vector<int64_t>{1, 4});
  CHECK(replica_group_ranks(0, 3, 2) == std::vector<int64_t>{0, 2, 4});
  auto outputs = on_gloo_ranks(6, [&](ProcessGroup& world) -> RankOutputs {
    HsdpMesh mesh = make_hsdp_mesh(world, 2, 3);
    at::Tensor rank = at::full({1}, static_cast<double>(world.rank()), at::kDouble);
    at::Tensor in_shard = rank.clone(), in_replica = rank.clone();
    mesh.shard->all_reduce_sum(in_shard, "the shard group's sum");
    mesh.replica->all_reduce_sum(in_replica, "the replica group's sum");
    return {in_shard, in_replica};
  });
  for (int64_t r = 0; r < 6; ++r) {
    INFO("rank " << r);
    CHECK(outputs[r][0].item<double>() == (r < 3 ? 0 + 1 + 2 : 3 + 4 + 5));
    CHECK(outputs[r][1].item<double>() == 2 * (r % 3) + 3);
  }
}

TEST_CASE("subgroups: a rank gone from a shard group is named by the job's rank number",
          "[distributed]") {
  std::atomic<bool> verdict{false};
  auto outputs = on_gloo_ranks(4, [&](ProcessGroup& world) -> RankOutputs {
    HsdpMesh mesh = make_hsdp_mesh(world, 2, 2);
    if (world.rank() == 3) return {};  // leaves: its groups (and heartbeat) end with this scope
    if (world.rank() != 2) {
      // Rank 0 serves the store: the others stay until rank 2 has its verdict.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!verdict && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return {};
    }
    std::string message;
    try {
      at::Tensor t = at::ones({4});
      mesh.shard->all_reduce_sum(t, "layers.1's gradient sum");
    } catch (const RuntimeFailure& e) {
      message = e.what();
    }
    verdict = true;
    if (message.find("rank 2 of 4: layers.1's gradient sum failed: rank 3 is gone") ==
        std::string::npos)
      throw std::runtime_error("rank 2: " + message);
    return {};
  });
  CHECK(outputs.size() == 4);
}

TEST_CASE("subgroups: the single-process group's subgroup is itself alone", "[distributed]") {
  auto single = make_process_group(WorldInfo{}, CommConfig{}, GroupBackend::kSingle,
                                   c10::Device(c10::kCPU), false);
  auto sub = single->subgroup({0}, "one");
  CHECK(sub->size() == 1);
  CHECK(sub->rank() == 0);
  CHECK_THROWS_AS(single->subgroup({0, 1}, "two"), std::invalid_argument);
}

}  // namespace titan
