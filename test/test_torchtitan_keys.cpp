// torchtitan v0.2.2's config keys: every one known, each of its kind (works, no effect, refused),
// torchtitan's own llama3 configs loading, and the keys titan-train took over to work as
// torchtitan's do (print_config, save_config_file, colours, lr_scheduler.total_steps).
#include <filesystem>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "catch_torch.h"
#include "config/loader.h"
#include "config/schema.h"
#include "metrics/metrics.h"
#include "test_util.h"
#include "util/error.h"
#include "util/json_cursor.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

std::string data_file(const std::string& name) { return test::source_dir() + "/test/data/" + name; }

bool valid_json(const std::string& text) {
  try {
    JsonCursor cur(text);
    cur.skip_value();
    return cur.at_end();
  } catch (const std::exception&) {
    return false;
  }
}

// A value other than the default for a refused key: the next choice, 2 for an integer, true for
// a bool, ["x"] for a list, "x" for a string.
std::string other_value(const FieldSpec& f) {
  if (!f.choices.empty()) {
    const std::string current = f.value_as_toml();
    for (const auto& c : f.choices) {
      if (toml_quote(c) != current) return c;
    }
  }
  const std::string type = f.type_name();
  if (type == "bool") return "true";
  if (type == "integer") return "2";
  if (type == "string list") return "x";
  return "x";
}

}  // namespace

TEST_CASE(
    "torchtitan keys: every v0.2.2 key at its default loads and round-trips through "
    "--print-config",
    "[config][torchtitan]") {
  const auto dir = test::temp_dir("tt_defaults");
  auto first = test::run_titan("--config " + data_file("torchtitan_v0.2.2_defaults.toml") +
                               " --print-config");
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  test::write_text(dir + "/printed.toml", first.output);
  auto second = test::run_titan("--config " + dir + "/printed.toml --print-config");
  REQUIRE(second.exit_code == 0);
  CHECK(second.output == first.output);
  // Every section of torchtitan's JobConfig is a section here, printed as a table of its own.
  for (const char* section :
       {"[profiling]", "[training.dataloader]", "[compile]", "[quantize.linear.float8]",
        "[quantize.linear.mx]", "[quantize.grouped_mm.float8]", "[quantize.grouped_mm.mx]",
        "[memory_estimation]", "[fault_tolerance]", "[experimental]", "[validation]",
        "[validation.dataloader]"}) {
    INFO(section);
    CHECK(first.output.find(section) != std::string::npos);
  }
  // Unknown keys stay refused, with a did-you-mean.
  auto typo = test::run_titan("--compile.enabel true --print-config");
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.output, Catch::Contains("did you mean --compile.enable?"));
}

TEST_CASE("torchtitan keys: the llama3 train configs load, 70B and 405B are refused by name",
          "[config][torchtitan]") {
  auto debug = test::run_titan("--config " + data_file("torchtitan_llama3_debug_model.toml") +
                               " --print-config");
  INFO(debug.output);
  CHECK(debug.exit_code == 0);
  // --print-config checks the tokenizer a run would load: the 8B config's Hugging Face download
  // is not here, and that is its only refusal.
  auto eight =
      test::run_titan("--config " + data_file("torchtitan_llama3_8b.toml") + " --print-config");
  INFO(eight.output);
  CHECK(eight.exit_code == 2);
  CHECK_THAT(eight.output, Catch::StartsWith("titan-train: config error: model.hf_assets_path: "
                                             "./assets/hf/Llama-3.1-8B"));
  auto tp =
      test::run_titan("--config " + data_file("torchtitan_llama3_70b.toml") + " --print-config");
  CHECK(tp.exit_code == 2);
  CHECK_THAT(tp.output, Catch::Contains("torchtitan_llama3_70b.toml:") &&
                            Catch::Contains("parallelism.tensor_parallel_degree: set to 8") &&
                            Catch::Contains("data_parallel_shard_degree"));
  auto float8 =
      test::run_titan("--config " + data_file("torchtitan_llama3_405b.toml") + " --print-config");
  CHECK(float8.exit_code == 2);
  CHECK_THAT(float8.output, Catch::Contains("model.converters: set to [\"float8\"]"));
}

TEST_CASE("torchtitan keys: a no-effect key at another value is named at start and changes no bit",
          "[config][torchtitan]") {
  const auto dir = test::temp_dir("tt_no_effect");
  auto plain = test::run_titan(test::tiny_run_seq32(dir + "/plain", 3));
  REQUIRE(plain.exit_code == 0);
  auto knobs = test::run_titan(
      test::tiny_run_seq32(dir + "/knobs", 3,
                           "--compile.enable --training.gc_freq 7 --checkpoint.async_mode "
                           "async --training.dataloader.num_workers 4 "
                           "--parallelism.enable_async_tensor_parallel"));
  INFO(knobs.output);
  REQUIRE(knobs.exit_code == 0);
  CHECK_THAT(knobs.output,
             Catch::Contains("compile.enable = true has no effect here: titan-train is compiled") &&
                 Catch::Contains("training.gc_freq = 7 has no effect here") &&
                 Catch::Contains("checkpoint.async_mode = \"async\" has no effect here") &&
                 Catch::Contains("training.dataloader.num_workers = 4 has no effect here"));
  CHECK(test::read_text(dir + "/plain/fingerprint.log") ==
        test::read_text(dir + "/knobs/fingerprint.log"));
}

TEST_CASE(
    "torchtitan keys: every refused key at another value is exit 2 naming it, before any "
    "output",
    "[config][torchtitan]") {
  Config defaults;
  int refused = 0;
  for (const auto& f : config_fields(defaults)) {
    if (f.kind != KeyKind::kRefused) continue;
    const std::string value = other_value(f);
    INFO(f.name() << " = " << value);
    // Every key in process (the binary's own command-line parser and checks) ...
    try {
      (void)parse_command_line({"titan-train", "--" + f.name(), value});
      FAIL_CHECK("accepted");
    } catch (const ConfigError& e) {
      CHECK_THAT(std::string(e.what()) + "\n" + e.hint(),
                 Catch::Contains(f.name() + ": set to") && Catch::Contains(f.note));
    }
    // ... and the first and every sixth through the binary: exit 2, and no output.
    if (refused++ % 6 != 0) continue;
    const auto dir = test::temp_dir("tt_refused");
    auto r = test::run_titan(test::tiny_run_seq32(dir + "/run", 1, "--" + f.name() + " " + value));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(f.name() + ": set to") && Catch::Contains(f.note));
    CHECK_FALSE(fs::exists(dir + "/run"));
  }
  CHECK(refused >= 13);
}

TEST_CASE("torchtitan keys: lr_scheduler.total_steps is the schedule's length", "[config]") {
  const auto dir = test::temp_dir("tt_total_steps");
  const std::string common = "--lr_scheduler.warmup_steps 2 --lr_scheduler.decay_ratio 0.5";
  REQUIRE(test::run_titan(test::tiny_run_seq32(dir + "/short", 4, common)).exit_code == 0);
  REQUIRE(test::run_titan(test::tiny_run_seq32(dir + "/long", 8, common)).exit_code == 0);
  REQUIRE(test::run_titan(
              test::tiny_run_seq32(dir + "/horizon", 4, common + " --lr_scheduler.total_steps 8"))
              .exit_code == 0);
  // A 4-step run with an 8-step schedule takes the first 4 learning rates of the 8-step run.
  auto lrs = [](const std::string& path) {
    std::vector<std::string> out;
    std::regex lr(" lr (\\S+) ");
    std::istringstream in(test::fingerprint_step_lines(path));
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, lr)) out.push_back(m[1]);
    }
    return out;
  };
  const auto horizon = lrs(dir + "/horizon/fingerprint.log");
  const auto long_run = lrs(dir + "/long/fingerprint.log");
  REQUIRE(horizon.size() == 4);
  CHECK(std::vector<std::string>(long_run.begin(), long_run.begin() + 4) == horizon);
  CHECK(lrs(dir + "/short/fingerprint.log") != horizon);
  // A schedule that ends before the run is refused before any output, naming both keys.
  const auto shorter = test::run_titan(
      test::tiny_run_seq32(dir + "/shorter", 4, common + " --lr_scheduler.total_steps 2"));
  INFO(shorter.output);
  CHECK(shorter.exit_code == 2);
  CHECK_THAT(shorter.output,
             Catch::Contains("lr_scheduler.total_steps: 2 steps end the schedule before the run's "
                             "last step (training.steps = 4)") &&
                 Catch::Contains("hint: set lr_scheduler.total_steps to at least training.steps"));
  CHECK_FALSE(std::filesystem::exists(dir + "/shorter"));
}

TEST_CASE("torchtitan keys: print_config logs the config as JSON, save_config_file writes it",
          "[config][torchtitan]") {
  const auto dir = test::temp_dir("tt_print_config");
  auto r = test::run_titan(test::tiny_run_seq32(
      dir + "/run", 1, "--job.print_config --job.save_config_file saved/job_config.json"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("config (job.print_config):"));
  const std::string json = test::read_text(dir + "/run/saved/job_config.json");
  CHECK(valid_json(json));
  CHECK_THAT(json, Catch::Contains("\"dataloader\": {") && Catch::Contains("\"float8\": {") &&
                       Catch::Contains("\"print_config\": true"));
  auto outside =
      test::run_titan(test::tiny_run_seq32(dir + "/bad", 1, "--job.save_config_file ../x.json"));
  CHECK(outside.exit_code == 2);
  CHECK_THAT(outside.output, Catch::Contains("is not a file name inside job.dump_folder"));
}

TEST_CASE(
    "torchtitan keys: save_config_file naming one of the run's own files or folders is exit 2 "
    "before any output",
    "[config][torchtitan]") {
  const auto dir = test::temp_dir("tt_save_config_own");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {".titan-train.lock", "its lock file .titan-train.lock"},
      {"metrics.jsonl", "its metrics file metrics.jsonl"},
      {"./fingerprint.rank1.log", "its fingerprint file fingerprint.rank1.log"},
      {"checkpoint/step-9", "its checkpoint folder checkpoint"},
      {"tb", "its TensorBoard folder tb"},
      {"capture/x.json", "its capture folder capture"},
  };
  for (const auto& [name, own] : cases) {
    const auto r =
        test::run_titan(test::tiny_run(dir + "/run", 1, "--job.save_config_file " + name));
    INFO(name << ": " << r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output,
               Catch::Contains("job.save_config_file: \"" + name + "\" is the run's own: " + own));
    CHECK_FALSE(std::filesystem::exists(dir + "/run"));
  }
  // A name beside them is the user's.
  CHECK(test::run_titan(test::tiny_run(dir + "/run", 1, "--job.save_config_file checkpoints.json"))
            .exit_code == 0);
}

TEST_CASE("torchtitan keys: the console line has torchtitan's colours on a terminal only",
          "[config][torchtitan]") {
  StepMetrics m;
  m.step = 3;
  const std::string plain = format_console_line(m);
  const std::string colored = format_console_line(m, console_colors(true));
  CHECK(plain.find('\033') == std::string::npos);
  CHECK(colored.rfind("\033[31mstep:  3  \033[32mloss:", 0) == 0);
  CHECK_THAT(colored,
             Catch::Contains("\033[38;2;180;60;0mgrad_norm:") && Catch::Contains("%\033[39m  lr:"));
  // The tests' console is a pipe: no colour reaches it.
  auto r = test::run_titan(test::tiny_run_seq32(test::temp_dir("tt_color") + "/run", 1));
  CHECK(r.output.find('\033') == std::string::npos);
}

}  // namespace titan

namespace titan {

TEST_CASE(
    "torchtitan keys: every key of torchtitan's list is in --help, and "
    "docs/torchtitan-keys.md is the table --help gives",
    "[config][torchtitan]") {
  if (test::run_shell("command -v python3 >/dev/null 2>&1").exit_code != 0)
    TITAN_SKIP("python3 is missing: scripts/key_table.py cannot run");
  const std::string table = test::temp_dir("key_table") + "/keys.md";
  const auto r =
      test::run_shell("python3 " + test::source_dir() + "/scripts/key_table.py " + test::binary() +
                      " " + data_file("torchtitan_v0.2.2_keys.txt") + " > " + table + " 2>&1");
  INFO(test::read_text(table));
  REQUIRE(r.exit_code == 0);
  CHECK(test::read_text(table) == test::read_text(test::source_dir() + "/docs/torchtitan-keys.md"));
  // The README gives the table's counts: "Of torchtitan v0.2.2's 149 keys: 80 work, 53 have no
  // effect, 16 are refused."
  std::smatch counts;
  const std::string text = test::read_text(table);
  REQUIRE(std::regex_search(text, counts,
                            std::regex("Of torchtitan v0\\.2\\.2's (\\d+) keys: (\\d+) work, "
                                       "(\\d+) have no effect, (\\d+) are refused")));
  const std::string readme = test::read_text(test::source_dir() + "/README.md");
  CHECK_THAT(readme,
             Catch::Contains("Of its " + counts.str(1) + " keys, " + counts.str(2) + " **work**") &&
                 Catch::Contains(counts.str(3) + " performance-only knobs") &&
                 Catch::Contains(counts.str(4) + " that would change the model"));
}

}  // namespace titan
