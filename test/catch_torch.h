// Include this instead of <catch2/catch.hpp>, before any libtorch header.
//
// libtorch's c10/util/Logging.h defines a glog-style CHECK(cond) that aborts the process and is
// invisible to Catch. Whichever header comes last wins, so a test file that includes libtorch
// after Catch silently gets c10's CHECK. Including c10's logging first and dropping its CHECK
// makes every CHECK in the tests Catch's.
#pragma once

#include <c10/util/Logging.h>
#undef CHECK
#include <catch2/catch.hpp>
