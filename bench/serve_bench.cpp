// A serving benchmark client for any OpenAI-compatible server (dsinfer serve, llama-server, vLLM):
// what vLLM's benchmark_serving measures. N clients (a closed loop: each sends its next request
// when the last one ends) stream chat completions of fixed length (ignore_eos) and record time to
// first token (TTFT), time per output token after it (TPOT), inter-token latency (ITL, between
// SSE content chunks) and throughput. `--shared-prefix N` gives every prompt the same first N
// words (a system prompt), so a server with prefix reuse prefills only the rest.
//
//   build/serve_bench --port 8000 --model story --concurrency 1,4,8,16 --requests 32
//                     --prompt-words 64 --max-tokens 32 [--shared-prefix 48] [--json]
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using json = nlohmann::json;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Options {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model;
  std::vector<int> concurrency = {1, 4, 8, 16};
  int requests = 32;
  int prompt_words = 64;
  int shared_prefix = 0;
  int max_tokens = 32;
  bool as_json = false;
};

struct Sample {
  double ttft = 0, e2e = 0;
  int tokens = 0;           // completion tokens (from usage)
  std::vector<double> itl;  // between content chunks
  bool ok = false;
};

const char* kWords[] = {"the", "old",   "man", "walked", "slowly", "down",  "road",
                        "to",  "house", "and", "he",     "was",    "tired", "after",
                        "a",   "long",  "day", "in",     "fields", "sun"};

std::string prompt_text(int words, int shared, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s;
  for (int i = 0; i < words; ++i) {
    // the first `shared` words are the same for every request
    const uint64_t pick = i < shared ? static_cast<uint64_t>(i * 7 + 3) : rng();
    s += kWords[pick % (sizeof kWords / sizeof kWords[0])];
    s += ' ';
  }
  return s;
}

Sample one_request(const Options& o, int index) {
  Sample s;
  httplib::Client client(o.host, o.port);
  client.set_read_timeout(600, 0);
  json body = {{"messages",
                json::array({{{"role", "user"},
                              {"content", prompt_text(o.prompt_words, o.shared_prefix, index)}}})},
               {"max_tokens", o.max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!o.model.empty()) body["model"] = o.model;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string buffer;
  double last = 0;
  const double start = now();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
      const std::string event = buffer.substr(0, end);
      if (event.rfind("data: {", 0) != 0) continue;
      const json j = json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("usage") && j["usage"].is_object())
        s.tokens = j["usage"].value("completion_tokens", 0);
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const json& delta = j["choices"][0].value("delta", json::object());
      const bool text = (delta.contains("content") && delta["content"].is_string() &&
                         !delta["content"].get<std::string>().empty()) ||
                        delta.contains("reasoning_content");
      if (!text) continue;
      const double t = now();
      if (last == 0)
        s.ttft = t - start;
      else
        s.itl.push_back(t - last);
      last = t;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err;
  s.ok = client.send(req, res, err) && res.status == 200;
  s.e2e = now() - start;
  return s;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

json run(const Options& o, int concurrency) {
  std::vector<Sample> samples(static_cast<size_t>(o.requests));
  std::atomic<int> next{0};
  const double t0 = now();
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c)
    clients.emplace_back([&] {
      for (int i; (i = next++) < o.requests;) samples[static_cast<size_t>(i)] = one_request(o, i);
    });
  for (std::thread& t : clients) t.join();
  const double seconds = now() - t0;
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t tokens = 0, failed = 0;
  for (const Sample& s : samples) {
    if (!s.ok) {
      ++failed;
      continue;
    }
    ttft.push_back(s.ttft);
    e2e.push_back(s.e2e);
    if (s.tokens > 1) tpot.push_back((s.e2e - s.ttft) / (s.tokens - 1));
    itl.insert(itl.end(), s.itl.begin(), s.itl.end());
    tokens += s.tokens;
  }
  return {{"concurrency", concurrency},
          {"requests", o.requests},
          {"failed", failed},
          {"seconds", seconds},
          {"request_throughput", static_cast<double>(o.requests - failed) / seconds},
          {"output_token_throughput", static_cast<double>(tokens) / seconds},
          {"ttft_mean_ms", 1e3 * mean(ttft)},
          {"ttft_p50_ms", 1e3 * percentile(ttft, 0.5)},
          {"ttft_p99_ms", 1e3 * percentile(ttft, 0.99)},
          {"tpot_mean_ms", 1e3 * mean(tpot)},
          {"itl_p50_ms", 1e3 * percentile(itl, 0.5)},
          {"itl_p99_ms", 1e3 * percentile(itl, 0.99)},
          {"e2e_mean_ms", 1e3 * mean(e2e)}};
}

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--host")
        o.host = value();
      else if (a == "--port")
        o.port = std::stoi(value());
      else if (a == "--model")
        o.model = value();
      else if (a == "--concurrency")
        o.concurrency = int_list(value());
      else if (a == "--requests")
        o.requests = std::stoi(value());
      else if (a == "--prompt-words")
        o.prompt_words = std::stoi(value());
      else if (a == "--shared-prefix")
        o.shared_prefix = std::stoi(value());
      else if (a == "--max-tokens")
        o.max_tokens = std::stoi(value());
      else if (a == "--json")
        o.as_json = true;
      else if (a == "--help" || a == "-h") {
        std::printf(
            "serve_bench [--host H] [--port P] [--model M] [--concurrency 1,4,8,16] [--requests "
            "N]\n"
            "            [--prompt-words W] [--shared-prefix S] [--max-tokens T] [--json]\n");
        return 0;
      } else {
        std::fprintf(stderr, "error: unknown option %s (see --help)\n", a.c_str());
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "error: %s needs a number\n", a.c_str());
      return 2;
    }
  }
  if (o.requests < 1 || o.max_tokens < 1 || o.prompt_words < 1 || o.concurrency.empty()) {
    std::fprintf(
        stderr,
        "error: --requests, --max-tokens, --prompt-words and --concurrency must be positive\n");
    return 2;
  }
  json all = json::array();
  if (!o.as_json)
    std::printf(
        "conc  req/s   tok/s   TTFT mean/p50/p99 ms      TPOT ms  ITL p50/p99 ms   failed\n");
  for (int c : o.concurrency) {
    const json r = run(o, c);
    all.push_back(r);
    if (!o.as_json)
      std::printf("%4d %6.2f %7.2f %8.1f %8.1f %8.1f %9.1f %7.1f %7.1f %6lld\n", c,
                  r["request_throughput"].get<double>(), r["output_token_throughput"].get<double>(),
                  r["ttft_mean_ms"].get<double>(), r["ttft_p50_ms"].get<double>(),
                  r["ttft_p99_ms"].get<double>(), r["tpot_mean_ms"].get<double>(),
                  r["itl_p50_ms"].get<double>(), r["itl_p99_ms"].get<double>(),
                  static_cast<long long>(r["failed"].get<int64_t>()));
    std::fflush(stdout);
  }
  if (o.as_json) std::printf("%s\n", all.dump(2).c_str());
  return 0;
}
