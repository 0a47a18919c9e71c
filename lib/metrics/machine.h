// What decides a step's bits beyond the config and fingerprint.log's header: the CPU's
// instruction sets, ATen's CPU capability, OpenBLAS's kernel choice by environment, and on CUDA
// the runtime and cuDNN versions. A capture's machine.txt holds these lines after the header's
// (instruments/step_capture.h); `titan-train replay` lists the keys whose values differ.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace titan {

// "key value" lines, one per fact, each ending in a newline.
std::string machine_details(const c10::Device& device);

}  // namespace titan
