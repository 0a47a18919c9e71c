#include "util/error.h"

namespace titan {
namespace {

std::string compose(const std::string& where, const std::string& message) {
  return where.empty() ? message : where + ": " + message;
}

}  // namespace

ConfigError::ConfigError(const std::string& where, const std::string& message, const std::string& hint)
    : std::runtime_error(compose(where, message)), where_(where), message_(message), hint_(hint) {}

RuntimeFailure::RuntimeFailure(const std::string& message, const std::string& hint)
    : std::runtime_error(message), hint_(hint) {}

}  // namespace titan
