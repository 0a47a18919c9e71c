// debug.batch_invariant: the same bits whatever the thread count, number of ranks or micro-batch
// split of the same global batch, through the binary on the synthetic dataset (many documents);
// and the pairwise tree it sums in.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/fingerprint_reader.h"
#include "catch_torch.h"
#include "config/config.h"
#include "parallel/pairwise_sum.h"
#include "test_ranks.h"
#include "test_util.h"

namespace titan {
namespace {

// The step lines of a fingerprint.log (the header names threads and world size).
std::string step_lines_from(const std::string& path, int64_t from = 1) {
  std::string out;
  std::istringstream in(test::read_text(path));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("step ", 0) == 0 && std::stoll(line.substr(5)) >= from) out += line + "\n";
  }
  return out;
}

// The tiny model on 4 sequences of 32 tokens a step, at `threads` threads, with `extra`.
std::string args(const std::string& dir, int steps, int local_batch, int threads,
                 const std::string& extra = "") {
  return test::tiny_run(dir, steps,
                        fmt::format("--training.seq_len 32 --training.local_batch_size {} "
                                    "--training.global_batch_size 4 --training.cpu_threads {} {}",
                                    local_batch, threads, extra));
}

void require_ranks_ok(const std::vector<test::RankResult>& ranks) {
  for (const auto& r : ranks) {
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  }
}

// The sum of `values` in the level-by-level pairwise tree: (0,1), (2,3), ..., an odd last value
// carried up to the next level.
float level_pairwise(std::vector<float> values) {
  while (values.size() > 1) {
    std::vector<float> next;
    for (size_t i = 0; i + 1 < values.size(); i += 2) next.push_back(values[i] + values[i + 1]);
    if (values.size() % 2) next.push_back(values.back());
    values = next;
  }
  return values.front();
}

}  // namespace

TEST_CASE(
    "batch invariance: the pairwise sum is the level-by-level tree, and an aligned block "
    "pushed as one node changes no bit",
    "[batch_invariant]") {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> draw(-1.0f, 1.0f);
  for (int n = 1; n <= 19; ++n) {
    std::vector<float> values(static_cast<size_t>(n));
    for (auto& v : values) v = draw(gen) * std::pow(2.0f, static_cast<float>(gen() % 20));
    PairwiseSum leaves;
    for (float v : values) leaves.push({at::full({1}, v)});
    const float tree = leaves.collapse()[0].item<float>();
    INFO("n = " << n);
    const float expected = level_pairwise(values);
    CHECK(std::memcmp(&tree, &expected, sizeof(float)) == 0);
    // Blocks of 2 (a rank's part when each holds 2 sequences), as nodes of 2 leaves.
    if (n % 2 == 0) {
      PairwiseSum blocks;
      for (int i = 0; i < n; i += 2)
        blocks.push({at::full({1}, values[i]) + at::full({1}, values[i + 1])}, 2);
      const float by_blocks = blocks.collapse()[0].item<float>();
      CHECK(std::memcmp(&by_blocks, &expected, sizeof(float)) == 0);
    }
  }
  // Not a left fold: the tree's order shows in the bits of these values.
  std::vector<float> values = {1.0f, 1e8f, -1e8f, 1.0f};
  float fold = 0;
  for (float v : values) fold += v;
  CHECK(level_pairwise(values) != fold);
}

TEST_CASE(
    "batch invariance: 1x4 at 2 and 1 threads, 2x2, 4x1 and 1x2x2 micro-batches with "
    "full AC and the bitwise checker write the same step lines",
    "[batch_invariant][distributed]") {
  const auto dir = test::temp_dir("batch_invariant");
  const std::string on = "--debug.batch_invariant true --debug.numerics_trace ops";
  auto a = test::run_titan(args(dir + "/a", 3, 4, 2, on));
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  auto b = test::run_titan(args(dir + "/b", 3, 4, 1, on));
  REQUIRE(b.exit_code == 0);
  auto e = test::run_titan(args(dir + "/e", 3, 2, 2,
                                on + " --activation_checkpoint.mode full "
                                     "--activation_checkpoint.determinism_check bitwise"));
  INFO(e.output);
  REQUIRE(e.exit_code == 0);
  require_ranks_ok(test::run_ranks(dir, test::same_args(2, args(dir + "/c", 3, 2, 1, on))));
  require_ranks_ok(test::run_ranks(dir, test::same_args(4, args(dir + "/d", 3, 1, 1, on))));

  const std::string expected = step_lines_from(dir + "/a/fingerprint.log");
  REQUIRE(std::count(expected.begin(), expected.end(), '\n') == 3);
  for (const char* run : {"b", "c", "d", "e"}) {
    INFO("run " << run);
    CHECK(step_lines_from(dir + "/" + run + "/fingerprint.log") == expected);
  }
  CHECK(step_lines_from(dir + "/d/fingerprint.rank3.log") == expected);
  // Threads and micro-batches: every numerics.log line too.
  CHECK(test::read_text(dir + "/a/numerics.log") == test::read_text(dir + "/b/numerics.log"));
  CHECK(test::read_text(dir + "/a/numerics.log") == test::read_text(dir + "/e/numerics.log"));

  auto compared = test::run_titan("compare " + dir + "/a " + dir + "/d");
  INFO(compared.output);
  CHECK(compared.exit_code == 0);
  CHECK_THAT(
      compared.output,
      Catch::Contains("result: bitwise identical") &&
          Catch::Contains("world_size: A 1 | B 4  (both runs batch-invariant: not a cause") &&
          Catch::Contains("cpu_threads: A 2 | B 1  (both runs batch-invariant: not a cause"));

  // Without batch invariance the same splits part: the test above can fail.
  const std::string off = "--debug.batch_invariant false";
  REQUIRE(test::run_titan(args(dir + "/a_off", 3, 4, 2, off)).exit_code == 0);
  require_ranks_ok(test::run_ranks(dir, test::same_args(2, args(dir + "/c_off", 3, 2, 1, off))));
  CHECK(step_lines_from(dir + "/a_off/fingerprint.log") !=
        step_lines_from(dir + "/c_off/fingerprint.log"));
  auto plain = test::run_titan("compare " + dir + "/a_off " + dir + "/c_off");
  CHECK_THAT(plain.output, !Catch::Contains("batch-invariant"));
}

TEST_CASE(
    "batch invariance: 2 ranks save at step 3, 1 rank resumes to step 6, as 6 straight "
    "steps on 1 rank",
    "[batch_invariant][distributed]") {
  const auto dir = test::temp_dir("batch_invariant_resume");
  const std::string saving =
      "--checkpoint.enable true --checkpoint.interval 3 --checkpoint.last_save_model_only false ";
  const std::string on = saving + "--debug.batch_invariant true";
  auto straight = test::run_titan(args(dir + "/straight", 6, 4, 1, on));
  INFO(straight.output);
  REQUIRE(straight.exit_code == 0);
  require_ranks_ok(test::run_ranks(dir, test::same_args(2, args(dir + "/moved", 6, 2, 1, on))));
  CHECK_THAT(test::read_text(dir + "/moved/checkpoint/step-3/manifest.txt"),
             Catch::Contains("world_size 2\ndata_order global\n"));
  std::filesystem::remove_all(dir + "/moved/checkpoint/step-6");  // as if stopped after step 3
  auto resumed = test::run_titan(args(dir + "/moved", 6, 4, 1, on));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resumed from " + dir + "/moved/checkpoint/step-3"));
  const std::string expected = step_lines_from(dir + "/straight/fingerprint.log");
  CHECK(std::count(expected.begin(), expected.end(), '\n') == 6);
  CHECK(step_lines_from(dir + "/moved/fingerprint.log") == expected);

  // Without batch invariance each rank's data position is its own: still refused.
  require_ranks_ok(test::run_ranks(dir, test::same_args(2, args(dir + "/plain", 6, 2, 1, saving))));
  std::filesystem::remove_all(dir + "/plain/checkpoint/step-6");
  auto refused = test::run_titan(args(dir + "/plain", 6, 4, 1, saving));
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("saved by 2 ranks, but this run has 1"));
  // A checkpoint of a run without batch invariance taken on with it: refused, named.
  auto mixed = test::run_titan(args(dir + "/plain", 6, 2, 1, on));
  CHECK(mixed.exit_code == 2);
  CHECK_THAT(mixed.output, Catch::Contains("saved without debug.batch_invariant"));
}

TEST_CASE("batch invariance: over 10 steps the losses stay within 1e-5 of the batched step's",
          "[batch_invariant]") {
  const auto dir = test::temp_dir("batch_invariant_losses");
  auto plain = test::run_titan(args(dir + "/plain", 10, 4, 2));
  auto invariant =
      test::run_titan(args(dir + "/invariant", 10, 4, 2, "--debug.batch_invariant true"));
  REQUIRE(plain.exit_code == 0);
  REQUIRE(invariant.exit_code == 0);
  const auto a = read_fingerprint_log(dir + "/plain/fingerprint.log").steps;
  const auto b = read_fingerprint_log(dir + "/invariant/fingerprint.log").steps;
  REQUIRE(a.size() == 10);
  REQUIRE(b.size() == 10);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("step " << i + 1 << ": " << a[i].loss << " vs " << b[i].loss);
    CHECK(std::abs(a[i].loss - b[i].loss) <= 1e-5 * std::abs(a[i].loss));
  }
}

TEST_CASE("batch invariance: what cannot be made invariant is refused at start, naming the keys",
          "[batch_invariant]") {
  const auto dir = test::temp_dir("batch_invariant_refused");
  struct Case {
    std::string env, extra, message;
  };
  const std::vector<Case> cases = {
      {"WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1",
       "--training.local_batch_size 3 --training.global_batch_size 6",
       "debug.batch_invariant with training.global_batch_size: each of the 2 ranks holds 3 "
       "sequences"},
      {"", "--model.dropout 0.1", "debug.batch_invariant with model.dropout"},
  };
  for (const auto& c : cases) {
    auto r = test::run_titan_env(
        c.env, test::tiny_run(dir + "/run", 2, "--debug.batch_invariant true " + c.extra));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.message));
    CHECK_FALSE(std::filesystem::exists(dir + "/run"));
  }
  // CUDA (no GPU here: the check itself, as build_run_context calls it).
  Config config;
  config.debug.batch_invariant = true;
  CHECK_NOTHROW(check_batch_invariant(config, 1, false));
  CHECK_THROWS_WITH(check_batch_invariant(config, 1, true),
                    Catch::Contains("batch-invariant training runs on CPU only for now"));
  config.debug.batch_invariant = false;
  CHECK_NOTHROW(check_batch_invariant(config, 1, true));
}

}  // namespace titan
