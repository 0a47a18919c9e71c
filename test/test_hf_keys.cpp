// checkpoint.initial_load_in_hf and checkpoint.last_save_in_hf: a run starts from a Hugging Face
// checkpoint and hands its final model back in that layout, as torchtitan's keys do.
#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "catch_torch.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "model/model_args.h"
#include "test_util.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

std::string hf_tiny() { return test::source_dir() + "/test/data/hf_tiny"; }

std::string checkpointed(const std::string& extra) {
  return "--checkpoint.enable --checkpoint.interval 100 --checkpoint.export_dtype float32 " + extra;
}

}  // namespace

TEST_CASE(
    "hf keys: initial_load_in_hf starts from the checkpoint, from initial_load_path or "
    "hf_assets_path alike",
    "[hf][checkpoint]") {
  if (!fs::exists(hf_tiny() + "/config.json")) TITAN_SKIP("test/data/hf_tiny is absent");
  const std::string from_path = test::temp_dir("hf_from_path");
  const std::string from_assets = test::temp_dir("hf_from_assets");
  const std::string fresh = test::temp_dir("hf_fresh");
  auto a = test::run_titan(test::tiny_run(
      from_path, 3, "--checkpoint.initial_load_in_hf --checkpoint.initial_load_path " + hf_tiny()));
  REQUIRE(a.exit_code == 0);
  CHECK_THAT(a.output, Catch::Contains("initial weights from the Hugging Face checkpoint " +
                                       hf_tiny() + " (3 file(s)"));
  CHECK_THAT(a.output, Catch::Contains("tied embeddings"));
  auto b = test::run_titan(test::tiny_run(
      from_assets, 3, "--checkpoint.initial_load_in_hf --model.hf_assets_path " + hf_tiny()));
  REQUIRE(b.exit_code == 0);
  REQUIRE(test::run_titan(test::tiny_run(fresh, 3)).exit_code == 0);
  CHECK(test::run_step_lines(from_path) == test::run_step_lines(from_assets));
  CHECK(test::run_step_lines(from_path) != test::run_step_lines(fresh));
  CHECK_FALSE(test::run_step_lines(from_path).empty());
}

TEST_CASE(
    "hf keys: last_save_in_hf writes the final model as step-N in Hugging Face's layout, "
    "the same tensors as titan-train's own final save",
    "[hf][checkpoint]") {
  if (!fs::exists(hf_tiny() + "/config.json")) TITAN_SKIP("test/data/hf_tiny is absent");
  const std::string hf = test::temp_dir("hf_last_save");
  const std::string own = test::temp_dir("own_last_save");
  const std::string start =
      "--checkpoint.initial_load_in_hf --checkpoint.initial_load_path " + hf_tiny() + " ";
  auto r =
      test::run_titan(test::tiny_run(hf, 2, checkpointed(start + "--checkpoint.last_save_in_hf")));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("(model only, Hugging Face layout"));
  REQUIRE(test::run_titan(test::tiny_run(own, 2, checkpointed(start))).exit_code == 0);
  CHECK(test::run_step_lines(hf) == test::run_step_lines(own));

  const std::string hf_step = hf + "/checkpoint/step-2";
  CHECK(is_hf_checkpoint_folder(hf_step));
  CHECK(fs::exists(hf_step + "/config.json"));
  CHECK_FALSE(fs::exists(hf_step + "/manifest.txt"));
  const auto written =
      load_hf_checkpoint(hf_step, model_args_for_flavor(Flavor::kTiny), at::kFloat);
  const auto saved = load_checkpoint(own + "/checkpoint/step-2").model;
  REQUIRE(written.size() == saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    INFO(saved[i].name);
    CHECK(written[i].name == saved[i].name);
    CHECK(same_tensor_bits(written[i].tensor, saved[i].tensor));
  }

  SECTION("the same run again finds its final save and has nothing to train") {
    auto again = test::run_titan(
        test::tiny_run(hf, 2, checkpointed(start + "--checkpoint.last_save_in_hf")));
    CHECK(again.exit_code == 0);
    CHECK_THAT(again.output, Catch::Contains("is the run's final save (Hugging Face layout): "
                                             "nothing to train"));
  }
  SECTION("more steps cannot resume from it: exit 2 naming the folder") {
    auto more = test::run_titan(
        test::tiny_run(hf, 4, checkpointed(start + "--checkpoint.last_save_in_hf")));
    CHECK(more.exit_code == 2);
    CHECK_THAT(more.output, Catch::Contains(hf_step));
    CHECK_THAT(more.output, Catch::Contains("cannot resume training"));
  }
}

TEST_CASE(
    "hf keys: an HF checkpoint that does not fit the flavor, or a load that is not "
    "model-only, is exit 2 before step 1",
    "[hf][checkpoint]") {
  if (!fs::exists(hf_tiny() + "/config.json")) TITAN_SKIP("test/data/hf_tiny is absent");
  const std::string dir = test::temp_dir("hf_refused");
  auto wrong_flavor = test::run_titan(test::tiny_run(
      dir, 2,
      "--model.flavor debugmodel --checkpoint.initial_load_in_hf --checkpoint.initial_load_path " +
          hf_tiny()));
  CHECK(wrong_flavor.exit_code == 2);
  CHECK_THAT(wrong_flavor.output, Catch::Contains("config.json"));
  CHECK_THAT(wrong_flavor.output, !Catch::Contains("step:  1"));

  auto whole_state = test::run_titan(
      test::tiny_run(dir, 2,
                     "--checkpoint.initial_load_in_hf --checkpoint.initial_load_model_only=false "
                     "--checkpoint.initial_load_path " +
                         hf_tiny()));
  CHECK(whole_state.exit_code == 2);
  CHECK_THAT(whole_state.output, Catch::Contains("checkpoint.initial_load_model_only is false"));

  auto nowhere = test::run_titan(
      test::tiny_run(dir, 2, "--checkpoint.initial_load_in_hf --model.hf_assets_path ''"));
  CHECK(nowhere.exit_code == 2);
  CHECK_THAT(nowhere.output, Catch::Contains("are both empty"));
}
