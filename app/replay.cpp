#include "app/replay.h"

#include <fmt/format.h>

#include <ostream>

#include "train/replay.h"
#include "util/error.h"
#include "util/strings.h"

namespace titan {
namespace {

struct ReplayArgs {
  bool help = false;
  bool json = false;
  ReplayRequest request;
};

ReplayArgs parse_replay_args(const std::vector<std::string>& args) {
  ReplayArgs r;
  auto value = [&](size_t& i, const std::string& flag) -> std::string {
    if (i + 1 == args.size())
      throw ConfigError(flag, "needs a value", "see titan-train replay --help");
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      r.help = true;
    } else if (a == "--json") {
      r.json = true;
    } else if (a == "--device") {
      r.request.device = value(i, a);
    } else if (starts_with(a, "--device=")) {
      r.request.device = a.substr(9);
    } else if (starts_with(a, "--") && a.find('.') != std::string::npos) {
      const size_t equals = a.find('=');
      if (equals != std::string::npos) {
        r.request.overrides.emplace_back(a.substr(2, equals - 2), a.substr(equals + 1));
      } else {
        r.request.overrides.emplace_back(a.substr(2), value(i, a));
      }
    } else if (starts_with(a, "-")) {
      throw ConfigError(a, "unknown option of replay", "see titan-train replay --help");
    } else if (r.request.capture.empty()) {
      r.request.capture = a;
    } else {
      throw ConfigError(a, "replay takes one capture folder", "see titan-train replay --help");
    }
  }
  if (!r.help && r.request.capture.empty()) {
    throw ConfigError("replay", "no capture folder given",
                      "titan-train replay <dump_folder>/capture/step<N>");
  }
  if (r.request.device && *r.request.device != "cpu" && *r.request.device != "cuda") {
    throw ConfigError("--device", fmt::format("\"{}\" is not cpu or cuda", *r.request.device),
                      "use --device cpu or --device cuda");
  }
  return r;
}

}  // namespace

std::string replay_usage() {
  return "usage: titan-train replay CAPTURE_DIR [--device cpu|cuda] [--json] "
         "[--section.key value ...]\n"
         "\n"
         "Executes a captured step (debug.capture_steps wrote <dump_folder>/capture/step<N>/)\n"
         "again on this machine and build, from the captured state and batch, and compares it\n"
         "with the capture op by op: `bitwise identical`, or the first op whose output differs\n"
         "and the ops whose two sides disagree most, each with both sides' error against a\n"
         "float64 execution of the op on the same inputs and the verdict (which side is closer\n"
         "to float64, by how much, or both within the op's bound), the machine and build\n"
         "differences, and the loss and grad_norm on both sides against float64.\n"
         "\n"
         "  --device cpu|cuda      execute on this device (training.device)\n"
         "  --section.key value    change one captured setting on purpose, e.g.\n"
         "                         --training.cpu_threads 1, --debug.cpu_kernels aten\n"
         "  --json                 print the same as one JSON object\n"
         "\n"
         "The BLAS kernels and ATen's CPU code are chosen from the environment when the\n"
         "libraries load: OPENBLAS_CORETYPE=Haswell titan-train replay ..., or\n"
         "ATEN_CPU_CAPABILITY=avx2 titan-train replay ...\n"
         "\n"
         "Exit codes: 0 bitwise identical, 1 parted, 2 no verdict: bad usage, a damaged,\n"
         "altered or foreign capture, or a failure such as out of memory.\n";
}

int run_replay(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    const ReplayArgs r = parse_replay_args(args);
    if (r.help) {
      out << replay_usage();
      return check_result_written(out, err, kExitOk);
    }
    const ReplayReport report = replay_capture(r.request, err);
    out << (r.json ? format_replay_json(report) : format_replay_text(report));
    return check_result_written(out, err, report.identical ? kExitOk : 1);
  } catch (const ConfigError& e) {
    out.flush();
    err << "titan-train replay: " << e.what() << "\n";
    if (!e.hint().empty()) err << "  hint: " << e.hint() << "\n";
    return kExitNoVerdict;
  } catch (...) {
    // Out of memory, an I/O or library error: reported as main would, but no verdict. (replay
    // keeps the signals' default action, so no stop arrives as an exception.)
    out.flush();
    report_current_exception(err);
    return kExitNoVerdict;
  }
}

}  // namespace titan
