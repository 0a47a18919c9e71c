#include "app/compare.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <new>
#include <optional>
#include <ostream>

#include "analysis/compare.h"
#include "util/error.h"

namespace titan {
namespace {

struct CompareRequest {
  bool help = false;
  bool json = false;
  std::optional<double> tolerance;
  std::vector<std::string> runs;
};

double parse_tolerance(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0) {
    throw ConfigError("--tolerance", fmt::format("\"{}\" is not a relative tolerance", text),
                      "give a number >= 0, e.g. --tolerance 1e-5");
  }
  return v;
}

CompareRequest parse_compare_args(const std::vector<std::string>& args) {
  CompareRequest r;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      r.help = true;
    } else if (a == "--json") {
      r.json = true;
    } else if (a == "--tolerance" || a.rfind("--tolerance=", 0) == 0) {
      if (a == "--tolerance" && i + 1 == args.size()) {
        throw ConfigError("--tolerance", "needs a value", "e.g. --tolerance 1e-5");
      }
      r.tolerance = parse_tolerance(a == "--tolerance" ? args[++i] : a.substr(12));
    } else if (a.rfind("--", 0) == 0) {
      throw ConfigError(a, "unknown option of compare", "see titan-train compare --help");
    } else {
      r.runs.push_back(a);
    }
  }
  if (!r.help && r.runs.size() != 2) {
    throw ConfigError("compare", fmt::format("needs two runs, got {}", r.runs.size()),
                      "titan-train compare RUN_A RUN_B (dump folders or fingerprint.log files)");
  }
  return r;
}

}  // namespace

std::string compare_usage() {
  return "usage: titan-train compare RUN_A RUN_B [--tolerance REL] [--json]\n"
         "\n"
         "Compares two runs from the files they wrote. RUN_A and RUN_B are dump folders\n"
         "(job.dump_folder) or fingerprint.log files; config.toml and numerics.log beside them\n"
         "are used when both runs have them.\n"
         "\n"
         "Prints the header differences (config hash and differing config keys, versions,\n"
         "device, threads, world size), then whether the runs are bitwise identical over their\n"
         "common steps, else the first step and field that differ (loss, grad_norm, lr, tokens,\n"
         "parameter checksum) with both values and how the loss difference grows; with\n"
         "numerics.log (debug.numerics_trace), the first tensor, op or gradient that differs.\n"
         "\n"
         "  --tolerance REL  pass when loss, grad_norm and lr differ by at most REL relative\n"
         "                   (checksums are ignored: for runs on different hardware)\n"
         "  --json           print the same as one JSON object\n"
         "\n"
         "Exit codes: 0 identical (or within tolerance), 1 diverged, 2 no verdict: bad usage or\n"
         "input, or a failure such as out of memory.\n";
}

int run_compare(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    const CompareRequest request = parse_compare_args(args);
    if (request.help) {
      out << compare_usage();
      return check_result_written(out, err, kExitOk);
    }
    const Comparison c = compare_runs(request.runs[0], request.runs[1], request.tolerance);
    out << (request.json ? format_comparison_json(c) : format_comparison_text(c));
    return check_result_written(out, err, c.exit_code());
  } catch (const ConfigError& e) {
    out.flush();
    err << "titan-train compare: " << e.what() << "\n";
    if (!e.hint().empty()) err << "  hint: " << e.hint() << "\n";
    return kExitConfigError;
  } catch (const std::bad_alloc&) {
    out.flush();
    report_current_exception(err);  // "out of memory", but no verdict: never 1
    return kExitNoVerdict;
  } catch (const std::exception& e) {
    // A file that vanished or could not be read mid-way is still bad input, not a crash.
    out.flush();
    err << "titan-train compare: " << e.what() << "\n";
    return kExitNoVerdict;
  }
}

}  // namespace titan
