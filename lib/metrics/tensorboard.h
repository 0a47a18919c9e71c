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

// A run resumed after `resume_step`: every event file under `tb_root` (each <YYYYmmdd-HHMM>
// folder and its rank_<N> folders, links not followed) keeps its records of steps up to
// `resume_step` and loses the rest, whichever ranks wrote them and whether this run writes any:
// TensorBoard then shows no step of the abandoned part of the run. Damaged records are left out;
// the returned warnings name them. Throws RuntimeFailure when a file cannot be rewritten.
std::vector<std::string> cut_tensorboard_history(const std::string& tb_root, int64_t resume_step);

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
  // Damaged records left out of the old event files (see cut_tensorboard_history).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<std::string> warnings_;  // before file_: its initializer fills them
  LineFile file_;
};

}  // namespace titan
