// fingerprint.log: byte-identical for identical runs, different when the bits differ, blind to
// where outputs go; exact number formatting; a checksum that sees every bit.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstdlib>
#include <sstream>

#include "catch_torch.h"
#include "config/loader.h"
#include "metrics/fingerprint.h"
#include "model/attention_kernels.h"
#include "test_util.h"
#include "util/hash.h"

using namespace titan;

namespace {

const std::string kTinyRun =
    "--model.flavor tiny --training.seq_len 32 --training.local_batch_size 2 --training.steps 4 "
    "--training.device cpu --debug.deterministic --metrics.log_freq 2 --debug.fingerprint_freq 2 ";

constexpr size_t kHeaderLines = 17;

std::string run_and_read_fingerprint(const std::string& args, const std::string& dir) {
  auto r = test::run_titan(kTinyRun + args + " --job.dump_folder " + dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return test::read_text(dir + "/fingerprint.log");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("fingerprint: two deterministic runs with the same seed write byte-identical files",
          "[fingerprint][cli]") {
  auto dir = test::temp_dir("fp_same");
  auto a = run_and_read_fingerprint("--debug.seed 11", dir + "/a");
  auto b = run_and_read_fingerprint("--debug.seed 11 --job.description other --metrics.log_freq 1",
                                    dir + "/b");
  CHECK(a == b);  // dump folder, description and log_freq are not part of the computation
  auto lines = lines_of(a);
  REQUIRE(lines.size() == kHeaderLines + 4);  // header + one line per step
  CHECK_THAT(lines[kHeaderLines], Catch::StartsWith("step 1 loss 0x"));
  CHECK_THAT(lines[kHeaderLines], !Catch::Contains(" params "));  // fingerprint_freq 2: steps 2, 4
  CHECK_THAT(lines[kHeaderLines + 1], Catch::Contains(" params "));
  CHECK_THAT(a, Catch::Contains("\ncpu_threads ") && Catch::Contains("\nseed 11\n") &&
                    Catch::Contains("\ndeterministic true\n") &&
                    Catch::Contains("\nworld_size 1\n"));
  // The tiny model's heads are 16 wide: the fused kernel where this CPU and libtorch take it, at
  // the widest vectors the CPU has.
  const std::string widest = cpu_has_avx512() ? "fused_avx512" : "fused_avx2_fma";
#if TORCH_VERSION_MAJOR >= 2
  const std::string kernel = cpu_has_avx2_fma() ? widest : "torch_sdpa";
#else
  const std::string kernel = cpu_has_avx2_fma() ? widest : "blocked_aten";
#endif
  // SwiGLU, RMSNorm (the tiny model's dim is 64) and AdamW are fused on any libtorch with such a
  // CPU.
  const std::string fused = cpu_has_avx2_fma() ? widest : "aten";
  CHECK_THAT(a, Catch::Contains("\nblas_kernels ") &&
                    Catch::Contains("\nattention_kernel " + kernel + "\nswiglu_kernel " + fused +
                                    "\nrms_norm_kernel " + fused + "\nadamw_kernel " + fused +
                                    "\nworld_size"));
}

TEST_CASE("fingerprint: a different seed differs from step 1 on", "[fingerprint][cli]") {
  auto dir = test::temp_dir("fp_seed");
  auto a = lines_of(run_and_read_fingerprint("--debug.seed 11", dir + "/a"));
  auto b = lines_of(run_and_read_fingerprint("--debug.seed 12", dir + "/b"));
  REQUIRE(a.size() == b.size());
  CHECK(a[kHeaderLines] != b[kHeaderLines]);  // step 1
}

TEST_CASE("fingerprint: hex floats in step lines read back to the same bits", "[fingerprint]") {
  const double loss = 8.0878543853759766, norm = 1.5757, lr = 8e-4 / 3;
  auto line = FingerprintLog::format_step(3, loss, norm, lr, 4096, 0x0123456789abcdefull);
  std::istringstream in(line);
  std::string word, loss_hex, norm_hex, lr_hex;
  in >> word >> word >> word >> loss_hex >> word >> word >> norm_hex >> word >> word >> lr_hex;
  CHECK(std::strtod(loss_hex.c_str(), nullptr) == loss);
  CHECK(std::strtod(norm_hex.c_str(), nullptr) == norm);
  CHECK(std::strtod(lr_hex.c_str(), nullptr) == lr);
  CHECK_THAT(line, Catch::EndsWith("tokens 4096 params 0123456789abcdef"));
  CHECK(FingerprintLog::format_step(3, std::nextafter(loss, 9.0), norm, lr, 4096, std::nullopt) !=
        FingerprintLog::format_step(3, loss, norm, lr, 4096, std::nullopt));
}

TEST_CASE("fingerprint: the parameter checksum sees a single flipped bit and ignores threads",
          "[fingerprint]") {
  // `a` spans several of hash_bytes' 1 MiB chunks, so the parallel path runs.
  auto a = at::randn({3, 1 << 19}), b = at::randn({3, 7}), c = at::randint(0, 100, {5}, at::kLong);
  std::vector<at::Tensor> params = {a, b, c};
  const int threads_before = at::get_num_threads();
  at::set_num_threads(1);
  uint64_t one_thread = tensors_checksum(params);
  at::set_num_threads(4);
  uint64_t four_threads = tensors_checksum(params);
  at::set_num_threads(threads_before);
  CHECK(four_threads == one_thread);
  auto flipped = b.clone();
  reinterpret_cast<uint32_t*>(flipped.data_ptr<float>())[20] ^= 1u;  // lowest mantissa bit
  CHECK(tensors_checksum({a, flipped, c}) != one_thread);
  CHECK(tensors_checksum({b, a, c}) != one_thread);  // order matters
}

TEST_CASE(
    "fingerprint: words_checksum (a device tensor's) sees one changed word, moved words "
    "and a changed tail byte, not the memory layout or the threads",
    "[fingerprint]") {
  auto a = at::randn({64, 1000});
  const uint64_t base = words_checksum(a);
  auto flipped = a.clone();
  reinterpret_cast<uint32_t*>(flipped.data_ptr<float>())[31337] ^= 1u;  // lowest mantissa bit
  CHECK(words_checksum(flipped) != base);
  auto words = at::randn({1000}, at::kDouble);  // one value a word: a swap moves whole words
  auto swapped = words.clone();
  swapped[3] = words[7];
  swapped[7] = words[3];
  CHECK(words_checksum(swapped) != words_checksum(words));
  // The logical order is hashed: a transposed view hashes as its contiguous copy.
  CHECK(words_checksum(a.t()) == words_checksum(a.t().contiguous()));
  CHECK(words_checksum(a.t()) != base);
  // 13 bytes: the last word is padded, and its one real byte still counts.
  auto bytes = at::arange(13, at::kByte);
  auto last_changed = bytes.clone();
  last_changed[12] = 99;
  CHECK(words_checksum(last_changed) != words_checksum(bytes));
  CHECK(words_checksum(bytes.narrow(0, 1, 12)) != words_checksum(bytes.narrow(0, 0, 12)));
  const int threads_before = at::get_num_threads();
  at::set_num_threads(1);
  const uint64_t one_thread = words_checksum(a);
  at::set_num_threads(threads_before);
  CHECK(one_thread == base);
  // CPU tensors keep hash_bytes (fingerprint.log's values of CPU runs are unchanged).
  CHECK(tensor_checksum(a) != base);
}

TEST_CASE("fingerprint: the config hash ignores output-only keys and sees the rest",
          "[fingerprint]") {
  Config base;
  Config moved = base;
  moved.job.dump_folder = "/elsewhere";
  moved.job.description = "x";
  moved.metrics.log_freq = 1;
  CHECK(config_hash(moved) == config_hash(base));
  Config changed = base;
  changed.optimizer.lr = 1e-3;
  CHECK(config_hash(changed) != config_hash(base));
  changed = base;
  changed.debug.seed = 3;
  CHECK(config_hash(changed) != config_hash(base));
}
