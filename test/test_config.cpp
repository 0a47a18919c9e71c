// Config: TOML + CLI parsing, precedence, validation, and the errors users see (exit code 2).
#include <filesystem>

#include "catch_torch.h"
#include "config/loader.h"
#include "config/schema.h"
#include "test_util.h"
#include "util/error.h"

using namespace titan;
using titan::test::run_titan;

namespace {

Config parse(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"titan-train"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse_command_line(argv).config;
}

Config from_toml(const std::string& text) {
  Config c;
  apply_toml(c, text, "test.toml");
  return c;
}

std::string config_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return std::string(e.what()) + " | hint: " + e.hint();
  }
  FAIL("no ConfigError thrown");
  return "";
}

}  // namespace

TEST_CASE("config: defaults follow torchtitan v0.2.2", "[config]") {
  Config c;
  CHECK(c.job.dump_folder == "./outputs");
  CHECK(c.model.name == "llama3");
  CHECK(c.training.global_batch_size == -1);
  CHECK(c.training.device == DeviceChoice::kAuto);
  CHECK(c.training.mixed_precision_param == MixedPrecision::kAuto);
  CHECK(c.optimizer.lr == 8e-4);
  CHECK(c.optimizer.beta1 == 0.9);
  CHECK(c.optimizer.beta2 == 0.95);
  CHECK(c.optimizer.eps == 1e-8);
  CHECK(c.optimizer.weight_decay == 0.1);
  CHECK(c.lr_scheduler.warmup_steps == 200);
  CHECK_FALSE(c.lr_scheduler.decay_ratio.has_value());
  CHECK(c.lr_scheduler.decay_type == DecayType::kLinear);
  CHECK(c.metrics.log_freq == 10);
  CHECK(c.activation_checkpoint.preserve_rng_state);
  CHECK(c.activation_checkpoint.determinism_check == RecomputeCheck::kDefault);
  CHECK_FALSE(c.debug.seed.has_value());
  CHECK_FALSE(c.debug.deterministic);
}

TEST_CASE("config: every file in configs/ parses and validates", "[config]") {
  int files = 0;
  for (auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/configs")) {
    if (entry.path().extension() != ".toml") continue;
    INFO(entry.path().string());
    Config c;
    REQUIRE_NOTHROW(apply_toml_file(c, entry.path().string()));
    REQUIRE_NOTHROW(validate(c));
    ++files;
  }
  CHECK(files >= 1);
  Config debug;
  apply_toml_file(debug, test::source_dir() + "/configs/debug_model.toml");
  CHECK(debug.model.flavor == "debugmodel");
  CHECK(debug.training.steps == 10);
  CHECK(debug.lr_scheduler.warmup_steps == 2);
  CHECK(debug.lr_scheduler.decay_ratio == 0.8);
}

TEST_CASE("config: CLI overrides TOML, TOML overrides defaults", "[config]") {
  auto dir = test::temp_dir("precedence");
  auto file = test::write_text(dir + "/c.toml",
                               "[training]\nsteps = 7\nseq_len = 64\n[optimizer]\nlr = 0.01\n");
  Config c = parse({"--config", file, "--training.steps", "3", "--optimizer.lr=0.5"});
  CHECK(c.training.steps == 3);      // CLI
  CHECK(c.training.seq_len == 64);   // TOML
  CHECK(c.optimizer.lr == 0.5);      // CLI, = form
  CHECK(c.optimizer.beta2 == 0.95);  // default
  Config alias = parse({"--job.config_file=" + file});
  CHECK(alias.training.steps == 7);
}

TEST_CASE("config: flag forms: bare boolean, explicit boolean, negative numbers, optional",
          "[config]") {
  Config c = parse({"--debug.deterministic", "--checkpoint.last_save_model_only", "false",
                    "--training.global_batch_size", "-1", "--debug.seed", "123",
                    "--lr_scheduler.decay_ratio=0.25"});
  CHECK(c.debug.deterministic);
  CHECK_FALSE(c.checkpoint.last_save_model_only);
  CHECK(c.training.global_batch_size == -1);
  CHECK(c.debug.seed == 123);
  CHECK(c.lr_scheduler.decay_ratio == 0.25);
  CHECK(parse({"--debug.deterministic=false"}).debug.deterministic == false);
}

TEST_CASE("config: to_toml reads back to the same config", "[config]") {
  Config c = parse({"--training.steps", "3", "--debug.seed", "9", "--job.description",
                    "quote \" and \\ and tab\t", "--optimizer.lr", "0.00012345678901234",
                    "--lr_scheduler.decay_ratio", "0.8"});
  std::string text = to_toml(c);
  Config back = from_toml(text);
  CHECK(to_toml(back) == text);
  CHECK(back.job.description == c.job.description);
  CHECK(back.optimizer.lr == c.optimizer.lr);
  CHECK(back.debug.seed == 9);
  Config multiline = from_toml("[job]\ndescription = \"\"\"two\nlines\"\"\"\n");
  CHECK(from_toml(to_toml(multiline)).job.description == "two\nlines");
}

TEST_CASE("config: help lists every key with type, default and help text", "[config]") {
  std::string help = help_text();
  Config defaults;
  for (auto& f : config_fields(defaults)) {
    INFO(f.name());
    CHECK(help.find("--" + f.name()) != std::string::npos);
    CHECK(help.find(f.help) != std::string::npos);
  }
  CHECK(help.find("default: 0.0008") != std::string::npos);
  CHECK(help.find("one of: linear | sqrt | cosine") != std::string::npos);
}

TEST_CASE("config: in-process errors name the key and suggest the fix", "[config]") {
  CHECK_THAT(config_error([] { from_toml("[trainig]\nsteps = 1\n"); }),
             Catch::Contains("test.toml:1:2: unknown section [trainig]") &&
                 Catch::Contains("did you mean [training]?"));
  CHECK_THAT(config_error([] { from_toml("[training]\nstpes = 1\n"); }),
             Catch::Contains("test.toml:2:1: unknown key training.stpes") &&
                 Catch::Contains("training.steps"));
  CHECK_THAT(config_error([] { from_toml("[training]\nlr = 0.1\n"); }),
             Catch::Contains("did you mean optimizer.lr?"));
  CHECK_THAT(config_error([] { from_toml("steps = 1\n"); }),
             Catch::Contains("must be inside a [section]") && Catch::Contains("training.steps"));
  CHECK_THAT(config_error([] {
               parse({"--training.global_batch_size", "12", "--training.local_batch_size", "8"});
             }),
             Catch::Contains("not a multiple of training.local_batch_size"));
  CHECK_THAT(config_error([] {
               parse({"--training.dataset", "text"});
             }),
             Catch::Contains("needs a dataset_path"));
  CHECK_THAT(config_error([] {
               parse({"--activation_checkpoint.mode", "memory_budget"});
             }),
             Catch::Contains("needs torch.compile") && Catch::Contains("mode = \"full\""));
  CHECK_THAT(config_error([] {
               parse({"--checkpoint.keep_latest_k", "1"});
             }),
             Catch::Contains("1 is not allowed"));
  CHECK_THAT(config_error([] { parse({"stray"}); }),
             Catch::Contains("unexpected argument 'stray'"));
  CHECK_THAT(config_error([] { parse({"--training.steps"}); }), Catch::Contains("needs a value"));
}

// ---- through the real binary: message on stderr, exit code 2, nothing trained ----------------

TEST_CASE("cli: TOML syntax error reports file:line:col, exit 2", "[cli]") {
  auto dir = test::temp_dir("syntax");
  auto file = test::write_text(dir + "/bad.toml", "[training]\nsteps = 10\nseq_len = = 4\n");
  auto r = run_titan("--config " + file);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(file + ":3:"));
  CHECK_THAT(r.output, Catch::Contains("config error"));
  CHECK_THAT(r.output, !Catch::Contains("step:"));
}

TEST_CASE("cli: unknown section, key and flag are named with a suggestion, exit 2", "[cli]") {
  auto dir = test::temp_dir("unknown");
  auto section = test::write_text(dir + "/s.toml", "[optimiser]\nlr = 0.1\n");
  auto r = run_titan("--config " + section);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(section + ":1:2: unknown section [optimiser]") &&
                           Catch::Contains("did you mean [optimizer]?"));

  auto key = test::write_text(dir + "/k.toml", "[optimizer]\nlearning_rate = 0.1\nbeta = 0.9\n");
  r = run_titan("--config " + key);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(key + ":2:1: unknown key optimizer.learning_rate"));

  r = run_titan("--training.setps 5");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("unknown option '--training.setps'") &&
                           Catch::Contains("did you mean --training.steps?"));
}

TEST_CASE("cli: wrong type names key, expected type and the value given, exit 2", "[cli]") {
  auto dir = test::temp_dir("type");
  auto file = test::write_text(dir + "/t.toml", "[training]\nsteps = \"ten\"\n");
  auto r = run_titan("--config " + file);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output,
             Catch::Contains(file + ":2:9: training.steps: expected integer, got string \"ten\""));

  r = run_titan("--optimizer.lr fast");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output,
             Catch::Contains("--optimizer.lr: optimizer.lr: expected float, got \"fast\""));
}

TEST_CASE("cli: bad enum value lists the allowed ones, exit 2", "[cli]") {
  auto r = run_titan("--lr_scheduler.decay_type cosin");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output,
             Catch::Contains(
                 "\"cosin\" is not allowed; allowed values: \"linear\", \"sqrt\", \"cosine\"") &&
                 Catch::Contains("did you mean \"cosine\"?"));
}

TEST_CASE("cli: out-of-range value names the constraint, exit 2", "[cli]") {
  auto r = run_titan("--training.steps 0");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("training.steps = 0 is out of range: it must be >= 1"));
  r = run_titan("--optimizer.beta2=1.5");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("it must be >= 0 and < 1"));
}

TEST_CASE("cli: missing config file names the path and the system's reason, exit 2", "[cli]") {
  auto r = run_titan("--config /nonexistent/dir/x.toml");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output,
             Catch::Contains(
                 "/nonexistent/dir/x.toml: cannot open config file: No such file or directory"));
}

TEST_CASE("cli: print-config round trip is stable", "[cli]") {
  auto dir = test::temp_dir("roundtrip");
  auto first = run_titan("--config " + test::source_dir() +
                         "/configs/debug_model.toml --training.steps 3 --print-config");
  REQUIRE(first.exit_code == 0);
  auto file = test::write_text(dir + "/printed.toml", first.output);
  auto second = run_titan("--config " + file + " --print-config");
  REQUIRE(second.exit_code == 0);
  CHECK(second.output == first.output);
  CHECK_THAT(first.output, Catch::Contains("steps = 3"));
}

TEST_CASE("cli: --help and --version", "[cli]") {
  auto help = run_titan("--help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.output,
             Catch::Contains("--training.cpu_threads") && Catch::Contains("Exit codes"));
  auto version = run_titan("--version");
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.output, Catch::Contains("titan-train " TITAN_VERSION) &&
                                 Catch::Contains("libtorch ") &&
                                 Catch::Contains("cuda available: "));
}
