// FSDP's collectives (ProcessGroup::start_all_gather, start_reduce_scatter_sum) on real Gloo
// groups of several ranks, one thread a rank in this process, and on the single-process group.
#include <ATen/CPUGeneratorImpl.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ac/recompute.h"
#include "catch_torch.h"
#include "distributed/process_group.h"
#include "distributed/shard_layout.h"
#include "model/param_storage.h"
#include "parallel/gradient_reducer.h"
#include "parallel/sharded_sums.h"
#include "parallel/sharded_unit.h"
#include "test_ranks.h"
#include "test_util.h"
#include "util/error.h"

namespace titan {
namespace {

using test::on_gloo_ranks;
using test::RankOutputs;

// Rank r's (world * 3, 5) float tensor: values whose float sums depend on the order they are
// added in, so that only the all-reduce's own order reproduces its bits.
// (A generator of its own: the ranks' threads would race on the global one.)
at::Tensor rank_values(int64_t rank, int64_t world) {
  auto generator = at::detail::createCPUGenerator(static_cast<uint64_t>(100 + rank));
  return at::randn({world * 3, 5}, generator) * std::pow(10.0, static_cast<double>(rank % 3) * 3);
}

// A unit's parameters of awkward shapes: rows that do not divide by 3 ranks, a vector, a 3-D
// tensor, and one row (two of three ranks hold padding only). Values from `seed`.
std::vector<at::Tensor> unit_tensors(uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  std::vector<at::Tensor> out;
  for (const auto& sizes : std::vector<std::vector<int64_t>>{{7, 3}, {4}, {2, 2, 2}, {1, 5}})
    out.push_back(at::randn(sizes, generator) * static_cast<double>(seed % 7 + 1));
  return out;
}

}  // namespace

TEST_CASE("collectives: a Gloo all-gather puts every rank's shard at its rank's rows, everywhere",
          "[distributed]") {
  const int64_t world = 3;
  auto shard_of = [](int64_t rank) {  // (2, 4), different on each rank
    return at::full({2, 4}, static_cast<double>(rank + 1)) + at::arange(8, at::kFloat).view({2, 4});
  };
  auto outputs = on_gloo_ranks(world, [&](ProcessGroup& group) -> RankOutputs {
    at::Tensor full = at::zeros({2 * world, 4});
    group.start_all_gather(full, shard_of(group.rank()), "the test's all-gather")->wait();
    return {full};
  });
  std::vector<at::Tensor> shards;
  for (int64_t r = 0; r < world; ++r) shards.push_back(shard_of(r));
  const at::Tensor expected = at::cat(shards);
  for (int64_t r = 0; r < world; ++r) {
    INFO("rank " << r);
    CHECK(at::equal(outputs[r][0], expected));
  }
}

TEST_CASE(
    "collectives: a Gloo reduce-scatter leaves each rank its rows of the sum over the ranks, "
    "added in ring order from the next rank, bit for bit",
    "[distributed]") {
  for (int64_t world : {2, 3, 4}) {
    INFO("world " << world);
    auto outputs = on_gloo_ranks(world, [&](ProcessGroup& group) -> RankOutputs {
      at::Tensor full = rank_values(group.rank(), world);
      at::Tensor shard = at::full({3, 5}, -1.0f);
      group.start_reduce_scatter_sum(shard, full, "the test's reduce-scatter")->wait();
      // A second one right after: the ring's tags keep the two apart.
      at::Tensor again = at::full({3, 5}, -1.0f);
      group.start_reduce_scatter_sum(again, rank_values(group.rank(), world), "again")->wait();
      return {shard, again};
    });
    at::Tensor sum = at::zeros({world * 3, 5}, at::kDouble);
    for (int64_t r = 0; r < world; ++r) sum += rank_values(r, world).to(at::kDouble);
    for (int64_t r = 0; r < world; ++r) {
      INFO("rank " << r);
      auto rows_of = [&](int64_t from) { return rank_values(from, world).narrow(0, r * 3, 3); };
      at::Tensor ring = rows_of((r + 1) % world);
      for (int64_t j = 2; j <= world; ++j) ring = rows_of((r + j) % world) + ring;
      CHECK(at::equal(outputs[r][0], ring));
      CHECK(at::equal(outputs[r][1], ring));
      // And they are the sums (to float rounding), not some other rows.
      CHECK(at::allclose(outputs[r][0].to(at::kDouble), sum.narrow(0, r * 3, 3), 1e-5, 1e-3));
    }
  }
}

TEST_CASE(
    "collectives: a Gloo all-to-all gives each rank every rank's block for it, bit for bit, "
    "twice in a row, and refuses tensors of two shapes before any rank waits",
    "[distributed]") {
  for (int64_t world : {2, 3, 4}) {
    INFO("world " << world);
    auto outputs = on_gloo_ranks(world, [&](ProcessGroup& group) -> RankOutputs {
      at::Tensor received = at::full({world * 3, 5}, -1.0f);
      group.start_all_to_all(received, rank_values(group.rank(), world), "the test's all-to-all")
          ->wait();
      at::Tensor again = at::full({world * 3, 5}, -1.0f);
      group.start_all_to_all(again, rank_values(group.rank(), world), "again")->wait();
      std::string refused;
      try {
        group.start_all_to_all(at::zeros({world * 3, 5}), at::zeros({world * 3, 4}), "x");
      } catch (const std::invalid_argument& e) {
        refused = e.what();
      }
      at::Tensor one = at::ones({1});
      group.all_reduce_sum(one, "the test's all-reduce");  // no rank was left waiting
      const bool named = refused.find("all-to-all: needs received and sent") != std::string::npos;
      return {received, again, one, at::scalar_tensor(named)};
    });
    for (int64_t r = 0; r < world; ++r) {
      INFO("rank " << r);
      for (int64_t from = 0; from < world; ++from) {
        const at::Tensor sent = rank_values(from, world).narrow(0, r * 3, 3);
        CHECK(at::equal(outputs[r][0].narrow(0, from * 3, 3), sent));
        CHECK(at::equal(outputs[r][1].narrow(0, from * 3, 3), sent));
      }
      CHECK(outputs[r][2].item<float>() == static_cast<float>(world));
      CHECK(outputs[r][3].item<bool>());
    }
  }
}

TEST_CASE(
    "collectives: mismatched shard shapes are refused naming the collective, before any "
    "rank waits",
    "[distributed]") {
  auto outputs = on_gloo_ranks(2, [&](ProcessGroup& group) -> RankOutputs {
    std::string gather_error, scatter_error;
    try {
      group.start_all_gather(at::zeros({5, 2}), at::zeros({2, 2}), "x");
    } catch (const std::invalid_argument& e) {
      gather_error = e.what();
    }
    try {
      group.start_reduce_scatter_sum(at::zeros({2, 3}), at::zeros({4, 2}), "x");
    } catch (const std::invalid_argument& e) {
      scatter_error = e.what();
    }
    // The group still works after the refusals (no rank was left waiting).
    at::Tensor one = at::ones({1});
    group.all_reduce_sum(one, "the test's all-reduce");
    return {at::tensor(
                {static_cast<int64_t>(gather_error.find("all-gather: needs") == 0),
                 static_cast<int64_t>(scatter_error.find("reduce-scatter: needs") == 0),
                 static_cast<int64_t>(gather_error.find("got full [5, 2]") != std::string::npos)}),
            one};
  });
  for (const auto& o : outputs) {
    CHECK(at::equal(o[0], at::tensor({int64_t{1}, int64_t{1}, int64_t{1}})));
    CHECK(o[1].item<float>() == 2.0f);
  }
}

TEST_CASE("collectives: the single-process group's all-gather and reduce-scatter are copies",
          "[distributed]") {
  WorldInfo w;
  auto group =
      make_process_group(w, CommConfig{}, GroupBackend::kSingle, c10::Device(c10::kCPU), false);
  const at::Tensor shard = at::randn({3, 2});
  at::Tensor full = at::zeros({3, 2});
  group->start_all_gather(full, shard, "x")->wait();
  CHECK(at::equal(full, shard));
  at::Tensor out = at::zeros({3, 2});
  group->start_reduce_scatter_sum(out, shard.clone(), "x")->wait();
  CHECK(at::equal(out, shard));
  CHECK_THROWS_AS(group->start_all_gather(at::zeros({4, 2}), shard, "x"), std::invalid_argument);
}

TEST_CASE(
    "collectives: a unit's layout splits each parameter along dim 0 as FSDP2 does, the last "
    "ranks padded, and unpacking the rank-major segments gives the parameters back",
    "[distributed]") {
  const auto full = unit_tensors(3);
  UnitLayout three(full, 3);
  // ceil(rows / 3) rows a rank: 3 x 3, 2, 1 x 4, 1 x 5 elements.
  CHECK(three.segment_numel() == 9 + 2 + 4 + 5);
  CHECK(three.params()[0].real_rows(2) == 1);
  CHECK(three.params()[3].real_rows(1) == 0);
  const at::Tensor last = three.segment_of(full, 2);
  CHECK(at::equal(three.shard_view(last, 0)[0], full[0][6]));
  CHECK(at::equal(three.shard_view(last, 0).narrow(0, 1, 2), at::zeros({2, 3})));  // padding
  CHECK(at::equal(three.shard_view(last, 3), at::zeros({1, 5})));
  for (int64_t ranks = 1; ranks <= 9; ++ranks) {
    INFO(ranks << " ranks");
    UnitLayout layout(full, ranks);
    const auto back = layout.unpack_gathered(layout.pack_for_reduce_scatter(full));
    REQUIRE(back.size() == full.size());
    for (size_t i = 0; i < full.size(); ++i) CHECK(at::equal(back[i], full[i]));
  }
  CHECK_THROWS_AS(UnitLayout({at::scalar_tensor(1.0)}, 2), std::invalid_argument);  // 0-dim
  CHECK_THROWS_AS(three.unpack_gathered(at::zeros({5})), std::invalid_argument);
}

TEST_CASE(
    "collectives: a unit goes through Gloo as FSDP moves it: its shards all-gathered into the "
    "parameters, its gradients reduce-scattered into each rank's shard of their sums",
    "[distributed]") {
  const int64_t world = 3;
  auto outputs = on_gloo_ranks(world, [&](ProcessGroup& group) -> RankOutputs {
    const auto params = unit_tensors(11);  // the same on every rank
    UnitLayout layout(params, group.size());
    at::Tensor gathered = at::zeros({group.size() * layout.segment_numel()});
    group.start_all_gather(gathered, layout.segment_of(params, group.rank()), "unit 0's gather")
        ->wait();
    RankOutputs out = layout.unpack_gathered(gathered);
    at::Tensor shard = at::zeros({layout.segment_numel()});
    group
        .start_reduce_scatter_sum(shard,
                                  layout.pack_for_reduce_scatter(unit_tensors(20 + group.rank())),
                                  "unit 0's reduce-scatter")
        ->wait();
    out.push_back(shard);
    return out;
  });
  const auto params = unit_tensors(11);
  std::vector<at::Tensor> sums;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor sum = at::zeros(params[i].sizes(), at::kDouble);
    for (int64_t r = 0; r < world; ++r) sum += unit_tensors(20 + r)[i].to(at::kDouble);
    sums.push_back(sum);
  }
  UnitLayout layout(params, world);
  for (int64_t r = 0; r < world; ++r) {
    INFO("rank " << r);
    for (size_t i = 0; i < params.size(); ++i) CHECK(at::equal(outputs[r][i], params[i]));
    const at::Tensor expected = layout.segment_of(sums, r);
    CHECK(at::allclose(outputs[r].back().to(at::kDouble), expected, 1e-6, 1e-5));
  }
}

TEST_CASE(
    "collectives: with a bfloat16 reduce dtype a unit's gradients are reduce-scattered in "
    "bfloat16: each rank's shard gradient is the bfloat16 sum, not the float32 one",
    "[distributed]") {
  // Gradients with mantissa bits below bfloat16's, different on each rank.
  auto input = [](int64_t rank) {
    return at::linspace(1.0 + 0.001 * rank, 2.0 + 0.003 * rank, 12).reshape({4, 3});
  };
  auto outputs = on_gloo_ranks(2, [&](ProcessGroup& group) -> RankOutputs {
    at::Tensor w = at::ones({4, 3}).requires_grad_(true);
    ShardedUnit unit(group, {w}, "unit");
    unit.set_reduce_dtype(at::kBFloat16);
    unit.gather();
    unit.after_forward(w * input(group.rank())).sum().backward();  // w's gradient: the input
    return {unit.shard().grad().clone()};
  });
  const at::Tensor bf16_sum =
      (input(0).to(at::kBFloat16) + input(1).to(at::kBFloat16)).to(at::kFloat);
  const at::Tensor f32_sum = input(0) + input(1);
  REQUIRE_FALSE(at::equal(bf16_sum, f32_sum));
  for (int64_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const at::Tensor rows = bf16_sum.narrow(0, 2 * r, 2).reshape({-1});
    CHECK(at::equal(outputs[r][0], rows));
  }
}

TEST_CASE(
    "collectives: with a bfloat16 param dtype a unit's parameters are all-gathered as bfloat16 "
    "(over Gloo as float16's bits): the module computes with each value rounded to bfloat16",
    "[distributed]") {
  const auto params = unit_tensors(5);
  auto outputs = on_gloo_ranks(3, [&](ProcessGroup& group) -> RankOutputs {
    std::vector<at::Tensor> mine;
    for (const auto& p : params) mine.push_back(p.clone().requires_grad_(true));
    ShardedUnit unit(group, mine, "unit");
    unit.set_param_dtype(at::kBFloat16);
    unit.gather();
    RankOutputs out;
    for (const auto& p : unit.params()) out.push_back(p.detach().clone());
    unit.release();
    unit.set_param_dtype(at::kFloat);
    unit.gather();
    for (const auto& p : unit.params()) out.push_back(p.detach().clone());
    return out;
  });
  for (int64_t r = 0; r < 3; ++r) {
    INFO("rank " << r);
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor rounded = params[i].to(at::kBFloat16).to(at::kFloat);
      CHECK(at::equal(outputs[r][i], rounded));
      CHECK(at::equal(outputs[r][params.size() + i], params[i]));  // float32: exact
    }
  }
}

TEST_CASE(
    "collectives: the rank-ordered reduce-scatter (batch_invariant) leaves each rank bit for bit "
    "its rows of the rank-ordered all-reduce's sums",
    "[distributed][batch_invariant]") {
  for (int64_t world : {3, 4}) {
    INFO("world " << world);
    auto outputs = on_gloo_ranks(world, [&](ProcessGroup& group) -> RankOutputs {
      const auto contribution = unit_tensors(30 + group.rank());
      // Replication's sums: every gradient all-reduced in rank order.
      std::vector<at::Tensor> params;
      for (const auto& t : unit_tensors(11)) {
        params.push_back(t.clone().requires_grad_());
        params.back().mutable_grad() = contribution[params.size() - 1].clone();
      }
      GradientReducer reducer(group, params, kGradientBucketBytes, /*rank_ordered=*/true);
      at::Tensor loss = at::scalar_tensor(1.0);
      reducer.reduce(loss, 1);
      RankOutputs out;
      for (const auto& p : params) out.push_back(p.grad());
      // FSDP's: the rank's shard of them, from the packed contribution.
      UnitLayout layout(params, group.size());
      at::Tensor shard = at::zeros({layout.segment_numel()});
      reduce_scatter_in_rank_order(group, shard, layout.pack_for_reduce_scatter(contribution),
                                   "unit 0's reduce-scatter");
      out.push_back(shard);
      return out;
    });
    UnitLayout layout(unit_tensors(11), world);
    for (int64_t r = 0; r < world; ++r) {
      INFO("rank " << r);
      const std::vector<at::Tensor> replicated(outputs[r].begin(), outputs[r].end() - 1);
      CHECK(at::equal(outputs[r].back(), layout.segment_of(replicated, r)));
    }
  }
}

TEST_CASE(
    "collectives: a sharded unit trains as its replicated copy, with and without activation "
    "checkpointing, its parameters held only for its forward and backward and its gradients "
    "reduce-scattered into each rank's shard",
    "[distributed][ac]") {
  for (bool with_ac : {false, true}) {
    INFO("activation checkpointing " << with_ac);
    auto outputs = on_gloo_ranks(2, [&](ProcessGroup& group) -> RankOutputs {
      auto generator = at::detail::createCPUGenerator(3);
      // A block whose first weight's 5 rows do not divide by 2 ranks.
      const std::vector<at::Tensor> values = {
          at::randn({5, 4}, generator), at::randn({4, 3}, generator), at::randn({3}, generator)};
      std::vector<at::Tensor> replicated, sharded;
      for (const auto& v : values) {
        replicated.push_back(v.clone().requires_grad_());
        sharded.push_back(v.clone().requires_grad_());
      }
      auto block_of = [](const std::vector<at::Tensor>& p) -> BlockFunction {
        return [p](const at::Tensor& x) {  // x: (6, 5)
          return at::mm(at::tanh(at::mm(x, p[0])), p[1]) + p[2];
        };
      };
      ac::RecomputeOptions options;
      options.block_name = "layers.0";
      // Gather and release stay outside the checkpointed function: the recomputation runs
      // inside the backward, after the hook on the output has gathered the parameters.
      auto forward = [&](const BlockFunction& block, const at::Tensor& x) {
        return with_ac ? ac::run_recomputed(block, x, options) : block(x);
      };
      ShardedUnit unit(group, sharded, "layers.0");
      std::vector<int64_t> facts;  // each 1 when it holds
      auto holds = [&](bool fact) { facts.push_back(fact ? 1 : 0); };
      holds(storage_released(sharded[0]));
      for (int step = 0; step < 3; ++step) {
        auto data = at::detail::createCPUGenerator(50 + 10 * step + group.rank());
        const at::Tensor x_values = at::randn({6, 5}, data);
        forward(block_of(replicated), x_values.clone().requires_grad_()).sum().backward();
        for (auto& p : replicated) group.all_reduce_sum(p.mutable_grad(), "the replica's sums");
        unit.gather();
        at::Tensor out =
            unit.after_forward(forward(block_of(sharded), x_values.clone().requires_grad_()));
        holds(storage_released(sharded[0]) && storage_released(sharded[2]));
        out.sum().backward();
        holds(storage_released(sharded[1]) && !sharded[1].grad().defined());
        std::vector<at::Tensor> sums;
        for (const auto& p : replicated) sums.push_back(p.grad());
        // Two ranks: each sum is one addition, the same in any order, so bit for bit.
        holds(at::equal(unit.shard().grad(), unit.layout().segment_of(sums, group.rank())));
        at::NoGradGuard no_grad;
        for (auto& p : replicated) {
          p.sub_(p.grad() * 0.1);
          p.mutable_grad() = at::Tensor();
        }
        unit.shard().sub_(unit.shard().grad() * 0.1);
        unit.shard().mutable_grad() = at::Tensor();
      }
      unit.gather();
      for (size_t i = 0; i < values.size(); ++i) holds(at::equal(sharded[i], replicated[i]));
      return {at::tensor(facts)};
    });
    for (const auto& o : outputs) CHECK(at::equal(o[0], at::ones_like(o[0])));
  }
}

TEST_CASE("collectives: a rank gone before an all-gather is named by the others", "[distributed]") {
  // The two that stay keep their groups until both have their verdict: rank 0 serves the store,
  // and its leaving first would be named instead.
  std::atomic<int> verdicts{0};
  auto outputs = on_gloo_ranks(3, [&](ProcessGroup& group) -> RankOutputs {
    // Every rank's group built before rank 2 leaves: leaving while the others still connect
    // fails their group's build instead (seen on libtorch 2.6's Gloo).
    group.any_rank(false, "the test's start");
    if (group.rank() == 2) return {};  // leaves: its group (and heartbeat) ends with this scope
    std::string message;
    try {
      at::Tensor full = at::zeros({6, 2});
      group.start_all_gather(full, at::ones({2, 2}), "unit 4's all-gather of step 9")->wait();
    } catch (const RuntimeFailure& e) {
      message = e.what();
    }
    const bool named = message.find("unit 4's all-gather of step 9 failed") != std::string::npos &&
                       message.find("rank 2 is gone") != std::string::npos;
    ++verdicts;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (verdicts < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!named) throw std::runtime_error("rank " + std::to_string(group.rank()) + ": " + message);
    return {};
  });
  CHECK(outputs.size() == 3);
}

TEST_CASE("collectives: a rank gone before it wrote its part of a gather is named within seconds",
          "[distributed]") {
  // Rank 0 collects each rank's value from the store: before, it waited out the whole timeout
  // for a rank that had died (a kill -9 between two steps' parameter checks).
  std::atomic<int> verdicts{0};
  std::atomic<double> seconds{-1};
  auto outputs = on_gloo_ranks(3, [&](ProcessGroup& group) -> RankOutputs {
    group.any_rank(false, "the test's start");
    if (group.rank() == 2) return {};  // leaves: its heartbeat stops with its group
    std::string message;
    const auto start = std::chrono::steady_clock::now();
    try {
      group.gather("parameters/7", "0x1");
    } catch (const RuntimeFailure& e) {
      message = e.what();
    }
    if (group.rank() == 0) {
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    ++verdicts;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (verdicts < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (group.rank() == 0 &&
        message.find("the exchange of parameters/7 failed: rank 2 is gone") == std::string::npos) {
      throw std::runtime_error("rank 0: " + message);
    }
    return {};
  });
  CHECK(outputs.size() == 3);
  // The group's timeout is 60 s; the heartbeat watch names the rank in about 8.
  CHECK(seconds < 30);
}

}  // namespace titan
