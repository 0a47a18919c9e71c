// comm.backend and the NCCL path, as far as a machine without a GPU reaches them: which group a
// world forms, which CUDA device each rank takes, NCCL's environment, a real Gloo group of one
// process, and (in a build with NCCL) the NCCL group up to the point where it needs a GPU; with
// a GPU, a one-process NCCL group sums on the device.
#include <torch/cuda.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "catch_torch.h"
#include "distributed/process_group.h"
#include "test_util.h"
#include "util/build_info.h"
#include "util/error.h"

namespace titan {
namespace {

const c10::Device kCpu(c10::kCPU);
const c10::Device kCuda0(c10::kCUDA, 0);

std::string config_error_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.where() + ": " + e.message() + " (" + e.hint() + ")";
  }
  return "no ConfigError";
}

WorldInfo local_world(int64_t rank, int64_t size) {
  WorldInfo w;
  w.rank = rank;
  w.world_size = size;
  w.local_rank = rank;
  w.local_world_size = size;
  return w;
}

// Sets an environment variable for one scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("comm: auto is no group for one process, nccl on CUDA and gloo on CPU for several",
          "[distributed]") {
  CHECK(choose_backend(CommBackend::kAuto, 1, kCpu, false) == GroupBackend::kSingle);
  CHECK(choose_backend(CommBackend::kAuto, 1, kCuda0, true) == GroupBackend::kSingle);
  CHECK(choose_backend(CommBackend::kAuto, 2, kCpu, true) == GroupBackend::kGloo);
  CHECK(choose_backend(CommBackend::kAuto, 2, kCuda0, true) == GroupBackend::kNccl);
  // An explicit backend forms its group even for one process.
  CHECK(choose_backend(CommBackend::kGloo, 1, kCpu, false) == GroupBackend::kGloo);
  CHECK(choose_backend(CommBackend::kNccl, 1, kCuda0, true) == GroupBackend::kNccl);
}

TEST_CASE("comm: nccl without CUDA or NCCL, and gloo on CUDA, are refused naming comm.backend",
          "[distributed]") {
  CHECK_THAT(config_error_text([] { choose_backend(CommBackend::kNccl, 2, kCpu, true); }),
             Catch::StartsWith("comm.backend: \"nccl\" needs a CUDA device"));
  CHECK_THAT(config_error_text([] { choose_backend(CommBackend::kAuto, 2, kCuda0, false); }),
             Catch::StartsWith("comm.backend: this titan-train was built without NCCL"));
  CHECK_THAT(config_error_text([] { choose_backend(CommBackend::kGloo, 2, kCuda0, true); }),
             Catch::StartsWith("comm.backend: \"gloo\" does not sum CUDA tensors"));
}

TEST_CASE("comm: each local rank takes its own CUDA device, and two ranks never share one",
          "[distributed]") {
  CHECK(cuda_device_for(local_world(0, 1), 1) == 0);
  CHECK(cuda_device_for(local_world(3, 4), 8) == 3);
  // Each process shown one device of its own (Slurm --gpus-per-task=1): device 0 everywhere.
  CHECK(cuda_device_for(local_world(1, 2), 1) == 0);
  CHECK_THAT(config_error_text([] { cuda_device_for(local_world(1, 4), 2); }),
             Catch::StartsWith("training.device: 4 processes on this node (LOCAL_WORLD_SIZE) but "
                               "this process sees 2 CUDA devices: two ranks would share one"));
  // Whatever the launcher did, the ranks' device ids (host and PCI bus) must differ.
  CHECK(shared_device_conflict({"a GPU 0000:01:00.0", "a GPU 0000:02:00.0", "b GPU 0000:01:00.0"})
            .empty());
  CHECK(shared_device_conflict({"a GPU 0000:01:00.0", "b GPU 1", "a GPU 0000:01:00.0"}) ==
        "ranks 0 and 2 both train on a GPU 0000:01:00.0");
}

TEST_CASE(
    "comm: NCCL gets blocking waits, and with debug.deterministic a fixed algorithm, and the "
    "user's values win",
    "[distributed]") {
  {
    ScopedEnv wait("TORCH_NCCL_BLOCKING_WAIT", nullptr), algo("NCCL_ALGO", nullptr),
        proto("NCCL_PROTO", nullptr);
    CHECK(apply_nccl_environment(false) ==
          std::vector<std::string>{"TORCH_NCCL_BLOCKING_WAIT=1 (set by titan-train)"});
    CHECK(std::string(std::getenv("TORCH_NCCL_BLOCKING_WAIT")) == "1");
    CHECK(std::getenv("NCCL_ALGO") == nullptr);
    CHECK(apply_nccl_environment(true) ==
          std::vector<std::string>{"TORCH_NCCL_BLOCKING_WAIT=1 (kept from the environment)",
                                   "NCCL_ALGO=Ring (set by titan-train)",
                                   "NCCL_PROTO=Simple (set by titan-train)"});
    CHECK(std::string(std::getenv("NCCL_PROTO")) == "Simple");
  }
  {
    ScopedEnv wait("TORCH_NCCL_BLOCKING_WAIT", "0"), algo("NCCL_ALGO", "Tree"),
        proto("NCCL_PROTO", nullptr);
    // Without deterministic, a user's NCCL_ALGO is still reported: it orders the sums.
    CHECK(apply_nccl_environment(false) ==
          std::vector<std::string>{"TORCH_NCCL_BLOCKING_WAIT=0 (kept from the environment)",
                                   "NCCL_ALGO=Tree (kept from the environment)"});
    CHECK(std::string(std::getenv("NCCL_ALGO")) == "Tree");
  }
}

TEST_CASE(
    "comm: backend gloo with one process trains through a real Gloo group, bit for bit as "
    "without one",
    "[distributed]") {
  const std::string plain = test::temp_dir("comm_plain"), gloo = test::temp_dir("comm_gloo");
  auto a = test::run_titan(test::tiny_run(plain, 3));
  REQUIRE(a.exit_code == 0);
  auto b = test::run_titan_env("MASTER_PORT=" + std::to_string(test::free_port()),
                               test::tiny_run(gloo, 3, "--comm.backend gloo"));
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  CHECK_THAT(b.output, Catch::Contains("rank 0 of 1 (local rank 0 of 1, launcher none): gloo"));
  CHECK(test::read_text(plain + "/fingerprint.log") == test::read_text(gloo + "/fingerprint.log"));
}

TEST_CASE("comm: nccl on the CPU, and an unknown backend, are exit 2 before any output",
          "[distributed]") {
  const std::string dir = test::temp_dir("comm_refused");
  auto r = test::run_titan(test::tiny_run(dir, 2, "--comm.backend nccl"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("comm.backend: \"nccl\" needs a CUDA device"));
  auto bad = test::run_titan(test::tiny_run(dir, 2, "--comm.backend mpi"));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("comm.backend"));
  CHECK_THAT(bad.output, Catch::Contains("nccl"));
  CHECK_FALSE(std::filesystem::exists(dir + "/fingerprint.log"));
}

TEST_CASE("comm: a CUDA build has the NCCL group, which needs a GPU and with one sums there",
          "[distributed][cuda]") {
  CHECK(nccl_compiled_in() == kCudaCompiledIn);
  if (!nccl_compiled_in()) TITAN_SKIP("SKIPPED: this build has no NCCL (a CPU libtorch)");
  WorldInfo world = local_world(0, 1);
  world.master_port = test::free_port();
  CommConfig comm;
  comm.init_timeout_seconds = 30;
  if (!torch::cuda::is_available()) {
    // The rendezvous with itself works; c10d then refuses NCCL without a GPU, and the message
    // names what failed instead of ending the process.
    try {
      make_process_group(world, comm, GroupBackend::kNccl, kCuda0, false);
      FAIL("an NCCL group was built without a GPU");
    } catch (const RuntimeFailure& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("building the NCCL group failed"));
    }
    return;
  }
  auto group = make_process_group(world, comm, GroupBackend::kNccl, kCuda0, true);
  CHECK(group->backend() == "nccl");
  CHECK(group->numerics_settings() == "nccl NCCL_ALGO=Ring NCCL_PROTO=Simple");
  at::Tensor t = at::arange(1, 4, at::TensorOptions(at::kFloat).device(kCuda0));
  group->all_reduce_sum(t, "the test's all-reduce");
  CHECK(at::equal(t.cpu(), at::arange(1, 4, at::kFloat)));
  CHECK(group->any_rank(true, "the test's flag"));
  CHECK_FALSE(group->any_rank(false, "the test's flag"));
}

}  // namespace titan
