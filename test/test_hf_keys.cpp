// checkpoint.initial_load_in_hf and checkpoint.last_save_in_hf: a run starts from a Hugging Face
// checkpoint and hands its final model back in that layout, as torchtitan's keys do.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "catch_torch.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/hf_checkpoint.h"
#include "checkpoint/hf_llama.h"
#include "checkpoint/safetensors_reader.h"
#include "checkpoint/sharded_checkpoint.h"
#include "model/model_args.h"
#include "models/registry.h"
#include "test_ranks.h"
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
  const auto written = load_hf_checkpoint(hf_step, flavor_args("llama3", "tiny"), at::kFloat);
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

TEST_CASE(
    "hf keys: an FSDP rank reads only its rows of a Hugging Face checkpoint (wq and wk: the "
    "whole heads that hold them), bit for bit the rows of a whole load",
    "[hf][checkpoint]") {
  if (!fs::exists(hf_tiny() + "/config.json")) TITAN_SKIP("test/data/hf_tiny is absent");
  const ModelArgs args = flavor_args("llama3", "tiny");
  HfLoadReport whole_report;
  const auto whole = load_hf_checkpoint(hf_tiny(), args, at::kFloat, &whole_report);
  // What every rank reads whatever its rows: the three files' length words and headers.
  uint64_t headers = 0;
  for (const auto& file : whole_report.files) {
    headers += SafetensorsReader(file, uint64_t(1) << 30).header().data_start;
  }
  // The bytes of `rows` rows of parameter i in the files (bfloat16; hf_tiny ties output.weight
  // and holds no lm_head).
  auto file_bytes = [&](size_t i, int64_t rows) -> uint64_t {
    if (whole[i].name == "output.weight") return 0;
    const at::Tensor& t = whole[i].tensor;
    return static_cast<uint64_t>(rows * (t.numel() / t.size(0)) * 2);
  };
  uint64_t data = 0;
  for (size_t i = 0; i < whole.size(); ++i) data += file_bytes(i, whole[i].tensor.size(0));
  REQUIRE(whole_report.bytes == headers + data);
  for (int64_t shards : {2, 3}) {  // over 3, wq's 64 rows and wk's 32 are cut inside heads of 16
    for (int64_t position = 0; position < shards; ++position) {
      INFO(position << " of " << shards);
      const RowShare share{position, shards};
      HfLoadReport report;
      const auto rows = load_hf_checkpoint(hf_tiny(), args, at::kFloat, &report, share);
      REQUIRE(rows.size() == whole.size());
      uint64_t expected = headers;
      for (size_t i = 0; i < whole.size(); ++i) {
        INFO(whole[i].name);
        const RowRange kept = share.rows_of(whole[i].tensor.size(0));
        CHECK(same_tensor_bits(rows[i].tensor,
                               whole[i].tensor.narrow(0, kept.begin, kept.end - kept.begin)));
        int64_t read = kept.end - kept.begin;
        if (permuted_heads(whole[i].name, args) > 0 && read > 0) {
          read = ((kept.end + 15) / 16 - kept.begin / 16) * 16;  // the whole heads of 16 rows
        }
        expected += file_bytes(i, read);
      }
      CHECK(report.bytes == expected);
      CHECK(report.headers_checksum == whole_report.headers_checksum);
    }
  }
}

TEST_CASE(
    "hf keys: FSDP ranks that start from a Hugging Face checkpoint, each reading its rows, "
    "train as one process does (batch_invariant)",
    "[hf][checkpoint][distributed]") {
  if (!fs::exists(hf_tiny() + "/config.json")) TITAN_SKIP("test/data/hf_tiny is absent");
  const std::string dir = test::temp_dir("hf_fsdp");
  const std::string args = test::tokens_dataset(dir) +
                           " --debug.batch_invariant true --training.global_batch_size 4 "
                           "--checkpoint.initial_load_in_hf --checkpoint.initial_load_path " +
                           hf_tiny();
  const std::string one = test::train_ranks(dir, "one", 1, args, 3);
  CHECK_THAT(one, Catch::Contains("MiB read, tied embeddings"));
  const std::string fsdp = test::train_ranks(dir, "fsdp", 2, args, 3);
  CHECK_THAT(fsdp, Catch::Contains("FSDP: parameters, gradients and AdamW state sharded"));
  const std::string steps = test::run_step_lines(dir + "/one");
  CHECK(std::count(steps.begin(), steps.end(), '\n') == 3);
  CHECK(test::run_step_lines(dir + "/fsdp") == steps);
}

TEST_CASE(
    "hf keys: a final Hugging Face save that would meet a step-N it does not replace is refused "
    "at start, before any step, naming the folder and the key",
    "[hf][checkpoint]") {
  const std::string dir = test::temp_dir("hf_last_save_target");
  REQUIRE(test::run_titan(test::tiny_run(dir, 2,
                                         "--checkpoint.enable --checkpoint.interval 1 "
                                         "--checkpoint.last_save_model_only false"))
              .exit_code == 0);
  const std::string metrics = test::read_text(dir + "/metrics.jsonl");
  // Resumed from step-1, the run's final save of step 2 would meet step-2, a full checkpoint.
  const auto r = test::run_titan(test::tiny_run(
      dir, 2, "--checkpoint.enable --checkpoint.load_step 1 --checkpoint.last_save_in_hf"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(dir + "/checkpoint/step-2"));
  CHECK_THAT(r.output, Catch::Contains("checkpoint.last_save_in_hf"));
  CHECK(test::read_text(dir + "/metrics.jsonl") == metrics);
  CHECK(fs::exists(dir + "/checkpoint/step-2/manifest.txt"));
}
