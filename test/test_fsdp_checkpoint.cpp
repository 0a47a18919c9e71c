// Sharded checkpoints (FSDP): the shard files' format (lib/checkpoint/sharded_checkpoint.h)
// written and read in this process, and through the binary with 2 and 4 ranks: each rank saves
// its own rows, the manifest records the mesh, and what is loaded or exported is the whole model.
#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "catch_torch.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/sharded_checkpoint.h"
#include "test_ranks.h"
#include "test_util.h"
#include "util/error.h"
#include "util/strings.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using test::kHsdp;
using test::kReplicate;
using test::train_ranks;

// The start of a shell script that launches 2 ranks of the debugmodel run into `dir`/out, saving
// a full checkpoint every 2 steps (`extra` adds flags), each rank's output in `dir`/rank<R>.out
// and its pid in $p<R>. The sharded-save tests append what they do to the running ranks.
std::string launch_two_saving_ranks(const std::string& dir, const std::string& extra) {
  const std::string flags =
      test::tiny_run(dir + "/out", 400,
                     "--model.flavor debugmodel --checkpoint.enable true --checkpoint.interval 2 "
                     "--checkpoint.last_save_model_only false " +
                         extra);
  const int port = test::free_port();
  std::string script = "cd " + dir + "; ";
  for (int r = 0; r < 2; ++r) {
    script += "TITAN_MALLOC_TUNING=0 env " + test::rank_env(r, 2, port) + " " + test::binary() +
              " " + flags + " >rank" + std::to_string(r) + ".out 2>&1 & p" + std::to_string(r) +
              "=$!; ";
  }
  return script;
}

// Rank `position` of `ranks`'s rows of `whole`, FSDP's way: ceil(rows / ranks) rows a rank, the
// last ranks' rows cut short (or empty) where they run past the end.
RowsPiece rows_of(const std::string& name, const at::Tensor& whole, int64_t position,
                  int64_t ranks) {
  const int64_t total = whole.size(0);
  const int64_t per_rank = (total + ranks - 1) / ranks;
  const int64_t begin = std::min(position * per_rank, total);
  const int64_t end = std::min(begin + per_rank, total);
  return {name, whole.narrow(0, begin, end - begin), begin, total};
}

// One shard file's contents as RowAssembler reads them: `pieces` and their "rows" entries.
SafetensorsContents shard_part(const std::vector<RowsPiece>& pieces) {
  SafetensorsContents part;
  for (const auto& p : pieces) {
    part.tensors.push_back({p.name, p.rows});
    part.metadata["rows." + p.name] = std::to_string(p.begin) + " " + std::to_string(p.total);
  }
  return part;
}

TEST_CASE(
    "sharded checkpoint: 4 ranks' shard files of 5-, 7- and 4-row tensors (a rank holding "
    "padding only) load as the whole tensors, the manifest recording the mesh",
    "[checkpoint]") {
  const auto dir = test::temp_dir("shard_files");
  const std::vector<NamedTensor> model = {{"a.weight", at::randn({5, 3})},
                                          {"b.weight", at::randn({7})},
                                          {"c.weight", at::randn({4, 2, 2})}};
  std::vector<NamedTensor> moments;
  for (const auto& t : model) {
    moments.push_back({t.name + ".exp_avg", at::randn(t.tensor.sizes())});
    moments.push_back({t.name + ".exp_avg_sq", at::rand(t.tensor.sizes())});
  }
  const int64_t ranks = 4;
  begin_checkpoint_write(dir, 3);
  std::vector<CheckpointFile> files;
  for (int64_t p = 0; p < ranks; ++p) {
    CheckpointShard shard;
    shard.position = p;
    shard.shards = ranks;
    for (const auto& t : model) shard.model.push_back(rows_of(t.name, t.tensor, p, ranks));
    for (const auto& t : moments) shard.optimizer.push_back(rows_of(t.name, t.tensor, p, ranks));
    shard.optimizer_metadata = {{"format", "titan-train adamw 1"}, {"a.weight.step", "3"}};
    const auto written = write_checkpoint_shard(checkpoint_temp_folder(dir, 3), shard, {});
    files.insert(files.end(), written.begin(), written.end());
  }
  CheckpointContents c;
  c.step = 3;
  c.state.step = 3;
  c.world_size = 8;
  c.shards = ranks;
  c.replicas = 2;
  for (int64_t r = 1; r < 8; ++r) c.other_rank_states.push_back(c.state);
  finish_checkpoint_write(dir, c, files);

  const std::string folder = dir + "/step-3";
  CHECK_THAT(test::read_text(folder + "/manifest.txt"),
             Catch::Contains("\nmesh replicate 2 shard 4\n"));
  CHECK_FALSE(fs::exists(folder + "/model.safetensors"));
  const CheckpointContents loaded = load_checkpoint(folder, 5);
  CHECK(loaded.shards == 4);
  CHECK(loaded.replicas == 2);
  CHECK(loaded.state.step == 3);
  CHECK(loaded.optimizer_file == "optimizer.shard0.safetensors");
  REQUIRE(loaded.model.size() == model.size());
  for (size_t i = 0; i < model.size(); ++i) {
    CHECK(loaded.model[i].name == model[i].name);
    CHECK(at::equal(loaded.model[i].tensor, model[i].tensor));
  }
  REQUIRE(loaded.optimizer.size() == moments.size());
  for (size_t i = 0; i < moments.size(); ++i) {
    CHECK(loaded.optimizer[i].name == moments[i].name);
    CHECK(at::equal(loaded.optimizer[i].tensor, moments[i].tensor));
  }
  // The rows entries are the files' own; the optimizer's metadata is what full_checkpoint has.
  CHECK(loaded.optimizer_metadata ==
        SafetensorsMetadata{{"format", "titan-train adamw 1"}, {"a.weight.step", "3"}});

  // An FSDP rank of another degree keeps its rows of the weights and moments only (rank 2 of 3:
  // rows 4..5 of 5, 6..7 of 7, none of 4), knowing each tensor's whole row count.
  const CheckpointContents rows = load_checkpoint(folder, 0, RowShare{2, 3});
  REQUIRE(rows.optimizer.size() == moments.size());
  for (size_t i = 0; i < moments.size(); ++i) {
    INFO(moments[i].name);
    const RowsPiece expected = rows_of(moments[i].name, moments[i].tensor, 2, 3);
    CHECK(at::equal(rows.optimizer[i].tensor, expected.rows));
  }
  CHECK(rows.optimizer[4].tensor.size(0) == 0);
  REQUIRE(rows.model.size() == model.size());
  for (size_t i = 0; i < model.size(); ++i) {
    INFO(model[i].name);
    CHECK(at::equal(rows.model[i].tensor, rows_of(model[i].name, model[i].tensor, 2, 3).rows));
    CHECK(rows.model_total_rows.at(i) == model[i].tensor.size(0));
    CHECK(whole_model_shapes(rows)[i].tensor.sizes() == model[i].tensor.sizes());
  }
  CHECK(rows.files_checksum == loaded.files_checksum);

  // A rank reads only the shard files that hold some of its rows: a damaged byte in rank 3's
  // model file (rows 6 of 7 and 3 of 4) leaves ranks 0 of 4 and 0 of 2 loading as before, and is
  // named where a load needs that file.
  const std::string shard3 = folder + "/model.shard3.safetensors";
  std::string bytes = test::read_text(shard3);
  bytes[bytes.size() - 1] ^= 0x10;
  fs::remove(shard3);
  test::write_text(shard3, bytes);
  for (const RowShare share : {RowShare{0, 4}, RowShare{0, 2}}) {
    const CheckpointContents kept = load_checkpoint(folder, 0, share);
    for (size_t i = 0; i < model.size(); ++i) {
      INFO(model[i].name << " " << share.position << " of " << share.shards);
      CHECK(at::equal(kept.model[i].tensor,
                      rows_of(model[i].name, model[i].tensor, share.position, share.shards).rows));
    }
  }
  for (const RowShare share : {RowShare{3, 4}, RowShare{}}) {
    CHECK_THROWS_WITH(load_checkpoint(folder, 0, share),
                      Catch::Contains("model.shard3.safetensors: the contents do not match"));
  }

  // A manifest that lists one shard file less is damaged, named by the missing file.
  std::string manifest = test::read_text(folder + "/manifest.txt");
  const auto line = manifest.find("file model.shard3.safetensors");
  REQUIRE(line != std::string::npos);
  manifest.erase(line, manifest.find('\n', line) + 1 - line);
  fs::remove(folder + "/manifest.txt");
  test::write_text(folder + "/manifest.txt", manifest);
  CHECK_THROWS_WITH(load_checkpoint(folder),
                    Catch::Contains("model.shard3.safetensors: not listed in the manifest"));
}

TEST_CASE(
    "sharded checkpoint: rows missing, given twice, outside their tensor, without their entry, "
    "of another dtype or beyond what the files hold are refused, naming the file and tensor",
    "[checkpoint]") {
  const at::Tensor whole = at::arange(10, at::kFloat).reshape({5, 2});
  auto piece = [&](int64_t begin, int64_t rows, int64_t total) {
    return RowsPiece{"w", whole.narrow(0, begin, rows), begin, total};
  };
  auto assemble = [&](const std::vector<std::vector<RowsPiece>>& files) {
    RowAssembler assembler(1 << 20);
    for (size_t f = 0; f < files.size(); ++f)
      assembler.add(shard_part(files[f]), "shard" + std::to_string(f));
    return assembler.finish("the shards");
  };
  const auto whole_again = assemble({{piece(3, 2, 5)}, {piece(0, 3, 5)}});
  REQUIRE(whole_again.size() == 1);
  CHECK(at::equal(whole_again[0].tensor, whole));

  CHECK_THROWS_WITH(
      assemble({{piece(0, 2, 5)}, {piece(3, 2, 5)}}),
      Catch::Contains("the shards: tensor \"w\": no shard file holds its row 2 (of 5)"));
  CHECK_THROWS_WITH(assemble({{piece(0, 3, 5)}, {piece(2, 3, 5)}}),
                    Catch::Contains("shard1: tensor \"w\": rows 2..5 are given by another shard"));
  CHECK_THROWS_WITH(assemble({{piece(2, 3, 5)}, {piece(0, 3, 5)}}),
                    Catch::Contains("shard1: tensor \"w\": rows 0..3 are given by another shard"));
  CHECK_THROWS_WITH(assemble({{piece(3, 2, 4)}}),
                    Catch::Contains("shard0: tensor \"w\": rows 3..5 do not lie in its 4 rows"));
  CHECK_THROWS_WITH(assemble({{piece(0, 3, 5)}, {piece(3, 2, 6)}}),
                    Catch::Contains("shard1: tensor \"w\": its dtype or shape differs"));
  CHECK_THROWS_WITH(assemble({{piece(0, 2, int64_t(1) << 40)}}),
                    Catch::Contains("rows are more than the shard files hold"));

  RowAssembler assembler(1 << 20);
  SafetensorsContents no_entry;
  no_entry.tensors.push_back({"w", whole});
  CHECK_THROWS_WITH(assembler.add(no_entry, "shard0"),
                    Catch::Contains("shard0: tensor \"w\": its metadata \"rows.w\" is missing"));
  SafetensorsContents doubles = shard_part({piece(0, 3, 5)});
  doubles.tensors[0].tensor = doubles.tensors[0].tensor.to(at::kDouble);
  assembler.add(shard_part({piece(3, 2, 5)}), "shard0");
  CHECK_THROWS_WITH(assembler.add(doubles, "shard1"),
                    Catch::Contains("shard1: tensor \"w\": its dtype or shape differs"));
}

// The folder's file names, sorted.
std::vector<std::string> files_in(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE(
    "fsdp: each rank saves its own shards (one replica's under HSDP), the manifest records the "
    "mesh, the checkpoint exports as replication's byte for byte, and a damaged shard is named",
    "[distributed]") {
  const auto dir = test::temp_dir("fsdp_shard_files");
  // Step 2 a full save; step 3 the final, model-only save, gathered whole.
  const std::string args = test::tokens_dataset(dir) +
                           " --debug.batch_invariant true --training.global_batch_size 8"
                           " --checkpoint.enable true --checkpoint.interval 2";
  train_ranks(dir, "replicated", 2, args + kReplicate, 3);
  const std::string fsdp_log = train_ranks(dir, "fsdp", 2, args, 3);
  train_ranks(dir, "hsdp", 4, args + kHsdp, 3);
  CHECK_THAT(fsdp_log, Catch::Contains("/fsdp/checkpoint/step-2 (full, in 2 shards, "));

  const std::string fsdp = dir + "/fsdp/checkpoint/step-2";
  const std::vector<std::string> shard_files = {"config.toml",
                                                "manifest.txt",
                                                "model.shard0.safetensors",
                                                "model.shard1.safetensors",
                                                "optimizer.shard0.safetensors",
                                                "optimizer.shard1.safetensors",
                                                "train_state.bin",
                                                "train_state.rank1.bin"};
  CHECK(files_in(fsdp) == shard_files);
  CHECK_THAT(test::read_text(fsdp + "/manifest.txt"), Catch::Contains("mesh replicate 1 shard 2"));
  const std::string hsdp = dir + "/hsdp/checkpoint/step-2";
  CHECK(files_in(hsdp).size() == shard_files.size() + 2);  // train_state.rank2.bin, rank3.bin
  CHECK(fs::exists(hsdp + "/model.shard1.safetensors"));
  CHECK_FALSE(fs::exists(hsdp + "/model.shard2.safetensors"));
  CHECK_THAT(test::read_text(hsdp + "/manifest.txt"), Catch::Contains("mesh replicate 2 shard 2"));
  // Each rank wrote about half the model.
  const auto whole_bytes = fs::file_size(dir + "/replicated/checkpoint/step-2/model.safetensors");
  CHECK(fs::file_size(fsdp + "/model.shard1.safetensors") < whole_bytes * 6 / 10);

  // Exported (the whole model from the shards), the three are one file.
  for (const char* run : {"replicated", "fsdp", "hsdp"}) {
    const auto r = test::run_titan("export " + dir + "/" + run + "/checkpoint/step-2 -o " + dir +
                                   "/" + run + ".safetensors");
    INFO(run << ": " << r.output);
    CHECK(r.exit_code == 0);
  }
  const std::string expected = test::read_text(dir + "/replicated.safetensors");
  CHECK(test::read_text(dir + "/fsdp.safetensors") == expected);
  CHECK(test::read_text(dir + "/hsdp.safetensors") == expected);
  // The final, model-only save is whole: the same bytes as replication's.
  CHECK(test::read_text(dir + "/fsdp/checkpoint/step-3/model.safetensors") ==
        test::read_text(dir + "/replicated/checkpoint/step-3/model.safetensors"));

  // FSDP resumes from replication's whole checkpoint, each rank keeping its rows of the moments:
  // step 3 is the step the runs that went on took.
  fs::create_directories(dir + "/from_whole/checkpoint");
  fs::copy(dir + "/replicated/checkpoint/step-2", dir + "/from_whole/checkpoint/step-2");
  const std::string resumed = train_ranks(dir, "from_whole", 2, args, 3);
  CHECK_THAT(resumed, Catch::Contains("resumed from " + dir + "/from_whole/checkpoint/step-2"));
  const std::string step3 = test::fingerprint_step_lines(dir + "/fsdp/fingerprint.log");
  CHECK(test::fingerprint_step_lines(dir + "/from_whole/fingerprint.log") ==
        step3.substr(step3.find("\nstep 3 ") + 1));

  // A flipped byte in one rank's optimizer shard: a resume from it exits 1, naming the file.
  fs::remove_all(dir + "/fsdp/checkpoint/step-3");
  const std::string damaged = fsdp + "/optimizer.shard1.safetensors";
  std::string bytes = test::read_text(damaged);
  bytes[bytes.size() - 5] ^= 0x10;
  fs::remove(damaged);
  test::write_text(damaged, bytes);
  fs::create_directories(dir + "/resume_out");
  const auto ranks = test::run_ranks(dir + "/resume_out",
                                     test::same_args(2, test::tiny_run(dir + "/fsdp", 4, args)));
  // At the layout it was saved at, only rank 1 reads that file (it holds rank 1's rows): rank 1
  // names it, rank 0 names rank 1 gone. Both exit 1.
  INFO(ranks[0].output << ranks[1].output);
  CHECK(ranks[0].exit_code == 1);
  CHECK(ranks[1].exit_code == 1);
  CHECK_THAT(ranks[1].output, Catch::Contains("optimizer.shard1.safetensors: the contents do not "
                                              "match the manifest's checksum (damaged)"));
  CHECK_THAT(ranks[0].output, !Catch::Contains("optimizer.shard1.safetensors"));
}

TEST_CASE(
    "fsdp: a second SIGTERM during a sharded save aborts it on every rank: exit 143, no "
    "temporary folder, the previous checkpoint kept",
    "[distributed][checkpoint]") {
  // debugmodel: shard files of ~37 MB a rank, long enough to land the second signal inside the
  // save; a save that ends before the shell sees its folder is a missed moment (exit 0), so up
  // to 3 tries. Both ranks get the first signal, rank 1 alone the second: rank 1's shard write
  // stops, and rank 0, which saw one signal, abandons the save with it.
  std::string dir, output;
  for (int attempt = 0; attempt < 3; ++attempt) {
    dir = test::temp_dir("fsdp_abort");
    const std::string script =
        launch_two_saving_ranks(dir, "--checkpoint.keep_latest_k 0") +
        "for i in $(seq 1200); do grep -q '^step 3 ' out/fingerprint.log 2>/dev/null && break; "
        "sleep 0.05; done; kill -TERM $p0 $p1; "
        "while kill -0 $p0 2>/dev/null; do set -- out/checkpoint/.step-*.tmp; "
        "[ -e \"$1\" ] && break; done; kill -TERM $p1; "
        "wait $p0; echo \"rank0 $?\"; wait $p1; echo \"rank1 $?\"";
    output = test::run_shell(script).output;
    if (output != "rank0 0\nrank1 0\n") break;
  }
  const std::string out0 = test::read_text(dir + "/rank0.out");
  const std::string out1 = test::read_text(dir + "/rank1.out");
  INFO(output << out0 << out1);
  CHECK(output == "rank0 143\nrank1 143\n");
  std::smatch m;
  REQUIRE(std::regex_search(
      out0, m,
      std::regex(
          R"(a second SIGTERM aborted the save of step-(\d+) on rank 1; .* \(latest: step-(\d+)\))")));
  CHECK_THAT(out1, Catch::Contains("aborted the save of step-" + m[1].str()));
  for (const auto& entry : fs::directory_iterator(dir + "/out/checkpoint"))
    CHECK_FALSE(ends_with(entry.path().filename().string(), ".tmp"));
  const auto steps = list_checkpoints(dir + "/out/checkpoint").steps;
  REQUIRE_FALSE(steps.empty());
  CHECK(steps.back() == std::stoll(m[2]));
  CHECK(std::stoll(m[1]) > steps.back());
  // The kept checkpoint loads.
  CHECK(
      test::run_titan("export " + dir + "/out/checkpoint -o " + dir + "/w.safetensors").exit_code ==
      0);
}

TEST_CASE(
    "fsdp: a rank killed during a sharded save leaves no temporary folder: rank 0 removes it and "
    "exits naming the rank",
    "[distributed][checkpoint]") {
  // As above, up to 3 tries for a save that completed before the kill (step-N then exists).
  std::string dir, output, tmp;
  for (int attempt = 0; attempt < 3; ++attempt) {
    dir = test::temp_dir("fsdp_killed_save");
    const std::string script =
        launch_two_saving_ranks(dir, "--comm.train_timeout_seconds 60") +
        "while kill -0 $p0 2>/dev/null; do set -- out/checkpoint/.step-*.tmp; "
        "[ -e \"$1\" ] && break; done; kill -KILL $p1; echo \"$1\"; "
        "wait $p0; echo \"rank0 $?\"; wait $p1; echo \"rank1 $?\"";
    output = test::run_shell(script).output;
    tmp = output.substr(0, output.find('\n'));
    const std::string step =
        tmp.substr(tmp.find(".step-") + 6, tmp.find(".tmp") - tmp.find(".step-") - 6);
    if (!fs::exists(dir + "/out/checkpoint/step-" + step)) break;
  }
  const std::string out0 = test::read_text(dir + "/rank0.out");
  INFO(output << out0);
  CHECK_THAT(output, Catch::Contains("rank1 137"));
  CHECK_THAT(output, !Catch::Contains("rank0 0"));
  CHECK_THAT(out0, Catch::Contains("rank 1"));
  CHECK_FALSE(fs::exists(dir + "/" + tmp));
  for (const auto& entry : fs::directory_iterator(dir + "/out/checkpoint"))
    CHECK_FALSE(ends_with(entry.path().filename().string(), ".tmp"));
}

}  // namespace
}  // namespace titan
