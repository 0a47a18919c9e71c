// Include this instead of a Catch2 header, before any libtorch header.
//
// libtorch's c10/util/Logging.h defines a glog-style CHECK(cond) that aborts the process and is
// invisible to Catch. Whichever header comes last wins, so a test file that includes libtorch
// after Catch silently gets c10's CHECK. Including c10's logging first and dropping its CHECK
// makes every CHECK in the tests Catch's.
//
// Catch2 v2 (Debian bookworm, single header) and v3 (trixie, a compiled library) are both
// supported: with v3 the v2 spellings the tests use (Approx, Catch::Contains, StartsWith,
// EndsWith, Equals, Matches) are provided on top of v3's names.
#pragma once

#include <c10/util/Logging.h>
#undef CHECK

#if defined(TITAN_CATCH2_V3)  // set by test/CMakeLists.txt from the Catch2 CMake found
#include <catch2/catch_all.hpp>
#include <string>

using Catch::Approx;
namespace Catch {
using Matchers::EndsWith;
using Matchers::Equals;
using Matchers::Matches;
using Matchers::StartsWith;
inline Matchers::StringContainsMatcher Contains(const std::string& text,
                                                CaseSensitive sensitivity = CaseSensitive::Yes) {
  return Matchers::ContainsSubstring(text, sensitivity);
}
}  // namespace Catch
#define TITAN_SKIP(message)                    \
  do {                                         \
    titan::test::note_skipped();               \
    SKIP("titan-test-skipped: " << (message)); \
  } while (0)
#else
#include <catch2/catch.hpp>
// Catch2 v2 has no SKIP: the test ends with a warning that the console reporter shows, and ctest
// reports it skipped from that marker (test/CMakeLists.txt: SKIP_REGULAR_EXPRESSION), not passed.
#define TITAN_SKIP(message)                    \
  do {                                         \
    titan::test::note_skipped();               \
    WARN("titan-test-skipped: " << (message)); \
    return;                                    \
  } while (0)
#endif

namespace titan::test {
// Records that the running test case skipped (TITAN_SKIP): a process whose every test case
// skipped exits 77, which ctest reports skipped (test_main.cpp).
void note_skipped();
}  // namespace titan::test
