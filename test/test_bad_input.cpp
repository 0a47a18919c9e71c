// Bad input through the real binary: every value that libtorch or the standard library would
// reject deep inside is refused first with exit 2, naming the key (or file:line:col), the bound
// and the value; inputs are never silently misread.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "catch_torch.h"
#include "config/loader.h"
#include "config/schema.h"
#include "test_util.h"
#include "util/error.h"
#include "util/memory_limit.h"

using namespace titan;

namespace {

// One quick CPU step of the tiny model into a fresh folder; `extra` adds or overrides flags.
// Tests of refusals use it too, so that a broken check costs a second, not a default run.
test::RunResult tiny_run(const std::string& tag, const std::string& extra) {
  return test::run_titan(
      "--model.flavor tiny --training.steps 1 --training.seq_len 16 "
      "--training.local_batch_size 2 --training.cpu_threads 1 --training.device cpu "
      "--debug.seed 1 --job.dump_folder " +
      test::temp_dir(tag) + " " + extra);
}

// The run is refused before it starts: exit 2, and no trace of training in the output.
void check_refused(const test::RunResult& r) {
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("config error"));
  CHECK_THAT(r.output, !Catch::Contains("parameters"));
}

std::string write_binary(const std::string& path, const std::vector<uint32_t>& ids) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(uint32_t));
  return path;
}

}  // namespace

TEST_CASE("bad input: a huge seq_len is refused naming the key, bound and value", "[bad_input]") {
  auto r = tiny_run("seq", "--training.seq_len 9223372036854775807");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("training.seq_len = 9223372036854775807 is out of range: "
                                       "it must be >= 1 and <= 1048576"));
  r = tiny_run("seq", "--training.seq_len 99999999999999999999");  // beyond int64 altogether
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("training.seq_len = 99999999999999999999 is out of range"));
}

TEST_CASE("bad input: a huge global_batch_size is refused, by its bound or by the memory check",
          "[bad_input]") {
  auto r = tiny_run("global", "--training.global_batch_size 9223372036854775807");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("training.global_batch_size = 9223372036854775807 is out "
                                       "of range: it must be >= -1 and <= 1073741824"));
  // Within the bound, but 2^30 micro-batches of 16 tokens would be 256 GiB of token ids.
  if (process_memory_limit().bytes > 200.0 * (1 << 30)) return;  // might fit: not a bad input
  r = tiny_run("bigglobal",
               "--training.local_batch_size 1 --training.global_batch_size 1073741824");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("training.global_batch_size: the run needs at least") &&
                           Catch::Contains("1073741824 micro-batches per step") &&
                           Catch::Contains("more than the limit"));
}

TEST_CASE("bad input: tokens per step beyond 2^34 are refused across keys", "[bad_input]") {
  auto r = tiny_run("tokens", "--training.local_batch_size 1048576 --training.seq_len 1048576");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("training.local_batch_size: 1048576 sequences x "
                                       "training.seq_len 1048576 = 1099511627776 tokens per step "
                                       "is more than the limit of 17179869184"));
}

TEST_CASE("bad input: activations that cannot fit in memory are refused before any allocation",
          "[bad_input]") {
  // debugmodel, 64 x 1M tokens: ~1.4 TiB of activations.
  auto r = test::run_titan(
      "--training.local_batch_size 64 --training.seq_len 1048576 --training.device cpu "
      "--job.dump_folder " +
      test::temp_dir("bigseq"));
  check_refused(r);
  CHECK_THAT(r.output,
             Catch::Contains("training.local_batch_size x training.seq_len: the run needs at "
                             "least") &&
                 Catch::Contains("64 x 1048576 tokens per micro-batch") &&
                 Catch::Contains("more than the limit") &&
                 Catch::Contains("lower training.seq_len"));
  CHECK_THAT(r.output, !Catch::Contains("can't allocate memory"));
  r = test::run_titan(
      "--training.local_batch_size 1048576 --training.seq_len 2048 --training.device cpu "
      "--job.dump_folder " +
      test::temp_dir("bigbatch"));
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("1048576 x 2048 tokens per micro-batch"));
}

TEST_CASE("bad input: beta1 or beta2 of 1 is refused (the bound is < 1), outputs untouched",
          "[bad_input]") {
  auto dir = test::temp_dir("beta");
  test::write_text(dir + "/metrics.jsonl", "an earlier run's metrics\n");
  for (const char* key : {"beta1", "beta2"}) {
    auto r = tiny_run("beta_run", fmt::format("--optimizer.{} 1 --job.dump_folder {}", key, dir));
    check_refused(r);
    CHECK_THAT(r.output, Catch::Contains(fmt::format(
                             "optimizer.{} = 1.0 is out of range: it must be >= 0 and < 1", key)));
  }
  CHECK(test::read_text(dir + "/metrics.jsonl") == "an earlier run's metrics\n");
  auto ok = tiny_run("beta_ok", "--optimizer.beta2 0.999999");
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
}

TEST_CASE("bad input: cpu_threads beyond the fixed cap or the machine's cap is refused at once",
          "[bad_input]") {
  auto r = tiny_run("threads", "--training.cpu_threads 4294967296");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("training.cpu_threads = 4294967296 is out of range: it must "
                                       "be >= 0 and <= 1024"));
  auto start = std::chrono::steady_clock::now();
  r = tiny_run("threads", "--training.cpu_threads 10000");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("training.cpu_threads = 10000 is out of range"));
  // Under the fixed cap but far above 8 x this machine's cores (fine below 125 cores).
  r = tiny_run("threads", "--training.cpu_threads 1000");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("training.cpu_threads: 1000 is more than this machine "
                                       "allows: it must be <=") &&
                           Catch::Contains("x the") && Catch::Contains("set cpu_threads = 0"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("bad input: an unusable selective_ac_option is exit 2, and mode none ignores it",
          "[bad_input]") {
  auto r = tiny_run("ac", "--activation_checkpoint.selective_ac_option 99999999999999999999");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("activation_checkpoint.selective_ac_option: "
                                       "\"99999999999999999999\" is not an integer from 0 to "
                                       "1000000"));
  CHECK_THAT(r.output, !Catch::Contains("stoll"));
  auto ok = tiny_run("ac_none",
                     "--activation_checkpoint.mode none "
                     "--activation_checkpoint.selective_ac_option 99999999999999999999");
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.output, Catch::Contains("activation checkpointing: off"));
}

TEST_CASE("bad input: inf and nan are refused for every float key", "[bad_input]") {
  auto r = tiny_run("inf", "--optimizer.lr inf");
  check_refused(r);
  CHECK_THAT(r.output,
             Catch::Contains("optimizer.lr = inf is not a finite number; it must be >= 0") &&
                 Catch::Contains("the default is lr = 0.0008"));
  r = tiny_run("inf", "--optimizer.eps inf");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("optimizer.eps = inf is not a finite number"));
  // Every float key, in-process, both spellings.
  Config defaults;
  int float_keys = 0;
  for (auto& f : config_fields(defaults)) {
    if (f.type_name() != "float") continue;
    ++float_keys;
    for (const char* value : {"inf", "-inf", "nan"}) {
      INFO(f.name() << " = " << value);
      CHECK_THROWS_AS(parse_command_line({"titan-train", "--" + f.name(), value}), ConfigError);
      Config c;
      CHECK_THROWS_AS(
          apply_toml(c, fmt::format("[{}]\n{} = {}\n", f.section, f.key, value), "t.toml"),
          ConfigError);
    }
  }
  CHECK(float_keys >= 9);
}

TEST_CASE("bad input: a uint32 token id 0xFFFFFFFF is refused like any id >= vocab",
          "[bad_input]") {
  auto dir = test::temp_dir("u32");
  std::vector<uint32_t> ids(64, 7);
  ids[40] = 0xFFFFFFFFu;
  write_binary(dir + "/shard.bin", ids);
  auto r = tiny_run("u32_run",
                    "--training.dataset tokens --training.dataset_token_dtype uint32 "
                    "--training.dataset_path " +
                        dir);
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("shard.bin: token id 4294967295 at position 40 is outside "
                                       "the model vocabulary (512)"));
}

TEST_CASE("bad input: the memory limit is the smallest cgroup limit on the process's path",
          "[bad_input]") {
  auto root = test::temp_dir("cgroup");
  auto put = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root + rel).parent_path());
    test::write_text(root + rel, text);
  };
  // cgroup v2: the process's own folder says max, its parent 4 GiB.
  put("/user/job/memory.max", "max\n");
  put("/user/memory.max", "4294967296\n");
  auto v2 = cgroup_memory_limit("0::/user/job\n", root);
  REQUIRE(v2.has_value());
  CHECK(v2->bytes == 4294967296.0);
  CHECK_THAT(v2->source, Catch::Contains("/user/memory.max"));
  // cgroup v1: memory controller in its own hierarchy; the "unlimited" value is no limit.
  put("/memory/a/b/memory.limit_in_bytes", "9223372036854771712\n");
  put("/memory/a/memory.limit_in_bytes", "2147483648\n");
  auto v1 = cgroup_memory_limit("4:memory:/a/b\n3:cpuset:/\n", root);
  REQUIRE(v1.has_value());
  CHECK(v1->bytes == 2147483648.0);
  CHECK_FALSE(cgroup_memory_limit("4:memory:/unlimited\n", root + "/none").has_value());
  put("/free/memory.max", "max\n");
  CHECK_FALSE(cgroup_memory_limit("0::/free\n", root).has_value());
  // The process's own limit is never above the host's RAM.
  auto own = process_memory_limit();
  CHECK(own.bytes > 0);
  CHECK(own.bytes <= static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE));
}

TEST_CASE("bad input: a negative seed is refused in TOML and on the command line", "[bad_input]") {
  auto dir = test::temp_dir("seed");
  auto toml = test::write_text(dir + "/seed.toml", "[debug]\nseed = -5\n");
  auto r = tiny_run("seed_run", "--config " + toml);
  check_refused(r);
  CHECK_THAT(r.output,
             Catch::Contains(toml + ":2:8: debug.seed = -5 is out of range: it must be >= 0"));
  r = tiny_run("seed_run", "--debug.seed -5");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("debug.seed = -5 is out of range: it must be >= 0"));
}

TEST_CASE("bad input: a dataset_path with the synthetic dataset is warned about", "[bad_input]") {
  auto r = tiny_run("synthpath", "--training.dataset_path /data/c4.jsonl");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("[titan] warning: training.dataset_path: "
                                       "\"/data/c4.jsonl\" is ignored"));
  auto quiet = tiny_run("synthnopath", "");
  CHECK_THAT(quiet.output, !Catch::Contains("warning"));
}

TEST_CASE("bad input: cross-key errors name the TOML file:line:col of the key", "[bad_input]") {
  auto dir = test::temp_dir("crosskey");
  auto batch = test::write_text(dir + "/batch.toml",
                                "[training]\nlocal_batch_size = 2\n  global_batch_size = 3\n");
  auto r = tiny_run("crosskey_run", "--config " + batch);
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains(batch + ":3:3: training.global_batch_size: 3 is not a "
                                               "multiple of training.local_batch_size = 2"));
  // A flag that overrides the key takes the blame away from the file.
  r = tiny_run("crosskey_run", "--config " + batch + " --training.global_batch_size 5");
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains("config error: training.global_batch_size: 5 is not"));
  auto ac = test::write_text(dir + "/ac.toml",
                             "[activation_checkpoint]\nmode = \"selective\"\n"
                             "selective_ac_option = \"every other\"\n");
  r = tiny_run("crosskey_run", "--config " + ac);
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains(ac + ":3:1: activation_checkpoint.selective_ac_option: "
                                            "\"every other\" is not an integer"));
  auto path = test::write_text(dir + "/path.toml", "[training]\ndataset = \"jsonl\"\n");
  r = tiny_run("crosskey_run", "--config " + path);
  check_refused(r);
  CHECK_THAT(
      r.output,
      Catch::Contains(path + ":2:1: training.dataset: dataset \"jsonl\" needs a dataset_path"));
}

TEST_CASE("bad input: bad JSONL unicode escapes are refused naming file, line and column",
          "[bad_input]") {
  auto dir = test::temp_dir("escapes");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"text": "\uZZZZ"})", ":2:13: \\u must be followed by 4 hex digits"},
      {R"({"text": "ab\u12G4"})", ":2:17: \\u must be followed by 4 hex digits"},
      {R"({"text": "\u-123"})", ":2:13: \\u must be followed by 4 hex digits"},
      {R"({"text": "\uDC00"})", ":2:11: \\u escape is a lone low surrogate"},
      {R"({"text": "\q"})", ":2:11: bad escape \\q"},
  };
  int n = 0;
  for (auto& [line, expected] : cases) {
    auto file = test::write_text(dir + "/bad" + std::to_string(n++) + ".jsonl",
                                 "{\"text\": \"fine\"}\n" + line + "\n");
    auto r = tiny_run("escape_run", "--training.dataset jsonl --training.dataset_path " + file);
    check_refused(r);
    CHECK_THAT(r.output, Catch::Contains(file + expected));
    CHECK_THAT(r.output, !Catch::Contains("stoul"));
  }
}

TEST_CASE("bad input: a UTF-8 byte-order mark at the start of a jsonl or text file is accepted",
          "[bad_input]") {
  auto dir = test::temp_dir("bom");
  auto jsonl =
      test::write_text(dir + "/bom.jsonl", "\xEF\xBB\xBF{\"text\": \"caf\\u00e9 au lait\"}\n");
  auto r = tiny_run("bom_jsonl", "--training.dataset jsonl --training.dataset_path " + jsonl);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("jsonl " + jsonl + " (1 documents)"));
  auto text = test::write_text(dir + "/bom.txt", "\xEF\xBB\xBFOne paragraph.\n\nAnother one.\n");
  r = tiny_run("bom_text", "--training.dataset text --training.dataset_path " + text);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("text " + text + " (2 documents)"));
}

TEST_CASE("bad input: a JSONL line nested 200,000 levels deep neither crashes nor is misread",
          "[bad_input]") {
  auto dir = test::temp_dir("deep");
  const std::string open(200000, '['), close(200000, ']');
  auto good = test::write_text(dir + "/deep.jsonl",
                               "{\"nested\": " + open + close + ", \"text\": \"still here\"}\n");
  auto r = tiny_run("deep_good", "--training.dataset jsonl --training.dataset_path " + good);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("(1 documents)"));
  const std::string prefix = "{\"text\": \"t\", \"x\": ";
  auto bad = test::write_text(dir + "/unclosed.jsonl", prefix + open + "\n");
  r = tiny_run("deep_bad", "--training.dataset jsonl --training.dataset_path " + bad);
  check_refused(r);
  CHECK_THAT(r.output, Catch::Contains(fmt::format("{}:1:{}: unexpected end of line", bad,
                                                   prefix.size() + open.size() + 1)));
}

TEST_CASE(
    "bad input: a TITAN_* switch set to a value it does not take is refused at start, naming "
    "the variable and the values it takes, in every subcommand",
    "[bad_input]") {
  const std::string dir = test::temp_dir("env_switch");
  const std::string run = test::tiny_run(dir + "/run", 1);
  for (const char* bad :
       {"TITAN_MALLOC_TUNING=off", "TITAN_FSDP_PREFETCH=no", "TITAN_PROFILER=kineto"}) {
    const auto r = test::run_titan_env(bad, run);
    INFO(bad << "\n" << r.output);
    CHECK(r.exit_code == 2);
    const std::string name = std::string(bad).substr(0, std::string(bad).find('='));
    CHECK_THAT(r.output, Catch::Contains(name + ": \""));
    CHECK_THAT(r.output, Catch::Contains("is not one of"));
    CHECK(!std::filesystem::exists(dir + "/run"));
  }
  const auto tokenize = test::run_titan_env("TITAN_MALLOC_TUNING=yes", "tokenize --help");
  CHECK(tokenize.exit_code == 2);
  CHECK_THAT(tokenize.output, Catch::Contains("TITAN_MALLOC_TUNING: \"yes\" is not one of 1, 0"));
}
