// TensorBoard's event-file format, written by hand: TFRecord framing around Event protobufs
// holding scalar and histogram summaries. These few messages (Event, Summary, Summary.Value,
// HistogramProto) are encoded directly in the protobuf wire format rather than through
// libprotobuf: the encoding is ~100 lines, and generated code would add a compiler, a runtime
// library and TensorBoard's .proto files to every build leg (the CUDA one included). The tests
// decode every record with Google's protobuf runtime (test/test_tensorboard.py) instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan {

// CRC-32C (Castagnoli), as TFRecord uses it; crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t n);
// TFRecord's masked CRC: rotate right by 15, add 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t n);

// One record: uint64 length (little-endian), its masked CRC, the data, the data's masked CRC.
std::string frame_record(const std::string& data);

// A histogram as TensorBoard's HistogramProto holds it: bucket i counts the values in
// (bucket_limit[i-1], bucket_limit[i]] (the first from min).
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
  double non_finite = 0;  // values left out (inf, NaN); not part of the proto
};

// A summary value: a scalar (simple_value, float32 as TensorBoard stores it) or a histogram.
struct SummaryValue {
  std::string tag;
  bool is_histogram = false;
  float scalar = 0;
  Histogram histogram;
};

// The first record of every event file: an Event with file_version "brain.Event:2".
std::string encode_file_version_event(double wall_time);
// An Event at `step` whose summary holds `values`.
std::string encode_summary_event(double wall_time, int64_t step,
                                 const std::vector<SummaryValue>& values);

// The records of an event file's contents, in order, each one's Event step (0 when absent) and
// its framed bytes. A record whose data fails its CRC (a flipped byte) is left out and its offset
// listed in `damaged`; reading goes on after it, as its length is intact. Reading stops at a
// record cut short or whose length fails its CRC (a run killed mid-write, a damaged tail): what
// follows cannot be framed. `end` is the offset where it stopped; `complete` says whether that is
// the end of the input.
struct EventRecord {
  int64_t step = 0;
  std::string framed;
};
struct EventRecords {
  std::vector<EventRecord> records;
  std::vector<size_t> damaged;
  size_t end = 0;
  bool complete = true;
};
EventRecords read_event_records(const std::string& contents);

}  // namespace titan
