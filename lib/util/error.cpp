#include "util/error.h"

#include <c10/util/Exception.h>

#include <ostream>

namespace titan {
namespace {

std::string compose(const std::string& where, const std::string& message) {
  return where.empty() ? message : where + ": " + message;
}

}  // namespace

ConfigError::ConfigError(const std::string& where, const std::string& message,
                         const std::string& hint)
    : std::runtime_error(compose(where, message)), where_(where), message_(message), hint_(hint) {}

RuntimeFailure::RuntimeFailure(const std::string& message, const std::string& hint)
    : std::runtime_error(message), hint_(hint) {}

int report_current_exception(std::ostream& err) {
  auto print = [&](const char* kind, const std::string& message, const std::string& hint) {
    err << "titan-train: " << kind << ": " << message << "\n";
    if (!hint.empty()) err << "  hint: " << hint << "\n";
  };
  try {
    throw;
  } catch (const ConfigError& e) {
    print("config error", e.what(), e.hint());
    return kExitConfigError;
  } catch (const StoppedBySignal& e) {
    err << "titan-train: " << e.what() << "\n";
    return 128 + e.signal();
  } catch (const CheckFailure& e) {
    err << e.details();
    print("check failed", e.what(), e.hint());
    return kExitCheckFailed;
  } catch (const RuntimeFailure& e) {
    print("error", e.what(), e.hint());
    return kExitRuntimeError;
  } catch (const c10::Error& e) {
    print("error", e.what_without_backtrace(), "");
    return kExitRuntimeError;
  } catch (const std::exception& e) {
    print("error", e.what(), "");
    return kExitRuntimeError;
  } catch (...) {
    print("error", "unknown exception", "");
    return kExitRuntimeError;
  }
}

}  // namespace titan
