// A serving benchmark client for any OpenAI-compatible server (dsinfer serve, llama-server, vLLM):
// what vLLM's benchmark_serving measures. N clients (a closed loop: each sends its next request
// when the last one ends) stream chat completions of fixed length (ignore_eos) and record time to
// first token (TTFT), time per output token after it (TPOT), inter-token latency (ITL, between
// SSE content chunks) and throughput. `--shared-prefix N` gives every prompt the same first N
// words (a system prompt), so a server with prefix reuse prefills only the rest.
//
//   build/serve_bench --port 8000 --model story --concurrency 1,4,8,16 --requests 32
//                     --prompt-words 64 --max-tokens 32 [--shared-prefix 48] [--json]
//
// `--conversations U` runs the multi-turn workload instead (what agents and chat apps send): U
// users, each a chat of --turns T turns (its whole history resent each turn, the answers as the
// server gave them) after one system prompt of --system-words P words that every user shares;
// user u starts u x --stagger-ms after the first, so the users' turns interleave. Per turn index:
// TTFT, TPOT, prompt tokens, the tokens the server says it reused (usage.prompt_tokens_details.
// cached_tokens) and what an ideal cache would have reused: the longest prefix the turn's prompt
// (the server's own /tokenize of its messages) shares with any request sent before it, extended
// by that request's answer where it had finished and its whole prompt is a prefix (an upper
// bound: the answer's tokens as re-read from the template may differ). Then the server's KV
// usage from /metrics. (The server must run with prefix reuse, the default.)
//
//   build/serve_bench --port 8000 --conversations 8 --turns 4 --system-words 300
//                     --turn-words 24 --max-tokens 24 [--stagger-ms 300] [--json]
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
  int conversations = 0;  // > 0: the multi-turn workload
  int turns = 4;
  int system_words = 300;
  int turn_words = 24;
  int stagger_ms = 300;
  // --response-format JSON: every request carries it (structured output's cost beside TPOT)
  json response_format;
};

struct Sample {
  double ttft = 0, e2e = 0;
  int tokens = 0;           // completion tokens (from usage)
  std::vector<double> itl;  // between content chunks
  bool ok = false;
  int64_t prompt_tokens = 0, cached_tokens = 0;  // from usage
  std::string text;                              // the answer's content
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

// One streamed chat completion of `messages`.
Sample stream_chat(const Options& o, const json& messages) {
  Sample s;
  httplib::Client client(o.host, o.port);
  client.set_read_timeout(600, 0);
  json body = {{"messages", messages}, {"max_tokens", o.max_tokens},
               {"temperature", 0},     {"ignore_eos", true},
               {"stream", true},       {"stream_options", {{"include_usage", true}}}};
  if (!o.model.empty()) body["model"] = o.model;
  if (!o.response_format.is_null()) body["response_format"] = o.response_format;
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
      if (j.contains("usage") && j["usage"].is_object()) {
        const json& usage = j["usage"];
        s.tokens = usage.value("completion_tokens", 0);
        s.prompt_tokens = usage.value("prompt_tokens", int64_t{0});
        if (usage.contains("prompt_tokens_details") && usage["prompt_tokens_details"].is_object())
          s.cached_tokens = usage["prompt_tokens_details"].value("cached_tokens", int64_t{0});
      }
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const json& delta = j["choices"][0].value("delta", json::object());
      const bool text = (delta.contains("content") && delta["content"].is_string() &&
                         !delta["content"].get<std::string>().empty()) ||
                        delta.contains("reasoning_content");
      if (!text) continue;
      if (delta.contains("content") && delta["content"].is_string())
        s.text += delta["content"].get<std::string>();
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

Sample one_request(const Options& o, int index) {
  return stream_chat(
      o, json::array({{{"role", "user"},
                       {"content", prompt_text(o.prompt_words, o.shared_prefix, index)}}}));
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

// The server's own token ids of a chat prompt (POST /tokenize); empty on failure.
std::vector<int32_t> tokenize(const Options& o, const json& messages) {
  httplib::Client client(o.host, o.port);
  client.set_read_timeout(600, 0);
  const auto res =
      client.Post("/tokenize", json{{"messages", messages}}.dump(), "application/json");
  if (!res || res->status != 200) return {};
  const json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("tokens")) return {};
  return j["tokens"].get<std::vector<int32_t>>();
}

// One value of the server's Prometheus text (/metrics), or -1.
double metric(const Options& o, const std::string& name) {
  httplib::Client client(o.host, o.port);
  const auto res = client.Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::stringstream in(res->body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

struct Turn {
  int user = 0, turn = 0;
  double sent = 0, finished = 0;  // since the run's start
  std::vector<int32_t> prompt;    // the server's ids of the turn's prompt
  Sample s;
  int64_t ideal = 0;  // what an ideal cache would reuse
};

// What an ideal cache reuses for `t`: the longest prefix shared with a request sent before t (its
// prompt may be cached by the time t is admitted), plus that request's answer where it finished
// before t was sent and its whole prompt is a prefix of t's; at most all of t's prompt but its
// last token (which must run to give the first new token). An upper bound of what any cache
// could reuse.
int64_t ideal_reuse(const Turn& t, const std::vector<Turn>& all) {
  int64_t best = 0;
  const int64_t n = static_cast<int64_t>(t.prompt.size());
  for (const Turn& e : all) {
    if (&e == &t || e.prompt.empty() || e.sent >= t.sent) continue;
    const int64_t m = static_cast<int64_t>(e.prompt.size());
    int64_t common = 0;
    while (common < std::min(n, m) && t.prompt[common] == e.prompt[common]) ++common;
    if (common == m && e.s.ok && e.finished <= t.sent)
      common += std::min<int64_t>(e.s.tokens, n - common);
    best = std::max(best, common);
  }
  return std::min(best, n - 1);
}

json run_conversations(const Options& o) {
  // (a number of this run first: a server that kept an earlier run's blocks must not find them,
  // or it would reuse more than this run's ideal)
  const std::string system = "session " + std::to_string(std::random_device{}() % 1000000) + ". " +
                             prompt_text(o.system_words, o.system_words, 0);
  std::vector<Turn> turns(static_cast<size_t>(o.conversations * o.turns));
  const double t0 = now();
  std::vector<std::thread> users;
  for (int u = 0; u < o.conversations; ++u)
    users.emplace_back([&, u] {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(static_cast<int64_t>(u) * o.stagger_ms));
      json messages = json::array({{{"role", "system"}, {"content", system}}});
      for (int k = 0; k < o.turns; ++k) {
        Turn& t = turns[static_cast<size_t>(u * o.turns + k)];
        t.user = u;
        t.turn = k;
        messages.push_back({{"role", "user"},
                            {"content", prompt_text(o.turn_words, 0, 1000003ull * (u + 1) + k)}});
        t.prompt = tokenize(o, messages);
        t.sent = now() - t0;
        t.s = stream_chat(o, messages);
        t.finished = now() - t0;
        if (!t.s.ok) return;
        messages.push_back({{"role", "assistant"}, {"content", t.s.text}});
      }
    });
  for (std::thread& t : users) t.join();
  const double seconds = now() - t0;
  json per_turn = json::array();
  int64_t all_cached = 0, all_ideal = 0, all_prompt = 0, failed = 0, tokens = 0;
  for (int k = 0; k < o.turns; ++k) {
    std::vector<double> ttft, tpot;
    int64_t cached = 0, ideal = 0, prompt = 0;
    for (Turn& t : turns) {
      if (t.turn != k) continue;
      if (!t.s.ok) {
        ++failed;
        continue;
      }
      t.ideal = ideal_reuse(t, turns);
      ttft.push_back(t.s.ttft);
      if (t.s.tokens > 1) tpot.push_back((t.s.e2e - t.s.ttft) / (t.s.tokens - 1));
      cached += t.s.cached_tokens;
      ideal += t.ideal;
      prompt += t.s.prompt_tokens;
      tokens += t.s.tokens;
    }
    all_cached += cached;
    all_ideal += ideal;
    all_prompt += prompt;
    per_turn.push_back({{"turn", k + 1},
                        {"ttft_mean_ms", 1e3 * mean(ttft)},
                        {"ttft_p90_ms", 1e3 * percentile(ttft, 0.9)},
                        {"tpot_mean_ms", 1e3 * mean(tpot)},
                        {"prompt_tokens", prompt},
                        {"cached_tokens", cached},
                        {"ideal_cached_tokens", ideal}});
  }
  return {{"conversations", o.conversations},
          {"turns", o.turns},
          {"failed", failed},
          {"seconds", seconds},
          {"output_token_throughput", static_cast<double>(tokens) / seconds},
          {"prompt_tokens", all_prompt},
          {"cached_tokens", all_cached},
          {"ideal_cached_tokens", all_ideal},
          {"hit_of_ideal", all_ideal > 0 ? static_cast<double>(all_cached) / all_ideal : 1.0},
          {"kv_used_positions", metric(o, "dsinfer_kv_cache_used_positions")},
          {"kv_used_bytes", metric(o, "dsinfer_kv_cache_used_bytes")},
          {"per_turn", per_turn}};
}

void print_conversations(const json& r) {
  std::printf("turn  TTFT mean/p90 ms   TPOT ms  prompt tok  reused  ideal reuse\n");
  for (const json& t : r["per_turn"])
    std::printf("%4d %8.1f %8.1f %9.1f %11lld %7lld %12lld\n", t["turn"].get<int>(),
                t["ttft_mean_ms"].get<double>(), t["ttft_p90_ms"].get<double>(),
                t["tpot_mean_ms"].get<double>(),
                static_cast<long long>(t["prompt_tokens"].get<int64_t>()),
                static_cast<long long>(t["cached_tokens"].get<int64_t>()),
                static_cast<long long>(t["ideal_cached_tokens"].get<int64_t>()));
  std::printf(
      "%d users x %d turns in %.1f s, %lld failed: reused %lld of %lld prompt tokens, "
      "%.3f of the ideal %lld; KV in use after: %.0f positions (%.1f MB)\n",
      r["conversations"].get<int>(), r["turns"].get<int>(), r["seconds"].get<double>(),
      static_cast<long long>(r["failed"].get<int64_t>()),
      static_cast<long long>(r["cached_tokens"].get<int64_t>()),
      static_cast<long long>(r["prompt_tokens"].get<int64_t>()), r["hit_of_ideal"].get<double>(),
      static_cast<long long>(r["ideal_cached_tokens"].get<int64_t>()),
      r["kv_used_positions"].get<double>(), r["kv_used_bytes"].get<double>() / 1e6);
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
      else if (a == "--conversations")
        o.conversations = std::stoi(value());
      else if (a == "--turns")
        o.turns = std::stoi(value());
      else if (a == "--system-words")
        o.system_words = std::stoi(value());
      else if (a == "--turn-words")
        o.turn_words = std::stoi(value());
      else if (a == "--stagger-ms")
        o.stagger_ms = std::stoi(value());
      else if (a == "--response-format") {
        o.response_format = json::parse(value(), nullptr, false);
        if (!o.response_format.is_object()) {
          std::fprintf(stderr, "error: --response-format needs a JSON object\n");
          return 2;
        }
      } else if (a == "--help" || a == "-h") {
        std::printf(
            "serve_bench [--host H] [--port P] [--model M] [--concurrency 1,4,8,16] [--requests "
            "N]\n"
            "            [--prompt-words W] [--shared-prefix S] [--max-tokens T] [--json]\n"
            "            [--response-format JSON] (each request's response_format: structured\n"
            "            output's cost per token, against a run without it)\n"
            "serve_bench [--host H] [--port P] [--model M] --conversations U [--turns T]\n"
            "            [--system-words P] [--turn-words W] [--stagger-ms MS] [--max-tokens T]"
            " [--json]\n"
            "  (the multi-turn workload: U users x T turns after a shared system prompt)\n");
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
  if (o.conversations < 0 || o.turns < 1 || o.system_words < 1 || o.turn_words < 1 ||
      o.stagger_ms < 0) {
    std::fprintf(stderr,
                 "error: --conversations, --stagger-ms must be >= 0 and --turns, --system-words, "
                 "--turn-words positive\n");
    return 2;
  }
  if (o.conversations > 0) {
    const json r = run_conversations(o);
    if (o.as_json)
      std::printf("%s\n", r.dump(2).c_str());
    else
      print_conversations(r);
    return r["failed"].get<int64_t>() == 0 ? 0 : 1;
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
