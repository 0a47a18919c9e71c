// The pieces under checkpoints: the streaming file hash, the safetensors reader's refusals, an
// aborted save, and the line logs a resumed run continues.
#include <filesystem>
#include <random>
#include <string>

#include "catch_torch.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/safetensors.h"
#include "metrics/fingerprint.h"
#include "metrics/metrics.h"
#include "metrics/numerics_log.h"
#include "test_util.h"
#include "util/files.h"
#include "util/hash.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string parse_error(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "f.safetensors");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(parsed)";
}

}  // namespace

TEST_CASE("hash: StreamingHash over any pieces equals hash_bytes of the whole", "[checkpoint]") {
  std::mt19937 rng(7);
  std::string data(3 * (1 << 20) + 12345, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  for (size_t total : {size_t(0), size_t(5), size_t(1 << 20), size_t((1 << 20) + 1), data.size()}) {
    for (int trial = 0; trial < 4; ++trial) {
      StreamingHash h;
      size_t at = 0;
      while (at < total) {
        const size_t piece = std::min(total - at, size_t(rng() % (trial == 0 ? 7 : 900000)) + 1);
        h.update(data.data() + at, piece);
        at += piece;
      }
      INFO(total << " bytes, trial " << trial);
      CHECK(h.digest() == hash_bytes(data.data(), total));
    }
  }
}

TEST_CASE("safetensors: written files parse back bitwise, damaged ones are refused by name",
          "[checkpoint]") {
  auto dir = test::temp_dir("safetensors");
  std::vector<NamedTensor> tensors = {{"a.weight", at::randn({3, 4})},
                                      {"b", at::arange(5, at::kLong)},
                                      {"c", at::randn({2}).to(at::kBFloat16)}};
  {
    HashedFileWriter out(dir + "/t.safetensors");
    write_safetensors(out, tensors, {{"format", "pt"}});
    auto record = out.finish();
    const std::string bytes = test::read_text(dir + "/t.safetensors");
    CHECK(record.size == bytes.size());
    CHECK(record.checksum == hash_bytes(bytes.data(), bytes.size()));
    auto back = parse_safetensors(bytes, "t");
    REQUIRE(back.tensors.size() == 3);
    CHECK(back.metadata.at("format") == "pt");
    for (size_t i = 0; i < 3; ++i) {
      CHECK(back.tensors[i].name == tensors[i].name);
      CHECK(at::equal(back.tensors[i].tensor, tensors[i].tensor));
    }
  }
  CHECK_THAT(parse_error("abc"), Catch::Contains("shorter than the 8-byte header length"));
  CHECK_THAT(parse_error(safetensors_bytes("{}", "").substr(0, 9) + std::string(8, 'x')),
             Catch::Contains("f.safetensors: header JSON, column"));
  std::string huge = safetensors_bytes("{}", "");
  huge[6] = 1;
  CHECK_THAT(parse_error(huge), Catch::Contains("exceeds the file"));
  CHECK_THAT(parse_error(safetensors_bytes(
                 R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234")),
             Catch::Contains("lie outside the 4 data bytes"));
  CHECK_THAT(parse_error(safetensors_bytes(
                 R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678")),
             Catch::Contains("needs 12 bytes, data_offsets give 8"));
  CHECK_THAT(
      parse_error(safetensors_bytes(
          R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          "12345678")),
      Catch::Contains("overlap"));
  CHECK_THAT(parse_error(safetensors_bytes(
                 R"({"x":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "1")),
             Catch::Contains("unsupported dtype \"Q4\""));
  CHECK_THAT(parse_error(safetensors_bytes(
                 R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "1234")),
             Catch::Contains("non-negative integer"));
  CHECK_THAT(
      parse_error(safetensors_bytes(
          R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
          "12")),
      Catch::Contains("\"x\" appears twice"));
  CHECK_THAT(parse_error(safetensors_bytes(
                 R"({"x":{"dtype":"U8","shape":[1] "data_offsets":[0,1]}})", "1")),
             Catch::Contains("expected ',', found"));
  CHECK_THAT(parse_error(safetensors_bytes(R"({"__metadata__":{"a":"b",}})", "")),
             Catch::Contains("trailing comma"));
}

TEST_CASE("checkpoint: an aborted save removes its temporary folder and keeps the others",
          "[checkpoint]") {
  auto dir = test::temp_dir("save_abort");
  CheckpointContents c;
  c.step = c.state.step = 1;
  c.model = {{"w", at::randn({1000, 1000})}};
  c.optimizer = {{"w.exp_avg", at::randn({1000, 1000})}};
  c.config_toml = "[job]\n";
  save_checkpoint(dir, c);
  c.step = c.state.step = 2;
  int polls = 0;
  CHECK_THROWS_AS(save_checkpoint(dir, c, [&] { return ++polls > 1; }), WriteAborted);
  CHECK(list_checkpoints(dir).steps == std::vector<int64_t>{1});
  CHECK_FALSE(fs::exists(dir + "/.step-2.tmp"));
  auto loaded = load_checkpoint(dir + "/step-1");
  CHECK(at::equal(loaded.model[0].tensor, c.model[0].tensor));
  CHECK(loaded.config_toml == "[job]\n");
}

TEST_CASE("files: a resumed log keeps the header and the steps up to the checkpoint only",
          "[checkpoint]") {
  auto dir = test::temp_dir("rewrite_log");
  const std::string path = dir + "/log";
  test::write_text(path,
                   "old header\nstep 1 a\nstep 2 b\nx of 2\nend step 2\nstep 3 c\nstep 4 partial");
  rewrite_log_through_step(path, "new header\n", 2, numerics_line_step);
  CHECK(test::read_text(path) == "new header\nstep 1 a\nstep 2 b\nx of 2\nend step 2\n");
  test::write_text(path, "{\"step\": 1, \"loss\": 2}\n{\"step\": 10, \"loss\": 1}\n");
  rewrite_log_through_step(path, "", 9, jsonl_line_step);
  CHECK(test::read_text(path) == "{\"step\": 1, \"loss\": 2}\n");
  rewrite_log_through_step(path, "fresh\n", 0, jsonl_line_step);
  CHECK(test::read_text(path) == "fresh\n");
  rewrite_log_through_step(dir + "/missing", "h\n", 5, fingerprint_line_step);
  CHECK(test::read_text(dir + "/missing") == "h\n");
}
