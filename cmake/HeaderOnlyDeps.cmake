# fmt and toml++ as header-only libraries, for machines that have their headers but not their
# shared libraries (scripts/gpu_check.sh carries the headers from Debian packages unpacked by
# scripts/gpu_deps.sh). Defines the targets the build links, fmt::fmt and
# tomlplusplus::tomlplusplus, without their packages' CMake files: those name libfmt.so and
# libtomlplusplus.so, which such a machine does not have.
find_path(TITAN_FMT_INCLUDE_DIR fmt/format.h REQUIRED)
find_path(TITAN_TOML_INCLUDE_DIR toml++/toml.h REQUIRED)

add_library(fmt::fmt INTERFACE IMPORTED)
set_target_properties(fmt::fmt PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${TITAN_FMT_INCLUDE_DIR}"
  INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)

add_library(tomlplusplus::tomlplusplus INTERFACE IMPORTED)
set_target_properties(tomlplusplus::tomlplusplus PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${TITAN_TOML_INCLUDE_DIR}"
  INTERFACE_COMPILE_DEFINITIONS "TOML_HEADER_ONLY=1")
message(STATUS "titan-train: fmt (${TITAN_FMT_INCLUDE_DIR}) and toml++ (${TITAN_TOML_INCLUDE_DIR}) header-only")
