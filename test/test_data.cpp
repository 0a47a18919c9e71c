// Data: tokenizer, the four sources, and the loader's determinism and resumable state.
#include <cmath>
#include <cstring>
#include <map>

#include "catch_torch.h"
#include "data/loader.h"
#include "data/sources.h"
#include "data/synthetic_text.h"
#include "test_util.h"
#include "tokenizer/byte_tokenizer.h"
#include "util/error.h"

using namespace titan;

namespace {

TrainingConfig dataset(const std::string& kind, const std::string& path = "") {
  TrainingConfig t;
  t.dataset = parse_enum<DatasetKind>(kind).value();
  t.dataset_path = path;
  return t;
}

std::shared_ptr<const TokenSource> source(const TrainingConfig& t, uint64_t seed = 1,
                                          int64_t window = 17, int64_t vocab = 2048) {
  return make_token_source(training_dataset(t), seed, window, vocab);
}

template <class T>
std::string pack(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace

TEST_CASE("data: byte tokenizer round-trips and adds BOS/EOS", "[data]") {
  ByteTokenizer tok;
  auto ids = tok.encode("hé!");
  CHECK(ids.front() == ByteTokenizer::kBos);
  CHECK(ids.back() == ByteTokenizer::kEos);
  CHECK(ids.size() == 2 + std::string("hé!").size());
  CHECK(tok.decode(ids) == "hé!");
}

TEST_CASE("data: synthetic text is a deterministic function of seed and index", "[data]") {
  SyntheticText a(7), b(7), c(8);
  CHECK(a.document(3) == b.document(3));
  CHECK(a.document(3) != a.document(4));
  CHECK(a.document(3) != c.document(3));
  CHECK(a.document(0).size() > 40);
}

TEST_CASE("data: synthetic text is predictable: bigram entropy well below unigram entropy",
          "[data]") {
  SyntheticText text(0);
  std::map<int, double> unigram;
  std::map<std::pair<int, int>, double> bigram;
  double n = 0;
  for (uint64_t d = 0; d < 300; ++d) {
    std::string s = text.document(d);
    for (size_t i = 1; i < s.size(); ++i) {
      unigram[static_cast<unsigned char>(s[i])] += 1;
      bigram[{static_cast<unsigned char>(s[i - 1]), static_cast<unsigned char>(s[i])}] += 1;
      n += 1;
    }
  }
  std::map<int, double> prev;
  for (auto& [k, c] : bigram) prev[k.first] += c;
  double h1 = 0, h2 = 0;
  for (auto& [k, c] : unigram) h1 -= c / n * std::log(c / n);
  for (auto& [k, c] : bigram) h2 -= c / n * std::log(c / prev[k.first]);
  CHECK(h1 > 2.5);       // nats: many different bytes
  CHECK(h2 < h1 - 0.5);  // but context predicts them
}

TEST_CASE("data: loader yields seq_len+1 windows, labels shifted by one", "[data]") {
  DataLoader loader(source(dataset("synthetic")), 2, 16);
  Batch b = loader.next();
  CHECK(b.inputs.sizes() == at::IntArrayRef({2, 16}));
  CHECK(at::equal(b.inputs.narrow(1, 1, 15), b.labels.narrow(1, 0, 15)));
  CHECK(b.inputs[0][0].item<int64_t>() == ByteTokenizer::kBos);
}

TEST_CASE("data: loader is deterministic for a seed and rank, and differs across them", "[data]") {
  auto batches = [](uint64_t seed, int64_t rank) {
    DataLoader loader(source(dataset("synthetic"), seed), 4, 32, rank, 2);
    std::vector<at::Tensor> out;
    for (int i = 0; i < 3; ++i) out.push_back(loader.next().inputs);
    return at::cat(out);
  };
  CHECK(at::equal(batches(5, 0), batches(5, 0)));
  CHECK_FALSE(at::equal(batches(5, 0), batches(6, 0)));
  CHECK_FALSE(at::equal(batches(5, 0), batches(5, 1)));
}

TEST_CASE("data: a loader restored to a saved state continues identically", "[data]") {
  auto src = source(dataset("synthetic"));
  DataLoader a(src, 3, 50);
  for (int i = 0; i < 4; ++i) a.next();
  LoaderState saved = a.state();
  auto expected = a.next().inputs;
  DataLoader b(src, 3, 50);
  b.load_state(saved);
  CHECK(b.state() == saved);
  CHECK(at::equal(b.next().inputs, expected));
}

TEST_CASE("data: text source splits paragraphs and re-loops with a new epoch", "[data]") {
  auto dir = test::temp_dir("text");
  test::write_text(dir + "/a.txt", "first paragraph\n\nsecond\n");
  test::write_text(dir + "/b.txt", "third");
  auto src = source(dataset("text", dir));
  CHECK(src->num_documents() == 3);
  ByteTokenizer tok;
  CHECK(tok.decode(src->document(2)) == "third");
  DataLoader loader(src, 1, 9);  // 10-token windows over 17 + 8 + 7 = 32 tokens
  for (int i = 0; i < 4; ++i) loader.next_window();
  CHECK(loader.state().epoch == 1);
}

TEST_CASE("data: jsonl source reads the text field with escapes, errors name file:line", "[data]") {
  auto dir = test::temp_dir("jsonl");
  auto good = test::write_text(
      dir + "/good.jsonl",
      "{\"id\": 1, \"meta\": {\"x\": [1, {\"y\": \"}\"}]}, \"text\": \"a\\nb \\u00e9 \\\"q\\\"\"}\n"
      "\n{\"text\": \"second\", \"timestamp\": null}\n");
  auto src = source(dataset("jsonl", good));
  REQUIRE(src->num_documents() == 2);
  ByteTokenizer tok;
  CHECK(tok.decode(src->document(0)) == "a\nb \xc3\xa9 \"q\"");
  auto bad = test::write_text(dir + "/bad.jsonl", "{\"text\": \"ok\"}\n{\"txt\": \"no\"}\n");
  CHECK_THROWS_WITH(source(dataset("jsonl", bad)),
                    Catch::Contains(bad + ":2") && Catch::Contains("no \"text\" field"));
}

TEST_CASE("data: token shards, raw uint16/uint32 and llm.c headers", "[data]") {
  auto dir = test::temp_dir("tokens");
  std::vector<uint16_t> raw16(40);
  for (size_t i = 0; i < raw16.size(); ++i) raw16[i] = static_cast<uint16_t>(1000 + i);
  test::write_text(dir + "/a.bin", pack(raw16));
  auto t = dataset("tokens", dir + "/a.bin");
  auto src = source(t, 0, 10);
  CHECK(src->num_documents() == 4);
  CHECK(src->document(1).front() == 1010);

  std::vector<int32_t> header(256, 0);
  header[0] = 20240801, header[1] = 7, header[2] = 12;
  std::vector<uint32_t> body(12, 70000);
  test::write_text(dir + "/llmc.bin", pack(header) + pack(body));
  auto llmc = source(dataset("tokens", dir + "/llmc.bin"), 0, 4, 128256);
  CHECK(llmc->num_documents() == 3);
  CHECK(llmc->document(2).back() == 70000);

  t.dataset_token_dtype = TokenDtype::kUint32;
  test::write_text(dir + "/odd.bin", std::string(6, '\1'));
  t.dataset_path = dir + "/odd.bin";
  CHECK_THROWS_WITH(source(t, 0, 1), Catch::Contains("not a multiple of 4 bytes"));
  CHECK_THROWS_WITH(
      source(dataset("tokens", dir + "/llmc.bin"), 0, 4, 2048),
      Catch::Contains("token id 70000") && Catch::Contains("outside the model vocabulary"));
}

TEST_CASE("data: missing path and too-small vocabulary are config errors", "[data]") {
  CHECK_THROWS_AS(source(dataset("text", "/nonexistent/data")), ConfigError);
  CHECK_THROWS_WITH(source(dataset("text", "/nonexistent/data")),
                    Catch::Contains("No such file or directory"));
  CHECK_THROWS_WITH(
      source(dataset("synthetic"), 1, 17, 100),
      Catch::Contains(
          "smaller than the vocabulary of the text's encoder (tokenized bytewise: 258)"));
}

namespace {

// Documents that encode to no tokens (a tokenizer without BOS/EOS on blank text).
class EmptyDocuments : public titan::TokenSource {
 public:
  uint64_t num_documents() const override { return 3; }
  std::vector<int32_t> document(uint64_t) const override { return {}; }
  std::string describe() const override { return "three empty documents"; }
};

}  // namespace

TEST_CASE("data: a rank whose every document is empty is a config error, not an endless loop",
          "[data]") {
  titan::DataLoader loader(std::make_shared<EmptyDocuments>(), 1, 4);
  CHECK_THROWS_WITH(loader.next(),
                    Catch::Contains("every document of rank 0 encodes to no tokens") &&
                        Catch::Contains("three empty documents"));
}
