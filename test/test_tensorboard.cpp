// TensorBoard's event-file encoding and the per-layer norms, piece by piece; the files as a
// whole are read back by an independent decoder in test_tensorboard.py.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "catch_torch.h"
#include "instruments/layer_norms.h"
#include "instruments/layer_window.h"
#include "metrics/tfevents.h"
#include "test_util.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

std::vector<PartNorms> norms(std::vector<double> updates) {
  std::vector<PartNorms> out;
  for (size_t i = 0; i < updates.size(); ++i) {
    PartNorms p;
    p.name = std::to_string(i);
    p.update_norm = updates[i];
    p.grad_norm = 1;
    p.weight_norm = 10;
    out.push_back(p);
  }
  return out;
}

std::string only_file_under(const std::string& folder) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(folder)) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  REQUIRE(files.size() == 1);
  return files[0];
}

}  // namespace

TEST_CASE("tfevents: CRC-32C is Castagnoli's, checked against its published check value",
          "[tensorboard]") {
  const std::string check = "123456789";
  CHECK(crc32c(check.data(), check.size()) == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
}

TEST_CASE("tfevents: records read back whole, and a tail cut short or corrupted is left out",
          "[tensorboard]") {
  SummaryValue loss;
  loss.tag = "loss_metrics/global_avg_loss";
  loss.scalar = 2.5f;
  const std::string first = frame_record(encode_file_version_event(1.0));
  const std::string second = frame_record(encode_summary_event(2.0, 7, {loss}));
  const std::string third = frame_record(encode_summary_event(3.0, 300, {loss}));
  EventRecords whole = read_event_records(first + second + third);
  REQUIRE(whole.records.size() == 3);
  CHECK(whole.complete);
  CHECK(whole.records[0].step == 0);
  CHECK(whole.records[1].step == 7);
  CHECK(whole.records[2].step == 300);  // a two-byte varint
  CHECK(whole.records[1].framed == second);

  EventRecords cut = read_event_records(first + second + third.substr(0, third.size() - 1));
  CHECK(cut.records.size() == 2);
  CHECK_FALSE(cut.complete);
  CHECK(cut.end == first.size() + second.size());
  std::string corrupted = first + second + third;
  corrupted[first.size() + 14] ^= 1;  // a byte of the second record's data: its frame holds
  const EventRecords skipped = read_event_records(corrupted);
  REQUIRE(skipped.records.size() == 2);
  CHECK(skipped.records[1].framed == third);
  CHECK(skipped.damaged == std::vector<size_t>{first.size()});
  CHECK(skipped.complete);
  std::string bad_length = first + second + third;
  bad_length[first.size() + 2] ^= 1;  // the second record's length: nothing after it is framed
  const EventRecords stopped = read_event_records(bad_length);
  CHECK(stopped.records.size() == 1);
  CHECK(stopped.end == first.size());
  CHECK_FALSE(stopped.complete);
}

TEST_CASE("layer norms: parameters group into the embedding, each block, norm and output",
          "[tensorboard]") {
  CHECK(part_of("tok_embeddings.weight") == "tok_embeddings");
  CHECK(part_of("layers.0.attention.wq.weight") == "0");
  CHECK(part_of("layers.12.ffn_norm.weight") == "12");
  CHECK(part_of("norm.weight") == "norm");
  CHECK(part_of("output.weight") == "output");
}

TEST_CASE("layer norms: a histogram's buckets count the values up to each limit", "[tensorboard]") {
  const at::Tensor values = at::tensor({-1.0, 0.0, 0.5, 1.0, 1.0, -0.5}, at::kDouble);
  const Histogram h = make_histogram({values}, 4);
  CHECK(h.min == -1.0);
  CHECK(h.max == 1.0);
  CHECK(h.num == 6);
  CHECK(h.sum == 1.0);
  CHECK(h.sum_squares == 3.5);
  CHECK(h.bucket_limit == std::vector<double>{-0.5, 0.0, 0.5, 1.0});
  CHECK(h.bucket == std::vector<double>{2, 1, 1, 2});
  const Histogram flat = make_histogram({at::full({3}, 0.25, at::kDouble)}, 4);
  CHECK(flat.bucket_limit == std::vector<double>{0.25});
  CHECK(flat.bucket == std::vector<double>{3});
}

TEST_CASE("layer window: the report names the part whose updates grew past 2x first",
          "[tensorboard][rerun]") {
  LayerWindow window(5);
  window.add(1, norms({1, 1, 1}));  // dropped: the window holds 5 steps
  window.add(2, norms({1, 1, 1}));
  window.add(3, norms({1, 1.1, 1}));
  window.add(4, norms({1, 1, 1}));
  window.add(5, norms({1, 3, 1}));  // block 1 grows first
  window.add(6, norms({5, 4, 1}));  // block 0 grows more, later
  const std::string text = format_layer_window(window.steps());
  INFO(text);
  CHECK_THAT(text, Catch::StartsWith("per-layer norms over steps 2-6"));
  CHECK_THAT(text, Catch::Contains("updates grew first: layers.1 (step 5, 3x its median before)"));
  CHECK_THAT(text, Catch::Contains("layers.2") && Catch::Contains("-\n"));

  LayerWindow calm(4);
  for (int s = 1; s <= 4; ++s) calm.add(s, norms({1, 1}));
  CHECK_THAT(format_layer_window(calm.steps()), Catch::Contains("updates grew first: none"));
  CHECK(format_layer_window({}).empty());
}

TEST_CASE("tensorboard: a save_tb_folder outside the dump folder is refused at start",
          "[tensorboard][config]") {
  auto dir = test::temp_dir("tb_folder");
  for (const char* folder : {"../elsewhere", "/tmp/tb", "."}) {
    auto r = test::run_titan(test::tiny_run(
        dir + "/run", 2,
        fmt::format("--metrics.enable_tensorboard true --metrics.save_tb_folder {}", folder)));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("metrics.save_tb_folder") &&
                             Catch::Contains("is not a folder inside job.dump_folder"));
    CHECK_FALSE(fs::exists(dir + "/run"));
  }
}

TEST_CASE("tensorboard: event files, norms and histograms leave fingerprint.log byte-identical",
          "[tensorboard][fingerprint]") {
  auto dir = test::temp_dir("tb_fingerprint");
  auto plain = test::run_titan(test::tiny_run(dir + "/plain", 6, "--debug.deterministic true"));
  REQUIRE(plain.exit_code == 0);
  auto tb =
      test::run_titan(test::tiny_run(dir + "/tb", 6,
                                     "--debug.deterministic true --metrics.enable_tensorboard true "
                                     "--metrics.histogram_freq 1 --metrics.log_freq 1"));
  INFO(tb.output);
  REQUIRE(tb.exit_code == 0);
  CHECK(test::read_text(dir + "/plain/fingerprint.log") ==
        test::read_text(dir + "/tb/fingerprint.log"));
  CHECK_FALSE(fs::exists(dir + "/plain/tb"));
}

TEST_CASE("tensorboard: save_for_all_ranks writes rank_<N>/ inside the run folder",
          "[tensorboard]") {
  auto dir = test::temp_dir("tb_all_ranks");
  auto r = test::run_titan(test::tiny_run(
      dir, 2, "--metrics.enable_tensorboard true --metrics.save_for_all_ranks true"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const fs::path file = only_file_under(dir + "/tb");
  CHECK(file.parent_path().filename() == "rank_0");
  CHECK_THAT(file.filename().string(), Catch::StartsWith("events.out.tfevents."));
}

TEST_CASE("tensorboard: a planted link for the TensorBoard folder is refused, nothing written",
          "[tensorboard][hostile]") {
  auto dir = test::temp_dir("tb_link");
  fs::create_directories(dir + "/run");
  fs::create_directories(dir + "/elsewhere");
  fs::create_directory_symlink(dir + "/elsewhere", dir + "/run/tb");
  test::write_text(dir + "/run/metrics.jsonl", "an earlier run's metrics\n");
  auto r =
      test::run_titan_bounded(test::tiny_run(dir + "/run", 2, "--metrics.enable_tensorboard true"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(dir + "/run/tb") && Catch::Contains("symbolic link"));
  CHECK(fs::is_empty(dir + "/elsewhere"));
  CHECK(test::read_text(dir + "/run/metrics.jsonl") == "an earlier run's metrics\n");
}

TEST_CASE("rerun: the report lists every part's update and gradient norms over its window",
          "[tensorboard][rerun]") {
  auto dir = test::temp_dir("tb_rerun");
  auto r = test::run_titan(test::tiny_run(dir, 6, "--debug.rerun_steps 6 --debug.rerun_window 3"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string report = test::read_text(dir + "/rerun/step6.txt");
  CHECK_THAT(report, Catch::Contains("per-layer norms over steps 3-6 (at step 6"));
  for (const char* part : {"tok_embeddings", "layers.0", "layers.1", "norm", "output"}) {
    CHECK_THAT(report, Catch::Contains(fmt::format("\n  {:<16} ", part)));
  }
  CHECK_THAT(report, Catch::Contains("updates grew first: "));
}
