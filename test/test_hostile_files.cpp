// Hostile files through the real binary: planted links and special files where titan-train
// writes, special and oversized files where it reads, export targets it must not replace.
// Every case ends in a clear refusal (exit 2 naming the path and what it is), promptly: each
// command runs under `timeout`, so an open that blocks fails the test instead of hanging it.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "catch_torch.h"
#include "test_util.h"

using namespace titan;
namespace fs = std::filesystem;

namespace {

void check_refused(const test::RunResult& r, const std::string& path, const std::string& what) {
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(path) && Catch::Contains(what));
  CHECK_THAT(r.output, !Catch::Contains("step:"));
}

std::string make_fifo(const std::string& path) {
  REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
  return path;
}

}  // namespace

TEST_CASE("hostile files: a link planted at an output file is refused and its target kept",
          "[hostile]") {
  for (const char* name :
       {"metrics.jsonl", "fingerprint.log", "numerics.log", ".titan-train.lock", "config.toml"}) {
    const auto dir = test::temp_dir("hostile_link");
    const std::string victim = test::write_text(dir + "/victim.txt", "precious\n");
    fs::create_directories(dir + "/run");
    fs::create_symlink(victim, dir + "/run/" + name);
    const auto r =
        test::run_titan_bounded(test::tiny_run(dir + "/run", 1, "--debug.numerics_trace blocks"));
    check_refused(r, dir + "/run/" + name, "is a symbolic link");
    CHECK(test::read_text(victim) == "precious\n");
  }
}

TEST_CASE("hostile files: a FIFO at an output file is refused without blocking", "[hostile]") {
  for (const char* name : {"metrics.jsonl", "fingerprint.log", ".titan-train.lock"}) {
    const auto dir = test::temp_dir("hostile_fifo_out");
    fs::create_directories(dir + "/run");
    make_fifo(dir + "/run/" + name);
    check_refused(test::run_titan_bounded(test::tiny_run(dir + "/run", 1)), name, "is a FIFO");
  }
}

TEST_CASE("hostile files: a hard-linked log is replaced, not truncated through its other name",
          "[hostile]") {
  const auto dir = test::temp_dir("hostile_hardlink");
  fs::create_directories(dir + "/run");
  const std::string other = test::write_text(dir + "/other.txt", "keep me\n");
  fs::create_hard_link(other, dir + "/run/metrics.jsonl");
  const auto r = test::run_titan_bounded(test::tiny_run(dir + "/run", 1));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(test::read_text(other) == "keep me\n");
  CHECK_THAT(test::read_text(dir + "/run/metrics.jsonl"), Catch::StartsWith("{\"step\": 1"));
}

TEST_CASE(
    "hostile files: a link planted as the checkpoint folder inside the dump folder is "
    "refused",
    "[hostile]") {
  const auto dir = test::temp_dir("hostile_ckpt_link");
  fs::create_directories(dir + "/run");
  fs::create_directories(dir + "/elsewhere");
  fs::create_directory_symlink(dir + "/elsewhere", dir + "/run/checkpoint");
  const auto r =
      test::run_titan_bounded(test::tiny_run(dir + "/run", 2, "--checkpoint.enable true"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(dir + "/run/checkpoint: is a symbolic link, not a folder"));
  CHECK(fs::is_empty(dir + "/elsewhere"));
}

TEST_CASE("hostile files: FIFOs and devices as inputs are refused at once, naming their type",
          "[hostile]") {
  const auto dir = test::temp_dir("hostile_in");
  const std::string fifo = make_fifo(dir + "/in.fifo");
  const auto run = [&](const std::string& extra) {
    return test::run_titan_bounded(test::tiny_run(dir + "/run", 1, extra));
  };
  check_refused(test::run_titan_bounded("--config " + fifo), fifo,
                "is a FIFO (named pipe), not a regular file");
  check_refused(run("--training.dataset text --training.dataset_path " + fifo), fifo, "is a FIFO");
  check_refused(run("--training.dataset tokens --training.dataset_path /dev/zero"), "/dev/zero",
                "is a character device");
  check_refused(run("--checkpoint.initial_load_path /dev/zero"), "/dev/zero",
                "is a character device");
  check_refused(run("--checkpoint.initial_load_path " + fifo), fifo, "is a FIFO");
}

TEST_CASE("hostile files: a config over 4 MiB is refused before it is read", "[hostile]") {
  const auto dir = test::temp_dir("hostile_big_config");
  const std::string config = dir + "/big.toml";
  test::write_text(config, "[training]\nsteps = 1\n" + std::string(5 << 20, '#') + "\n");
  check_refused(test::run_titan_bounded("--config " + config), config, "larger than 4 MiB");
}

TEST_CASE("hostile files: a looping link in a data folder is named without raw library text",
          "[hostile]") {
  const auto dir = test::temp_dir("hostile_loop");
  fs::create_directories(dir + "/data");
  test::write_text(dir + "/data/a.txt", "some text\n\nmore text\n");
  fs::create_symlink(dir + "/data/b.txt", dir + "/data/b.txt");
  const auto r = test::run_titan_bounded(test::tiny_run(
      dir + "/run", 1, "--training.dataset text --training.dataset_path " + dir + "/data"));
  check_refused(r, dir + "/data/b.txt", "Too many levels of symbolic links");
  CHECK_THAT(r.output, !Catch::Contains("filesystem error"));
}

TEST_CASE("hostile files: export replaces regular files only, and never one in the checkpoint",
          "[hostile]") {
  const auto dir = test::temp_dir("hostile_export");
  const auto trained = test::run_titan_bounded(
      test::tiny_run(dir + "/run", 2, "--checkpoint.enable true --checkpoint.interval 2"));
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const std::string ckpt = dir + "/run/checkpoint";
  const std::string manifest = ckpt + "/step-2/manifest.txt";
  const std::string manifest_before = test::read_text(manifest);
  const std::string fifo = make_fifo(dir + "/out.fifo");
  fs::create_symlink(dir + "/victim", dir + "/out.link");
  test::write_text(dir + "/victim", "precious\n");

  check_refused(test::run_titan_bounded("export " + ckpt + " -o " + fifo + " --force"), fifo,
                "is a FIFO");
  CHECK(fs::is_fifo(fifo));
  check_refused(test::run_titan_bounded("export " + ckpt + " -o " + dir + "/out.link --force"),
                dir + "/out.link", "is a symbolic link");
  CHECK(test::read_text(dir + "/victim") == "precious\n");
  const auto inside = test::run_titan_bounded("export " + ckpt + " -o " + manifest + " --force");
  check_refused(inside, manifest, "the checkpoint being exported");
  CHECK(test::read_text(manifest) == manifest_before);
  const auto beside =
      test::run_titan_bounded("export " + ckpt + " -o " + ckpt + "/model.safetensors");
  check_refused(beside, ckpt + "/model.safetensors", "the checkpoint being exported");

  const auto fine = test::run_titan_bounded("export " + ckpt + " -o " + dir + "/model.safetensors");
  INFO(fine.output);
  CHECK(fine.exit_code == 0);
  test::write_text(dir + "/old.safetensors", "old");
  const auto forced =
      test::run_titan_bounded("export " + ckpt + " -o " + dir + "/old.safetensors --force");
  CHECK(forced.exit_code == 0);
  CHECK(fs::file_size(dir + "/old.safetensors") == fs::file_size(dir + "/model.safetensors"));
}
