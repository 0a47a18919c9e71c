// TensorBoard event files, laid out as torchtitan lays them out:
// <dump_folder>/<save_tb_folder>/<YYYYmmdd-HHMM>/[rank_<N>/]events.out.tfevents.<unix time>.<host>
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "metrics/tfevents.h"
#include "util/files.h"

namespace titan {

// Whether rank `rank` writes event files: rank 0, or every rank with metrics.save_for_all_ranks.
bool rank_writes_tensorboard(const MetricsConfig& metrics, int64_t rank);

// The <YYYYmmdd-HHMM> folder a run writes its event files under, inside `tb_root`: a fresh run
// (resume_step 0) a new one named after `now_minute`; a resumed run the newest existing one, so
// that TensorBoard shows the resumed run as one continuous curve (a new one when none exists).
std::string choose_tensorboard_run_folder(const std::string& tb_root, int64_t resume_step,
                                          const std::string& now_minute);

// The current local time as "YYYYmmdd-HHMM".
std::string current_minute();

class TensorBoardWriter {
 public:
  // Opens a new event file in `folder` (created when missing, never through a final link) and
  // writes its file_version record. Event files already in `folder` keep their records of steps
  // up to `resume_step` (rewritten atomically; an old file left with none is removed), so the
  // resumed run's records follow on without a repeated step. The new file's name carries the
  // current unix time, or one more than the newest existing file's when that is later, so that
  // it sorts last. Throws RuntimeFailure (FileRefused for a planted link).
  TensorBoardWriter(const std::string& folder, int64_t resume_step);

  // Appends one Event holding `values` at `step`, in one write(2) of whole records (a run killed
  // between writes leaves a file every reader reads to its end). Throws RuntimeFailure.
  void write(int64_t step, const std::vector<SummaryValue>& values);

  const std::string& path() const { return file_.path(); }

 private:
  LineFile file_;
};

}  // namespace titan
