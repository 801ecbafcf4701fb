// Tokenizer throughput: load time of tokenizer.json and encode/decode speed on one core.
//
//   tokenizer_bench [TOKENIZER_DIR] [TEXT_FILE]
//
// TOKENIZER_DIR defaults to tests/data/tokenizer/deepseek-v3. Without TEXT_FILE the text is the
// llama.cpp test vectors and the extra encodings (mixed scripts, code, emoji, whitespace)
// repeated to about 4 MB. Reported: load seconds (best of 3), encode MB/s with the word cache
// warm (repeated text) and cold (a fresh thread on ~1 MB of distinct words: every vocab token),
// encode MB/s for many small calls (one per line), and decode MB/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

#ifndef DSINFER_TOKENIZER_DATA
#define DSINFER_TOKENIZER_DATA "tests/data/tokenizer"
#endif

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the calling thread: steadier than wall time on a shared machine.
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

struct Timer {
  double wall = now(), cpu = cpu_now();
  double wall_s() const { return now() - wall; }
  double cpu_s() const { return cpu_now() - cpu; }
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) dsinfer::fail("cannot open ", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool valid_utf8(std::string_view s) {
  std::string out;
  return dsinfer::utf8_lossy_append(s, out, true) == s.size() && out == s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string dir = argc > 1 ? argv[1] : DSINFER_TOKENIZER_DATA "/deepseek-v3";
    // Load (best of 3).
    double best_load = 1e9, best_load_cpu = 1e9;
    std::optional<dsinfer::Tokenizer> tok;
    for (int i = 0; i < 3; ++i) {
      tok.reset();
      const Timer timer;
      tok.emplace(dsinfer::Tokenizer::load(dir));
      best_load = std::min(best_load, timer.wall_s());
      best_load_cpu = std::min(best_load_cpu, timer.cpu_s());
    }
    const dsinfer::Tokenizer& t = *tok;
    std::printf("tokenizer: %s\n", dir.c_str());
    std::printf("load: %.3f s wall, %.3f s cpu (best of 3), vocab %lld ids\n", best_load,
                best_load_cpu, static_cast<long long>(t.vocab_size()));

    // Text.
    std::vector<std::string> lines;
    if (argc > 2) {
      std::istringstream in(read(argv[2]));
      for (std::string line; std::getline(in, line);) lines.push_back(line + "\n");
    } else {
      const std::string inp =
          read(DSINFER_TOKENIZER_DATA "/deepseek-v3/ggml-vocab-deepseek-v3.gguf.inp");
      const std::string sep = "\n__ggml_vocab_test__\n";
      size_t start = 0;
      for (size_t at = inp.find(sep); at != std::string::npos; at = inp.find(sep, start)) {
        lines.push_back(inp.substr(start, at - start) + "\n");
        start = at + sep.size();
      }
      std::istringstream in(
          read(DSINFER_TOKENIZER_DATA "/deepseek-v3/extra-encodings.generated.jsonl"));
      for (std::string line; std::getline(in, line);) {
        if (!line.empty())
          lines.push_back(nlohmann::json::parse(line)["text"].get<std::string>() + "\n");
      }
    }
    std::string unit;
    for (const auto& l : lines) unit += l;
    std::string text;
    while (text.size() < (4u << 20)) text += unit;
    const double mb = double(text.size()) / 1e6;

    // Encode, warm cache (first call fills it, the timed ones hit it).
    std::vector<int32_t> ids = t.encode(text, false);
    double best = 1e9, best_cpu = 1e9;
    for (int i = 0; i < 3; ++i) {
      const Timer timer;
      ids = t.encode(text, false);
      best = std::min(best, timer.wall_s());
      best_cpu = std::min(best_cpu, timer.cpu_s());
    }
    std::printf(
        "encode (one %.1f MB string, %zu ids, %.2f bytes/id, warm word cache): %.1f MB/s wall, "
        "%.1f MB/s cpu\n",
        mb, ids.size(), double(text.size()) / double(ids.size()), mb / best, mb / best_cpu);

    // Encode, many small calls.
    {
      size_t bytes = 0, calls = 0;
      const Timer timer;
      while (bytes < (2u << 20)) {
        for (const auto& l : lines) {
          bytes += l.size();
          ++calls;
          (void)t.encode(l, false);
        }
      }
      const double w = timer.wall_s(), c = timer.cpu_s();
      std::printf(
          "encode (%zu small calls of %.0f bytes on average): %.1f MB/s wall, %.1f MB/s cpu\n",
          calls, double(bytes) / double(calls), double(bytes) / 1e6 / w, double(bytes) / 1e6 / c);
    }

    // Encode, cold cache: every vocab token that is valid UTF-8, space-separated, in a new thread.
    {
      std::string words;
      for (int32_t id = 0; id < int32_t(t.vocab_size()); ++id) {
        auto b = t.token_bytes(id);
        if (b && valid_utf8(*b) && !t.is_special(id)) {
          words += *b;
          words += ' ';
        }
      }
      double w = 0, c = 0;
      size_t n = 0;
      std::thread th([&] {
        const Timer timer;
        n = t.encode(words, false).size();
        w = timer.wall_s(), c = timer.cpu_s();
      });
      th.join();
      const double wmb = double(words.size()) / 1e6;
      std::printf(
          "encode (%.1f MB of distinct words, %zu ids, cold word cache, fresh thread): %.1f MB/s "
          "wall, %.1f MB/s cpu\n",
          wmb, n, wmb / w, wmb / c);
    }

    // Decode.
    {
      best = 1e9, best_cpu = 1e9;
      std::string back;
      for (int i = 0; i < 3; ++i) {
        const Timer timer;
        back = t.decode(ids, false);
        best = std::min(best, timer.wall_s());
        best_cpu = std::min(best_cpu, timer.cpu_s());
      }
      if (back != text) dsinfer::fail("decode(encode(text)) != text");
      std::printf("decode (%zu ids): %.1f MB/s wall, %.1f MB/s cpu, round trip ok\n", ids.size(),
                  mb / best, mb / best_cpu);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
