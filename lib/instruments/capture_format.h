// A captured step on disk (debug.capture_steps, instruments/step_capture.h), read back by
// `titan-train replay` (train/replay.h). <dump_folder>/capture/step<N>/ holds
//   state/step-<N-1>/   a full checkpoint of the state before step N (checkpoint_io.h): model,
//                       optimizer, RNG; its data position is already past step N's batch
//   batch.safetensors   the step's micro-batches: "inputs.<m>" and "labels.<m>", (B, T) int64
//   trace.txt           what the step computed (format_capture_record): loss, grad_norm, every
//                       top-level op's output checksum and norm, each gradient's checksum, and
//                       the float64 reference's loss, grad_norm and each op's added error
//   machine.txt         what decides bits beyond the config ("key value" lines)
//   config.toml         the run's resolved config
//   manifest.txt        written last: the capture format, titan-train's version, the step, and
//                       every other file with its size and checksum (hash_bytes); of state/ it
//                       lists the checkpoint's own manifest, which lists the checkpoint's files
// The folder is written as .step<N>.tmp/ and renamed into place: it is complete or absent.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "data/loader.h"
#include "instruments/precision_report.h"

namespace titan {

constexpr int kCaptureFormat = 2;  // 2: the manifest covers state/

// The files (and the state folder) of a capture, spelled here only: the writer, the manifest and
// the reader name them through capture_path.
enum class CaptureFile { kState, kBatch, kTrace, kMachine, kConfig, kManifest };
const char* capture_file_name(CaptureFile file);  // "state", "batch.safetensors", ...
// `capture`/<the file's name>.
std::string capture_path(const std::string& capture, CaptureFile file);

struct CapturedOp {
  int64_t micro_batch = 0;
  int64_t block = 0;
  int64_t index = 0;  // among the block's top-level ops
  std::string name, dtype, shape;
  uint64_t checksum = 0;  // of the output's bytes
  double norm = 0;        // of the output, in float64
  RelativeError added;    // the op alone against float64, on this side's machine
};

struct CapturedGradient {
  std::string name;
  uint64_t checksum = 0;
};

// One side of a comparison: what a step computed on one machine and build.
struct CaptureRecord {
  int64_t step = 0;
  std::string dtype;  // "float32" or "bfloat16"
  double loss = 0, grad_norm = 0;
  double reference_loss = 0, reference_grad_norm = 0;  // the float64 execution's
  bool reexecution_bitwise = true;  // the capture's execution gave the run's loss and grad_norm
  std::vector<CapturedOp> ops;      // in execution order
  std::vector<CapturedGradient> gradients;
};

CaptureRecord capture_record_of(const PrecisionReport& report);

// trace.txt's text, and its inverse. Doubles are written as hex floats (exact). parse throws
// ConfigError naming `source`:line for anything it cannot read.
std::string format_capture_record(const CaptureRecord& record);
CaptureRecord parse_capture_record(const std::string& text, const std::string& source);

// machine.txt's "key value" lines as a map (comment lines left out); parse throws ConfigError
// naming `source`:line for a line without a key.
std::map<std::string, std::string> parse_machine_description(const std::string& text,
                                                             const std::string& source);

// batch.safetensors's tensors, and back. parse throws ConfigError naming `source` when a
// micro-batch is missing, not int64 (B, T), or its inputs and labels differ in shape.
std::vector<NamedTensor> batch_tensors(const std::vector<Batch>& batches);
std::vector<Batch> batches_of(const std::vector<NamedTensor>& tensors, const std::string& source);

// "step<N>": a capture's folder name.
std::string capture_folder_name(int64_t step);

// The checkpoint of the state before step `step`: `capture`/state/step-<step-1>.
std::string capture_state_folder(const std::string& capture, int64_t step);

// Writes <folder>/manifest.txt listing the capture's files and the state checkpoint's manifest
// (capture_state_folder(folder, step)), each with its size and checksum, fsynced. Throws
// RuntimeFailure.
void write_capture_manifest(const std::string& folder, int64_t step);

// What check_capture_folder found.
struct CaptureManifest {
  int64_t step = 0;
  std::string titan_version;  // of the build that captured it
};

// Checks `folder` against its manifest before anything else is read: the format, titan-train's
// major version (this build's), every listed file present, regular, of its size and checksum,
// no file of the capture left out and none listed that is not one (the state checkpoint's
// manifest included: a state/ from another run or step is refused here). Throws ConfigError (exit
// 2) naming the file and what is wrong, with a hint.
CaptureManifest check_capture_folder(const std::string& folder);

}  // namespace titan
