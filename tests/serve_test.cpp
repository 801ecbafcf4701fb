// dsinfer serve end to end: the binary started on a free port with the story model, spoken to
// over HTTP (cpp-httplib's client). Greedy chat content equals the reference's generate.py
// transcript for the same message, byte for byte; a stream's deltas add up to the same text;
// concurrent clients get their solo answers (batch invariance); stop strings are never emitted;
// bad requests get OpenAI-shaped errors with their status and the server keeps serving; SIGTERM
// ends it with status 0.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <tuple>

#include "json_schema_validator.h"
#include "parallel/free_port.h"
#include "raw_client.h"
#include "story_server.h"
#include "test_support.h"

extern char** environ;

namespace dsinfer::serve_test {
namespace {

using json = nlohmann::json;

using Served = test::StoryServer;

json chat_body(const std::string& user, int max_tokens, bool stream = false) {
  return {{"model", "story"},
          {"messages", json::array({{{"role", "user"}, {"content", user}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", stream}};
}

// The content deltas of an SSE body, and whether it ended with [DONE].
std::string stream_content(const std::string& body, bool* done, std::string* finish = nullptr) {
  std::string text;
  *done = false;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      *done = true;
      break;
    }
    const json j = json::parse(data);
    for (const json& c : j["choices"]) {
      if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
      if (finish && !c["finish_reason"].is_null()) *finish = c["finish_reason"];
    }
  }
  return text;
}

// "Prompt: P\nCompletion: C\n\n" pairs of the reference transcript.
std::vector<std::pair<std::string, std::string>> transcript(const std::string& stdout_text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t at = 0;
  while ((at = stdout_text.find("Prompt: ", at)) != std::string::npos) {
    const size_t nl = stdout_text.find("\nCompletion: ", at);
    const size_t end = stdout_text.find("\n\n", nl);
    out.emplace_back(stdout_text.substr(at + 8, nl - at - 8),
                     stdout_text.substr(nl + 13, end - nl - 13));
    at = end;
  }
  return out;
}

TEST(Serve, GreedyChatIsTheReferenceTranscriptStreamedOrNot) {
  Served server;
  const json golden =
      json::parse(test::read_file(test::data_path("golden/tiny-v3-story/chat-mp1-fp32.json")));
  const int max_new = golden["max_new_tokens"];
  const auto pairs = transcript(golden["batch"]["stdout"]);
  ASSERT_GE(pairs.size(), 3u);
  for (const auto& [prompt, completion] : pairs) {
    auto r = server.post("/v1/chat/completions", chat_body(prompt, max_new).dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["choices"][0]["message"]["content"], completion) << prompt;
    EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
    auto s = server.post("/v1/chat/completions", chat_body(prompt, max_new, true).dump());
    ASSERT_TRUE(s);
    bool done = false;
    EXPECT_EQ(stream_content(s->body, &done), completion) << prompt;
    EXPECT_TRUE(done);
    // no cache and no proxy buffering may hold the events back
    EXPECT_EQ(s->get_header_value("Content-Type").rfind("text/event-stream", 0), 0u);
    EXPECT_EQ(s->get_header_value("Cache-Control"), "no-cache");
    EXPECT_EQ(s->get_header_value("X-Accel-Buffering"), "no");
  }
}

TEST(Serve, ConcurrentClientsGetTheirSoloAnswers) {
  Served server;
  std::vector<std::string> prompts;
  for (int i = 0; i < 8; ++i)
    prompts.push_back("Story number " + std::to_string(i) + " begins here.");
  std::vector<std::string> solo;
  json sampled_body;
  for (const std::string& p : prompts) {
    json b = chat_body(p, 12);
    b["temperature"] = 0.8;
    b["seed"] = 7;
    solo.push_back(json::parse(
        server.post("/v1/chat/completions", b.dump())->body)["choices"][0]["message"]["content"]);
  }
  std::vector<std::future<std::string>> got;
  for (int round = 0; round < 2; ++round)
    for (const std::string& p : prompts)
      got.push_back(std::async(std::launch::async, [&, p] {
        json b = chat_body(p, 12, /*stream=*/true);
        b["temperature"] = 0.8;
        b["seed"] = 7;
        auto r = server.post("/v1/chat/completions", b.dump());
        bool done = false;
        return r ? stream_content(r->body, &done)
                 : "(no response: " + httplib::to_string(r.error()) + ")";
      }));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].get(), solo[i % prompts.size()]) << i;
}

// --mtp on: speculative decoding changes no answer (greedy: the reference's; sampled and
// concurrent: what a server without it gives), and /metrics counts the drafts.
TEST(Serve, MtpChangesNoAnswerAndMetricsCountItsDrafts) {
  std::vector<std::string> prompts;
  for (int i = 0; i < 4; ++i)
    prompts.push_back("Story number " + std::to_string(i) + " begins here.");
  auto sampled = [](const std::string& p, bool stream) {
    json b = chat_body(p, 16, stream);
    b["temperature"] = 0.7;
    b["seed"] = 11;
    return b.dump();
  };
  std::vector<std::string> plain;
  {
    Served server;
    for (const std::string& p : prompts)
      plain.push_back(json::parse(server.post("/v1/chat/completions", sampled(p, false))
                                      ->body)["choices"][0]["message"]["content"]);
  }
  Served server({"--mtp", "on"});
  const json golden =
      json::parse(test::read_file(test::data_path("golden/tiny-v3-story/chat-mp1-fp32.json")));
  for (const auto& [prompt, completion] : transcript(golden["batch"]["stdout"])) {
    auto r =
        server.post("/v1/chat/completions", chat_body(prompt, golden["max_new_tokens"]).dump());
    ASSERT_TRUE(r);
    EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], completion) << prompt;
  }
  std::vector<std::future<std::string>> got;
  for (const std::string& p : prompts)
    got.push_back(std::async(std::launch::async, [&, p] {
      auto r = server.post("/v1/chat/completions", sampled(p, true));
      bool done = false;
      return r ? stream_content(r->body, &done)
               : "(no response: " + httplib::to_string(r.error()) + ")";
    }));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].get(), plain[i]) << i;
  auto m = server.client().Get("/metrics");
  ASSERT_TRUE(m);
  const size_t at = m->body.find("\ndsinfer_mtp_draft_tokens_total ");
  ASSERT_NE(at, std::string::npos) << m->body;
  EXPECT_GT(std::stod(m->body.substr(at + 32)), 10);
}

TEST(Serve, StopStringsEndTheTextAndAreNeverSent) {
  Served server;
  json b = chat_body("He looked at the letter for a long time before he said anything.", 40);
  const std::string full = json::parse(
      server.post("/v1/chat/completions", b.dump())->body)["choices"][0]["message"]["content"];
  const size_t cut = full.find(" little");
  ASSERT_NE(cut, std::string::npos) << full;
  b["stop"] = json::array({" little", "never appears"});
  json j = json::parse(server.post("/v1/chat/completions", b.dump())->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], full.substr(0, cut));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  b["stream"] = true;
  bool done = false;
  std::string finish;
  EXPECT_EQ(stream_content(server.post("/v1/chat/completions", b.dump())->body, &done, &finish),
            full.substr(0, cut));
  EXPECT_EQ(finish, "stop");
  // a stop string ends a request normally: /metrics counted these two as cancelled
  const std::string metrics = server.client().Get("/metrics")->body;
  EXPECT_CONTAINS(metrics, "\ndsinfer_requests_finished_total 3\n");
  EXPECT_CONTAINS(metrics, "\ndsinfer_requests_cancelled_total 0\n");
}

// What clients and browsers expect of an OpenAI-style server beyond the completions: CORS (a
// preflight got 404 and no answer named an allowed origin, so browser chat pages could not call
// it), GET /v1/models/{id} (openai.models.retrieve got 404), 405 for the wrong method (404), a
// bearer scheme in any case, response ids that do not restart at chatcmpl-0 every launch, and
// a new sample for each unseeded request.
TEST(Serve, CorsModelRetrievalMethodsAndIdsAreWhatClientsExpect) {
  Served server({"--api-key", "k", "--allowed-origins", "*"});
  const httplib::Headers key = {{"Authorization", "bearer k"}};  // lowercase scheme
  httplib::Client c = server.client();
  auto pre = c.Options("/v1/chat/completions",
                       {{"Origin", "https://chat.example"},
                        {"Access-Control-Request-Method", "POST"},
                        {"Access-Control-Request-Headers", "authorization, content-type"}});
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_CONTAINS(pre->get_header_value("Access-Control-Allow-Methods"), "POST");
  EXPECT_CONTAINS(pre->get_header_value("Access-Control-Allow-Headers"), "authorization");
  // /props: the context, defaults and limits, behind the key like the API
  EXPECT_EQ(c.Get("/props")->status, 401);
  auto props = c.Get("/props", key);
  ASSERT_TRUE(props);
  ASSERT_EQ(props->status, 200) << props->body;
  const json p = json::parse(props->body);
  EXPECT_EQ(p["model"], "story");
  EXPECT_GT(p["max_model_len"].get<int64_t>(), 0);
  EXPECT_EQ(p["limits"]["n"], 16);
  EXPECT_GT(p["kv_cache"]["budget_positions"].get<int64_t>(), 0);
  EXPECT_EQ(c.Post("/props", key, "{}", "application/json")->status, 405);
  // X-Request-Id: the client's own, else the response's id; usage counts reasoning tokens
  httplib::Headers traced = key;
  traced.emplace("X-Request-Id", "trace-42");
  auto t = c.Post("/v1/chat/completions", traced, chat_body("hi", 2).dump(), "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->get_header_value("X-Request-Id"), "trace-42");
  auto u = c.Post("/v1/chat/completions", key, chat_body("hi", 2).dump(), "application/json");
  ASSERT_TRUE(u);
  const json uj = json::parse(u->body);
  EXPECT_EQ(u->get_header_value("X-Request-Id"), uj["id"]);
  EXPECT_EQ(uj["usage"]["completion_tokens_details"]["reasoning_tokens"], 0);
  httplib::Headers browser = key;
  browser.emplace("Origin", "https://chat.example");
  auto r = c.Post("/v1/chat/completions", browser, chat_body("hi", 2).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*");
  const std::string id1 = json::parse(r->body)["id"];
  const std::string id2 =
      json::parse(server.post("/v1/chat/completions", chat_body("hi", 2).dump(), key)->body)["id"];
  EXPECT_NE(id1, id2);
  EXPECT_EQ(id1.rfind("chatcmpl-", 0), 0u) << id1;
  EXPECT_NE(id1, "chatcmpl-0");
  auto model = c.Get("/v1/models/story", key);
  EXPECT_EQ(model->status, 200) << model->body;
  EXPECT_EQ(json::parse(model->body)["id"], "story");
  auto other = c.Get("/v1/models/gpt-4", key);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(json::parse(other->body)["error"]["code"], "model_not_found");
  auto get = c.Get("/v1/chat/completions", key);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  auto post = c.Post("/health", "", "application/json");
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET");
  // "regenerate" without a seed: another sample each time (a fixed default seed repeated it)
  json hot = chat_body("Once upon a time", 24);
  hot["temperature"] = 1.5;
  std::set<std::string> answers;
  for (int i = 0; i < 3; ++i)
    answers.insert(json::parse(server.post("/v1/chat/completions", hot.dump(), key)
                                   ->body)["choices"][0]["message"]["content"]
                       .get<std::string>());
  EXPECT_GT(answers.size(), 1u);
  // another launch: other ids
  Served again;
  const std::string id3 =
      json::parse(again.post("/v1/chat/completions", chat_body("hi", 2).dump())->body)["id"];
  EXPECT_NE(id3.substr(0, 18), id1.substr(0, 18)) << id1 << " " << id3;
}

// Without --allowed-origins no other origin's page may call the API: a preflight names none.
TEST(Serve, NoOriginIsAllowedByDefault) {
  Served server;
  auto pre = server.client().Options(
      "/v1/chat/completions",
      {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(pre);
  EXPECT_FALSE(pre->has_header("Access-Control-Allow-Origin"));
  httplib::Headers browser = {{"Origin", "https://evil.example"}};
  auto r = server.client().Post("/v1/chat/completions", browser, chat_body("hi", 2).dump(),
                                "application/json");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
}

// --allowed-origins: only the listed origins are named back (and the answer varies by Origin)
TEST(Serve, AllowedOriginsAreTheOnlyOnesNamed) {
  Served server({"--allowed-origins", "https://a.example", "https://b.example"});
  httplib::Client c = server.client();
  auto a = c.Get("/v1/models", {{"Origin", "https://b.example"}});
  EXPECT_EQ(a->get_header_value("Access-Control-Allow-Origin"), "https://b.example");
  EXPECT_EQ(a->get_header_value("Vary"), "Origin");
  auto other = c.Get("/v1/models", {{"Origin", "https://evil.example"}});
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
}

TEST(Serve, BadRequestsGetOpenAiErrorsAndTheServerGoesOn) {
  Served server({"--api-key", "sekrit", "--max-body", "4096"});
  const httplib::Headers key = {{"Authorization", "Bearer sekrit"}};
  auto expect_error = [&](const httplib::Result& r, int status, const std::string& needle) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    const json j = json::parse(r->body);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r->body;
    EXPECT_TRUE(j["error"].contains("type"));
  };
  expect_error(server.post("/v1/chat/completions", chat_body("hi", 3).dump()), 401, "API key");
  expect_error(server.post("/v1/chat/completions", chat_body("hi", 3).dump(),
                           {{"Authorization", "Bearer wrong"}}),
               401, "API key");
  expect_error(server.post("/v1/chat/completions", "{bad", key), 400, "not valid JSON");
  json b = chat_body("hi", 3);
  b["model"] = "gpt-4";
  expect_error(server.post("/v1/chat/completions", b.dump(), key), 404, "does not exist");
  b = chat_body("hi", 3);
  b["n"] = 17;
  expect_error(server.post("/v1/chat/completions", b.dump(), key), 400, "n must be at most 16");
  b = chat_body("hi", 3);
  b["best_of"] = 3;
  expect_error(server.post("/v1/chat/completions", b.dump(), key), 400, "best_of");
  b = chat_body("hi", 3);
  b["temperature"] = "hot";
  expect_error(server.post("/v1/chat/completions", b.dump(), key), 400, "temperature");
  b = chat_body("hi", 1 << 20);
  expect_error(server.post("/v1/chat/completions", b.dump(), key), 400, "context");
  b = chat_body("hi", 3);
  b["messages"][0]["role"] = "robot";
  expect_error(server.post("/v1/chat/completions", b.dump(), key), 400, "role");
  for (const auto& [field, value, needle] : std::vector<std::tuple<std::string, json, std::string>>{
           {"frequency_penalty", 2.5, "frequency_penalty must be between -2 and 2"},
           {"presence_penalty", "x", "presence_penalty must be a number"},
           {"repetition_penalty", 0, "repetition_penalty must be between"},
           {"min_p", 1.5, "min_p must be between 0 and 1"},
           {"min_tokens", 4, "min_tokens (4) must be at most max_tokens (3)"},
           {"logit_bias", json{{"abc", 1}}, "logit_bias keys must be token ids"},
           {"logit_bias", json{{"99999999", 1}}, "logit_bias keys must be token ids"},
           {"logit_bias", json{{"5", 101}}, "between -100 and 100"},
           {"logit_bias", json::array({1}), "logit_bias must be an object"},
           {"stop_token_ids", json::array({-1}), "stop_token_ids must be token ids"}}) {
    b = chat_body("hi", 3);
    b[field] = value;
    expect_error(server.post("/v1/chat/completions", b.dump(), key), 400, needle);
  }
  expect_error(
      server.post("/v1/chat/completions", chat_body(std::string(5000, 'x'), 3).dump(), key), 413,
      "max-body");
  expect_error(server.client().Get("/v1/nothing", key), 404, "no such endpoint");
  // and it still answers
  EXPECT_EQ(server.client().Get("/health")->status, 200) << "/health needs no key";
  auto ok = server.post("/v1/chat/completions", chat_body("hi", 3).dump(), key);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto models = server.client().Get("/v1/models", key);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "story");
}

// The sampler fields reach the draw: a logit_bias of +100 makes every token that id, a stop token
// id ends the answer at its first draw unless min_tokens holds it back, a frequency penalty turns
// a greedy answer into another one, and the same request gives the same answer twice.
TEST(Serve, PenaltiesBiasStopTokenIdsAndMinTokensReachTheDraw) {
  Served server;
  auto answer = [&](const json& body) {
    auto r = server.post("/v1/chat/completions", body.dump());
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return json::parse(r->body);
  };
  auto ids_of = [&](const std::string& text) {
    auto r = server.post("/tokenize", json{{"prompt", text}, {"add_special_tokens", false}}.dump());
    return json::parse(r->body)["tokens"].get<std::vector<int>>();
  };
  json base = chat_body("Once upon a time", 12);
  const json plain = answer(base);
  const std::string plain_text = plain["choices"][0]["message"]["content"];
  // +100 on one id: the answer is that token, over and over
  const int forced = ids_of(" dog")[0];
  json forced_body = base;
  forced_body["logit_bias"] = {{std::to_string(forced), 100}};
  const json f = answer(forced_body);
  EXPECT_EQ(ids_of(f["choices"][0]["message"]["content"]), std::vector<int>(12, forced));
  // a stop token id: the forced token as a stop id ends the answer before it, with "stop"
  json stop_body = forced_body;
  stop_body["stop_token_ids"] = {forced};
  const json st = answer(stop_body);
  EXPECT_EQ(st["choices"][0]["message"]["content"], "");
  EXPECT_EQ(st["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(st["usage"]["completion_tokens"], 0);
  // min_tokens holds a stop id back: 5 tokens that are not it, then it stops
  stop_body["min_tokens"] = 5;
  const json held = answer(stop_body);
  EXPECT_EQ(held["usage"]["completion_tokens"], 5) << held.dump();
  EXPECT_EQ(held["choices"][0]["finish_reason"], "stop");
  // penalties change a greedy answer; each answer is reproducible
  json penalised = base;
  penalised["frequency_penalty"] = 2.0;
  penalised["presence_penalty"] = 2.0;
  penalised["repetition_penalty"] = 1.5;
  const std::string p1 = answer(penalised)["choices"][0]["message"]["content"];
  EXPECT_NE(p1, plain_text);
  EXPECT_EQ(answer(penalised)["choices"][0]["message"]["content"], p1);
  json min_p = base;
  min_p["temperature"] = 1.0;
  min_p["seed"] = 5;
  min_p["min_p"] = 1.0;  // only the likeliest token: the greedy answer
  EXPECT_EQ(answer(min_p)["choices"][0]["message"]["content"], plain_text);
}

// Structured output over HTTP (serve/structured_output.h): response_format json_schema answers
// parse, validate and list their properties in the schema's order (not the sorted order of a
// re-serialised body), streamed answers equal whole ones of the same seed, the other grammar fields
// work, and what the grammar engine refuses is a 400 naming the field.
json person_schema() {
  return json::parse(R"({"type": "object", "properties": {
      "zeta": {"type": "string", "maxLength": 10},
      "alpha": {"type": "integer", "minimum": 0, "maximum": 99},
      "mid": {"enum": ["x", "y"]}},
    "required": ["zeta", "alpha", "mid"], "additionalProperties": false})");
}

TEST(Serve, StructuredOutputIsValidInTheSchemasOrderStreamedOrNot) {
  Served server;
  auto raw_body = [](uint64_t seed, bool stream) {
    json b = chat_body("Describe a person.", 80, stream);
    b["temperature"] = 1.0;
    b["seed"] = seed;
    const std::string head = b.dump();
    return head.substr(0, head.size() - 1) +
           R"(,"response_format":{"type":"json_schema","json_schema":{"name":"person",)"
           R"("strict":true,"schema":{"type":"object","properties":{"zeta":{"type":"string",)"
           R"("maxLength":10},"alpha":{"type":"integer","minimum":0,"maximum":99},"mid":)"
           R"({"enum":["x","y"]}},"required":["zeta","alpha","mid"],)"
           R"("additionalProperties":false}}}})";
  };
  std::vector<std::future<std::pair<std::string, std::string>>> got;
  for (uint64_t seed = 0; seed < 24; ++seed)
    got.push_back(std::async(std::launch::async, [&, seed] {
      auto whole = server.post("/v1/chat/completions", raw_body(seed, false));
      auto streamed = server.post("/v1/chat/completions", raw_body(seed, true));
      if (!whole || whole->status != 200 || !streamed)
        return std::make_pair(std::string("(failed)"), std::string());
      const json w = json::parse(whole->body);
      EXPECT_EQ(w["choices"][0]["finish_reason"], "stop") << whole->body;
      bool done = false;
      std::string finish;
      const std::string s = stream_content(streamed->body, &done, &finish);
      EXPECT_TRUE(done);
      EXPECT_EQ(finish, "stop");
      return std::make_pair(w["choices"][0]["message"]["content"].get<std::string>(), s);
    }));
  const json schema = person_schema();
  std::set<std::string> distinct;
  for (auto& g : got) {
    const auto [whole, streamed] = g.get();
    EXPECT_EQ(streamed, whole);
    const json value = json::parse(whole, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << whole;
    EXPECT_EQ(test::schema_violation(value, schema, schema), "") << whole;
    // the properties in the schema's order, as written
    const size_t z = whole.find("\"zeta\""), a = whole.find("\"alpha\""), m = whole.find("\"mid\"");
    EXPECT_TRUE(z < a && a < m) << whole;
    distinct.insert(whole);
  }
  EXPECT_GT(distinct.size(), 5u);
  // the other fields: a GBNF grammar, a regex, any JSON object
  json g = chat_body("Answer.", 20);
  g["grammar"] = R"(root ::= "yes" | "no")";
  auto r = server.post("/v1/chat/completions", g.dump());
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  const std::string yes_no = json::parse(r->body)["choices"][0]["message"]["content"];
  EXPECT_TRUE(yes_no == "yes" || yes_no == "no") << yes_no;
  json re = chat_body("Answer.", 20);
  re["guided_regex"] = "[0-9]{3}";
  r = server.post("/v1/chat/completions", re.dump());
  ASSERT_TRUE(r && r->status == 200);
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"].get<std::string>().size(), 3u);
  r = server.post(
      "/v1/completions",
      json{{"prompt", "Once"}, {"max_tokens", 40}, {"response_format", {{"type", "json_object"}}}}
          .dump());
  ASSERT_TRUE(r && r->status == 200);
  const json comp = json::parse(r->body)["choices"][0];
  if (comp["finish_reason"] == "stop")
    EXPECT_TRUE(json::parse(comp["text"].get<std::string>()).is_object()) << comp.dump();
  // refusals name the field
  auto refused = [&](const json& body, const std::string& param, const std::string& says) {
    auto e = server.post("/v1/chat/completions", body.dump());
    ASSERT_TRUE(e);
    EXPECT_EQ(e->status, 400) << e->body;
    const json err = json::parse(e->body)["error"];
    EXPECT_EQ(err["param"], param) << e->body;
    EXPECT_NE(err["message"].get<std::string>().find(says), std::string::npos) << e->body;
  };
  json bad = chat_body("x", 5);
  bad["response_format"] = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "n"}, {"schema", {{"type", "object"}, {"not", {{"type", "null"}}}}}}}};
  refused(bad, "response_format.json_schema.schema", "keyword \"not\"");
  bad = chat_body("x", 5);
  bad["response_format"] = {{"type", "xml"}};
  refused(bad, "response_format.type", "not supported");
  bad = chat_body("x", 5);
  bad["grammar"] = "root ::= (";
  refused(bad, "grammar", "EBNF");
  bad["guided_regex"] = "a+";
  refused(bad, "guided_regex", "at most one");
  // and the server goes on
  EXPECT_EQ(server.post("/v1/chat/completions", chat_body("Hi", 3).dump())->status, 200);
}

// The prompt a one-message chat with `tools` renders to, as /tokenize and /detokenize give it.
std::string tools_prompt(const Served& server, const json& tools) {
  auto tok = server.post(
      "/tokenize",
      json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"tools", tools}}.dump());
  EXPECT_TRUE(tok && tok->status == 200);
  if (!tok || tok->status != 200) return "";
  auto text = server.post("/detokenize", json{{"tokens", json::parse(tok->body)["tokens"]}}.dump());
  return json::parse(text->body)["prompt"];
}

// Tools the model sees and tool_choice enforced (chat/tool_prompt.h, serve/structured_output.h):
// the V3 template's prompt gets the tool list; "required" and a named function make the answer a
// tool-call section that parses into tool_calls (finish_reason "tool_calls") whose arguments are
// valid against the tool's parameters; parallel_tool_calls false means one call.
TEST(Serve, ForcedToolCallsParseAndTheirArgumentsAreValid) {
  Served server;
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
       "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "get_time",
     "parameters": {"type": "object", "properties": {"zone": {"enum": ["utc", "cet"]}},
       "required": ["zone"]}}}])");
  auto schema_of = [&](const std::string& name) {
    for (const json& t : tools)
      if (t["function"]["name"] == name) return t["function"]["parameters"];
    return json();
  };
  // the prompt holds the tools
  const std::string prompt = tools_prompt(server, tools);
  EXPECT_NE(prompt.find("### get_weather\nDescription: Weather of a city."), std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("\"zone\":{\"enum\":[\"utc\",\"cet\"]}"), std::string::npos) << prompt;
  auto calls_of = [&](const json& choice_body, bool parallel, uint64_t seed) {
    json b = chat_body("What is the weather in Oslo?", 400);
    b["temperature"] = 1.0;
    b["seed"] = seed;
    b["tools"] = tools;
    b["tool_choice"] = choice_body;
    b["parallel_tool_calls"] = parallel;
    auto r = server.post("/v1/chat/completions", b.dump());
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "");
    const json c = json::parse(r->body)["choices"][0];
    EXPECT_EQ(c["finish_reason"], "tool_calls") << c.dump();
    return c["message"].value("tool_calls", json::array());
  };
  std::set<std::string> names;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const json calls = calls_of("required", false, seed);
    ASSERT_EQ(calls.size(), 1u) << calls.dump();
    const std::string name = calls[0]["function"]["name"];
    names.insert(name);
    const json args = json::parse(calls[0]["function"]["arguments"].get<std::string>());
    EXPECT_EQ(test::schema_violation(args, schema_of(name), schema_of(name)), "") << args.dump();
    // a named function: that one
    const json named =
        calls_of({{"type", "function"}, {"function", {{"name", "get_time"}}}}, true, seed);
    ASSERT_EQ(named.size(), 1u) << named.dump();
    EXPECT_EQ(named[0]["function"]["name"], "get_time");
    const json targs = json::parse(named[0]["function"]["arguments"].get<std::string>());
    EXPECT_EQ(test::schema_violation(targs, schema_of("get_time"), schema_of("get_time")), "");
  }
  EXPECT_EQ(names.size(), 2u) << "the seeds should pick both tools";
  // bad combinations are 400s naming tool_choice
  json bad = chat_body("x", 5);
  bad["tools"] = tools;
  bad["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  auto e = server.post("/v1/chat/completions", bad.dump());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(json::parse(e->body)["error"]["param"], "tool_choice");
  bad["tool_choice"] = "required";
  bad["response_format"] = {{"type", "json_object"}};
  e = server.post("/v1/chat/completions", bad.dump());
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->body.find("cannot both"), std::string::npos) << e->body;
}

// --chat-template FILE replaces the checkpoint's template: with DeepSeek-V3.1's, the tool list and
// forced calls take V3.1's call format (NAME<｜tool▁sep｜>ARGUMENTS), and the calls still parse.
TEST(Serve, AChatTemplateFileBringsItsOwnToolCallFormat) {
  Served server({"--chat-template", test::data_path("chat_templates/deepseek-v3.1.jinja")});
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_time",
     "parameters": {"type": "object", "properties": {"zone": {"enum": ["utc", "cet"]}},
       "required": ["zone"]}}}])");
  const std::string prompt = tools_prompt(server, tools);
  EXPECT_NE(prompt.find("<｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments"),
            std::string::npos)
      << prompt;
  json b = chat_body("What time is it?", 200);
  b["tools"] = tools;
  b["tool_choice"] = "required";
  b["parallel_tool_calls"] = false;
  auto r = server.post("/v1/chat/completions", b.dump());
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  const json c = json::parse(r->body)["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls") << c.dump();
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << c.dump();
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_time");
}

// With a template that opens the reasoning (DeepSeek-R1's ends the prompt with <think>), a grammar
// holds for the answer only: the reasoning is the unconstrained one, token for token (the story
// model never closes it, so all of its text is reasoning either way).
TEST(Serve, AGrammarLeavesTheReasoningFree) {
  Served server({"--chat-template", test::data_path("chat_templates/deepseek-r1.jinja")});
  json b = chat_body("Think about a bird.", 30);
  const json free = json::parse(server.post("/v1/chat/completions", b.dump())->body);
  b["response_format"] = {{"type", "json_object"}};
  auto r = server.post("/v1/chat/completions", b.dump());
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  const json constrained = json::parse(r->body);
  const std::string reasoning = free["choices"][0]["message"]["reasoning_content"];
  EXPECT_FALSE(reasoning.empty());
  EXPECT_EQ(constrained["choices"][0]["message"]["reasoning_content"], reasoning);
}

// n > 1: n choices of one prompt, each sampled with its own index in the random key, so choice 0
// is the answer of the same request with n = 1 and the others differ; streamed, the chunks of
// each index add up to the same texts; usage sums the completion tokens.
TEST(Serve, NChoicesAreIndexedAnswersOfOneSeed) {
  Served server;
  json body = chat_body("Once upon a time", 16);
  body["temperature"] = 0.9;
  body["seed"] = 5;
  auto post = [&](const json& b) {
    auto r = server.post("/v1/chat/completions", b.dump());
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return r ? r->body : std::string();
  };
  const json solo = json::parse(post(body));
  body["n"] = 3;
  const json three = json::parse(post(body));
  ASSERT_EQ(three["choices"].size(), 3u);
  std::vector<std::string> texts;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(three["choices"][i]["index"], i);
    texts.push_back(three["choices"][i]["message"]["content"]);
  }
  EXPECT_EQ(texts[0], solo["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_NE(texts[1], texts[0]);
  EXPECT_NE(texts[2], texts[1]);
  EXPECT_EQ(three["usage"]["prompt_tokens"], solo["usage"]["prompt_tokens"]);
  // (the completions run to max_tokens or an end of sentence: at least the first one's tokens)
  EXPECT_GT(three["usage"]["completion_tokens"].get<int64_t>(),
            solo["usage"]["completion_tokens"].get<int64_t>());
  // streamed: each index's deltas add up to that choice's text, each ends with a finish reason
  body["stream"] = true;
  const std::string events = post(body);
  std::vector<std::string> streamed(3);
  std::vector<int> finishes(3, 0);
  size_t at = 0;
  while ((at = events.find("data: {", at)) != std::string::npos) {
    const size_t end = events.find("\n\n", at);
    const json j = json::parse(events.substr(at + 6, end - at - 6));
    at = end;
    if (!j.contains("choices") || j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    const size_t i = c["index"].get<size_t>();
    ASSERT_LT(i, 3u);
    if (c["delta"].contains("content") && c["delta"]["content"].is_string())
      streamed[i] += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) ++finishes[i];
  }
  EXPECT_EQ(streamed, texts);
  EXPECT_EQ(finishes, std::vector<int>(3, 1));
  // choices 1 .. n-1 start once choice 0 has prefilled: they take its prompt's full blocks from the
  // prefix cache (the metrics count them), and still give the same answers
  auto hits = [&] {
    const std::string m = server.client().Get("/metrics")->body;
    const std::string name = "\ndsinfer_prefix_cache_hit_tokens_total ";
    return std::stoll(m.substr(m.find(name) + name.size()));
  };
  std::string words;
  for (int i = 0; i < 120; ++i) words += "the little dog ran to the old house and ";
  json long_body = chat_body(words, 4);
  long_body["temperature"] = 0.9;
  long_body["seed"] = 9;
  const json long_solo = json::parse(post(long_body));
  const int64_t prompt = long_solo["usage"]["prompt_tokens"].get<int64_t>();
  ASSERT_GT(prompt, 256);
  long_body["n"] = 3;
  // (another first word: nothing cached matches, so every hit is the later choices' reuse of
  // choice 0's prompt)
  long_body["messages"][0]["content"] = "zebra " + words;
  const int64_t before = hits();
  const json long_three = json::parse(post(long_body));
  EXPECT_GE(hits() - before, 2 * (prompt - 64)) << "the later choices prefilled the prompt again";
  ASSERT_EQ(long_three["choices"].size(), 3u);
}

// /v1/completions as lm-evaluation-harness scores with it: echo + logprobs with max_tokens 0 give
// every prompt token's log-probability (the first null), which must be perplexity's NLLs of the
// same ids; prompts as token ids and as a list (strings and ids mixed) each get their choice, in
// order; the text offsets index the echoed text; stream + echo is a 400.
TEST(Serve, CompletionsEchoLogprobsArePerplexitysNumbers) {
  Served server;
  const std::string ckpt = test::convert_golden("tiny-v3-story", 1, /*with_tokenizer=*/true);
  auto post = [&](const json& b, int status = 200) {
    auto r = server.post("/v1/completions", b.dump());
    EXPECT_TRUE(r && r->status == status) << (r ? r->body : "no answer");
    return r ? json::parse(r->body) : json();
  };
  const std::string text = "Once upon a time there was a little dog who liked to run.";
  const json ids =
      json::parse(server.post("/tokenize", json{{"prompt", text}}.dump())->body)["tokens"];
  ASSERT_GT(ids.size(), 5u);
  json body = {
      {"prompt", text}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 2}, {"temperature", 0}};
  const json echoed = post(body);
  const json& lp = echoed["choices"][0]["logprobs"];
  EXPECT_EQ(echoed["choices"][0]["text"], text);
  ASSERT_EQ(lp["token_logprobs"].size(), ids.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["top_logprobs"][1].size(), 2u);
  for (size_t i = 1; i < ids.size(); ++i) {  // offsets index the text (BOS takes no room)
    const std::string token = lp["tokens"][i];
    EXPECT_EQ(text.substr(lp["text_offset"][i].get<size_t>(), token.size()), token) << i;
  }
  // perplexity of the same ids, token by token
  const std::string case_file = test::scratch_dir("case") + "/ids.json";
  {
    std::ofstream out(case_file);
    out << json{{"tokens", json::array({ids})}}.dump();
  }
  const auto ppl =
      test::run_dsinfer("perplexity --ckpt-path " + ckpt + " --case " + case_file + " --json");
  ASSERT_EQ(ppl.exit_code, 0) << ppl.err;
  const json nll = json::parse(ppl.out)["nll"][0];
  ASSERT_EQ(nll.size(), ids.size() - 1);
  for (size_t i = 1; i < ids.size(); ++i)
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), -nll[i - 1].get<double>(),
                1e-4 * std::max(1.0, std::fabs(nll[i - 1].get<double>())))
        << "token " << i;
  // the same prompt as token ids, and in a list with a string: one choice each, in order
  body["prompt"] = ids;
  const json from_ids = post(body);
  EXPECT_EQ(from_ids["choices"][0]["logprobs"]["token_logprobs"], lp["token_logprobs"]);
  body["prompt"] = json::array({"The cat", ids});
  const json listed = post(body);
  ASSERT_EQ(listed["choices"].size(), 2u);
  EXPECT_EQ(listed["choices"][0]["text"], "The cat");
  EXPECT_EQ(listed["choices"][1]["logprobs"]["token_logprobs"], lp["token_logprobs"]);
  EXPECT_EQ(listed["usage"]["prompt_tokens"].get<size_t>(),
            listed["choices"][0]["logprobs"]["tokens"].size() + ids.size());
  // generated tokens follow the prompt's in the legacy logprobs, and in the text
  body["prompt"] = text;
  body["max_tokens"] = 4;
  const json more = post(body);
  EXPECT_EQ(more["choices"][0]["logprobs"]["tokens"].size(),
            ids.size() + more["usage"]["completion_tokens"].get<size_t>());
  EXPECT_EQ(more["choices"][0]["text"].get<std::string>().rfind(text, 0), 0u);
  body["stream"] = true;
  const json refused = post(body, 400);
  EXPECT_NE(refused.dump().find("whole responses"), std::string::npos) << refused.dump();
}

// bench/serve_bench's multi-turn workload against the server: every turn answered, later turns
// reuse what an ideal cache would (but for the answers' re-rendered tails), and with the prefix
// cache off nothing.
TEST(Serve, ServeBenchConversationsReuseNearlyTheIdeal) {
  for (const bool cached : {true, false}) {
    Served server(cached ? std::vector<std::string>{}
                         : std::vector<std::string>{"--no-prefix-cache"});
    const std::string command = std::string(DSINFER_SERVE_BENCH_BIN) + " --port " +
                                std::to_string(server.port()) +
                                " --conversations 3 --turns 3 --system-words 120 --turn-words 10"
                                " --max-tokens 8 --stagger-ms 50 --json";
    FILE* pipe = popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    EXPECT_EQ(pclose(pipe), 0) << out;
    const json r = json::parse(out);
    EXPECT_EQ(r["failed"], 0);
    ASSERT_EQ(r["per_turn"].size(), 3u);
    const double ideal = r["ideal_cached_tokens"].get<double>();
    EXPECT_GT(ideal, 0.5 * r["prompt_tokens"].get<double>()) << out;
    if (cached) {
      EXPECT_GE(r["hit_of_ideal"].get<double>(), 0.9) << out;
      EXPECT_LE(r["hit_of_ideal"].get<double>(), 1.01) << out;
      EXPECT_GT(r["kv_used_positions"].get<double>(), 0) << out;
    } else {
      EXPECT_EQ(r["cached_tokens"], 0) << out;
    }
  }
}

// Bodies under the default --max-body that used to kill the server: JSON nested 250k levels deep
// in the fields request handling copies (SIGSEGV: the copy recursed once per level) and bytes
// that are not UTF-8 (a 500 "error": the parse error quoting them could not be written). Each is a
// 400 naming the cause, and the server goes on answering.
TEST(Serve, HostileBodiesAreRefusedAndTheServerLives) {
  Served server;
  const std::string deep = std::string(250000, '[') + std::string(250000, ']');
  const std::string user = R"({"role":"user","content":"hi"})";
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/chat/completions", R"({"messages":[)" + user + R"(],"tool_choice":)" + deep + "}"},
           {"/v1/chat/completions", R"({"messages":[{"role":"user","content":)" + deep + "}]}"},
           {"/v1/chat/completions", R"({"messages":[)" + user + R"(],"tools":)" + deep + "}"},
           {"/tokenize", R"({"messages":[)" + user + R"(],"tools":)" + deep + "}"},
           {"/v1/chat/completions",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}"}}) {
    auto r = server.post(path, body);
    ASSERT_TRUE(r) << path << ": no answer (" << httplib::to_string(r.error()) << ")";
    EXPECT_EQ(r->status, 400) << path << ": " << r->body.substr(0, 200);
    const json j = json::parse(r->body);
    const std::string message = j["error"]["message"];
    EXPECT_TRUE(message.find("deeper than") != std::string::npos ||
                message.find("not valid JSON") != std::string::npos)
        << message;
  }
  auto ok = server.post("/v1/chat/completions", chat_body("hi", 3).dump());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// The raw HTTP answer to `request` sent over a plain socket to 127.0.0.1:port (up to 64 KB).
std::string raw_exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return "(no connection)";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  timeval t{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  std::string answer;
  char buf[4096];
  ssize_t n;
  while (answer.find("\r\n\r\n") == std::string::npos && (n = recv(fd, buf, sizeof buf, 0)) > 0)
    answer.append(buf, static_cast<size_t>(n));
  close(fd);
  return answer;
}

// --max-body bounds the body as decoded, whatever its transfer or content encoding (a 306 KB gzip
// body inflated to 300 MB, a chunked one was read whole), and any content type is JSON to us
// (cpp-httplib's 8 KiB limit on form-encoded bodies, what `curl -d` sends, made them 413).
TEST(Serve, MaxBodyBoundsTheDecodedBodyOfAnyEncoding) {
  Served server({"--max-body", "16384"});
  json big = chat_body(std::string(100000, 'x'), 3);
  httplib::Client gzip = server.client();
  gzip.set_compress(true);  // ~100 KB of x: a few hundred bytes on the wire
  auto r = gzip.Post("/v1/chat/completions", big.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_NE(r->body.find("counted after any decoding"), std::string::npos) << r->body;
  std::string chunked =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 40; ++i) chunked += "400\r\n" + std::string(1024, ' ') + "\r\n";
  chunked += "0\r\n\r\n";
  EXPECT_EQ(raw_exchange(server.port(), chunked).substr(0, 12), "HTTP/1.1 413");
  // a 10 KB body sent as a form (curl -d's content type) is still a chat request
  const std::string form = chat_body("hi" + std::string(10000, ' '), 3).dump();
  auto ok = server.client().Post("/v1/chat/completions", form, "application/x-www-form-urlencoded");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(server.post("/v1/chat/completions", chat_body("hi", 3).dump())->status, 200);
}

TEST(Serve, CompletionsAndSigtermEndsWithStatusZero) {
  Served server;
  json b = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}};
  auto r = server.post("/v1/completions", b.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_FALSE(j["choices"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  EXPECT_EQ(server.terminate(), 0);
}

// /tokenize gives the prompt the chat request used (its count is usage.prompt_tokens), /detokenize
// turns ids back into text; /metrics counts tokens, prefix-cache hits and latencies.
TEST(Serve, TokenizeDetokenizeAndMetrics) {
  Served server;
  const json chat = chat_body("Once upon a time", 6);
  const json answer = json::parse(server.post("/v1/chat/completions", chat.dump())->body);
  const json again = json::parse(server.post("/v1/chat/completions", chat.dump())->body);
  EXPECT_EQ(again["choices"][0]["message"]["content"], answer["choices"][0]["message"]["content"]);
  EXPECT_GT(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0)
      << "the same prompt again";
  auto t = server.post("/tokenize", json{{"messages", chat["messages"]}}.dump());
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  const json tokens = json::parse(t->body);
  EXPECT_EQ(tokens["count"], answer["usage"]["prompt_tokens"]);
  auto d = server.post(
      "/detokenize",
      json{{"tokens",
            json::parse(
                server
                    .post("/tokenize", R"({"prompt": "Hello world", "add_special_tokens": false})")
                    ->body)["tokens"]}}
          .dump());
  ASSERT_TRUE(d);
  EXPECT_EQ(json::parse(d->body)["prompt"], "Hello world");
  EXPECT_EQ(server.post("/detokenize", R"({"tokens": [-1]})")->status, 400);
  const std::string metrics = server.client().Get("/metrics")->body;
  auto value = [&](const std::string& name) {
    const size_t at = metrics.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + name.size() + 2));
  };
  EXPECT_EQ(value("dsinfer_generation_tokens_total"), 12) << metrics;
  EXPECT_EQ(value("dsinfer_requests_finished_total"), 2);
  EXPECT_EQ(value("dsinfer_requests_running"), 0);
  EXPECT_GT(value("dsinfer_prefix_cache_hit_tokens_total"), 0);
  EXPECT_EQ(value("dsinfer_time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(value("dsinfer_inter_token_latency_seconds_count"), 10);
  // the KV cache in positions and bytes: the conversation's blocks stay cached (the prefix index
  // holds them), within the budget, nothing evicted
  const double budget = value("dsinfer_kv_cache_budget_positions"),
               used = value("dsinfer_kv_cache_used_positions");
  EXPECT_GT(budget, 0) << metrics;
  EXPECT_GT(used, 0);
  EXPECT_LE(used, budget);
  EXPECT_EQ(std::fmod(used, 64.0), 0.0) << "whole blocks";
  EXPECT_GT(value("dsinfer_kv_cache_used_bytes"), 0);
  EXPECT_EQ(value("dsinfer_kv_cache_used_bytes") / used,
            value("dsinfer_kv_cache_budget_bytes") / budget);
  EXPECT_GT(value("dsinfer_prefix_cache_blocks"), 0);
  EXPECT_EQ(value("dsinfer_prefix_cache_evictions_total"), 0);
}

// logprobs / top_logprobs: one entry per completion token; at temperature 0 the chosen token is
// the most likely one; the alternatives are in order and are probabilities; streaming gives the
// same entries.
TEST(Serve, LogprobsOfGreedyTokensAreTheTopAlternatives) {
  Served server;
  json b = chat_body("Once upon a time", 8);
  b["logprobs"] = true;
  b["top_logprobs"] = 3;
  const json j = json::parse(server.post("/v1/chat/completions", b.dump())->body);
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), j["usage"]["completion_tokens"].get<size_t>()) << j.dump();
  std::string text;
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);
    EXPECT_FLOAT_EQ(e["top_logprobs"][0]["logprob"].get<float>(), e["logprob"].get<float>());
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    double mass = 0;
    for (size_t k = 0; k < 3; ++k) {
      mass += std::exp(e["top_logprobs"][k]["logprob"].get<double>());
      if (k > 0) {
        EXPECT_LE(e["top_logprobs"][k]["logprob"].get<double>(),
                  e["top_logprobs"][k - 1]["logprob"].get<double>());
      }
    }
    EXPECT_LE(mass, 1.0 + 1e-6);
    text += e["token"].get<std::string>();
  }
  EXPECT_EQ(text, j["choices"][0]["message"]["content"]);
  b["stream"] = true;
  const std::string body = server.post("/v1/chat/completions", b.dump())->body;
  json streamed = json::array();
  for (size_t at = 0; (at = body.find("data: {", at)) != std::string::npos;) {
    const size_t end = body.find("\n\n", at);
    const json chunk = json::parse(body.substr(at + 6, end - at - 6));
    at = end;
    for (const json& c : chunk["choices"])
      if (!c["logprobs"].is_null())
        for (const json& e : c["logprobs"]["content"]) streamed.push_back(e);
  }
  EXPECT_EQ(streamed, content);
  b["top_logprobs"] = 21;
  EXPECT_EQ(server.post("/v1/chat/completions", b.dump())->status, 400);
}

// A stream queued behind a long request gets `: keep-alive` comments; a client that goes away
// mid-stream, or stops waiting for a whole answer, has its sequence cancelled (metrics count it)
// and the others go on.
TEST(Serve, QueuedStreamsAreKeptAliveAndAVanishedClientIsCancelled) {
  Served server({"--max-running", "1", "--keep-alive", "0.05"});
  json long_body = chat_body("Once upon a time", 600);
  long_body["ignore_eos"] = true;
  auto long_one = std::async(std::launch::async,
                             [&] { return server.post("/v1/chat/completions", long_body.dump()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto queued = server.post("/v1/chat/completions", chat_body("He was tired.", 4, true).dump());
  ASSERT_TRUE(queued);
  EXPECT_NE(queued->body.find(": keep-alive"), std::string::npos) << queued->body.substr(0, 300);
  bool done = false;
  stream_content(queued->body, &done);
  EXPECT_TRUE(done);
  ASSERT_TRUE(long_one.get());
  // a client that reads one chunk and hangs up
  httplib::Client c = server.client();
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  json endless = chat_body("Once upon a time", 5000, true);
  endless["ignore_eos"] = true;
  req.body = endless.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };
  httplib::Response res;
  httplib::Error err;
  c.send(req, res, err);
  EXPECT_GE(chunks, 2);
  auto wait_cancelled = [&](double want) {
    double cancelled = 0;
    for (int i = 0; i < 100 && cancelled < want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      auto m = server.client().Get("/metrics");
      if (!m) break;
      const size_t at = m->body.find("\ndsinfer_requests_cancelled_total ");
      if (at == std::string::npos) break;
      cancelled = std::stod(m->body.substr(at + 34));
    }
    return cancelled;
  };
  EXPECT_EQ(wait_cancelled(1), 1);
  // a client of a non-streamed request that gives up waiting: nothing was written to it, the
  // server sees the closed socket and cancels
  httplib::Client impatient = server.client();
  impatient.set_read_timeout(0, 300 * 1000);
  json endless_whole = endless;
  endless_whole["stream"] = false;
  EXPECT_FALSE(impatient.Post("/v1/chat/completions", endless_whole.dump(), "application/json"));
  impatient.stop();
  EXPECT_EQ(wait_cancelled(2), 2);
  // clients that send a whole request and hang up at once: by the time it is read they are gone,
  // so it is abandoned before it takes a slot or reaches the engine (a probe that came late
  // cancels it instead: the two together are every hang-up)
  const std::string hang_up_body = endless.dump();
  for (int i = 0; i < 10; ++i) {
    test::RawClient c(server.port());
    c.send_text("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                std::to_string(hang_up_body.size()) + "\r\n\r\n" + hang_up_body);
  }
  auto counter = [&](const std::string& name) {
    auto m = server.client().Get("/metrics");
    const size_t at = m ? m->body.find("\n" + name + " ") : std::string::npos;
    return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + name.size() + 2));
  };
  double abandoned = 0, cancelled = 0;
  for (int i = 0; i < 100 && abandoned + cancelled < 12; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abandoned = counter("dsinfer_requests_abandoned_total");
    cancelled = counter("dsinfer_requests_cancelled_total");
  }
  EXPECT_EQ(abandoned + cancelled, 12);
  // Which of the two a hang-up meets is a race between its FIN and the server's read: most are
  // abandoned before they take a slot, but on 2 loaded cores 7 of 10 were seen (a fresh clone's
  // parallel ctest, 2026-12-07), so the test asks for most of them, not a fixed 8.
  EXPECT_GE(abandoned, 6) << "hang-ups read after their client left still took a slot";
  // one that closed only its sending side reads why nothing ran (a few tries: the server may
  // read a request before the half-close arrives)
  std::string half_closed;
  for (int i = 0; i < 5 && half_closed.rfind("HTTP/1.1 499", 0) != 0; ++i) {
    test::RawClient c(server.port());
    json small = chat_body("Hi", 2);
    c.send_text("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                std::to_string(small.dump().size()) + "\r\n\r\n" + small.dump());
    c.shut_write();
    half_closed = c.read_all(5);
  }
  EXPECT_EQ(half_closed.rfind("HTTP/1.1 499", 0), 0u) << half_closed.substr(0, 300);
  EXPECT_CONTAINS(half_closed, "client_closed_request");
  auto after = server.post("/v1/chat/completions", chat_body("He was tired.", 4).dump());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

// SIGTERM drains: a running request finishes whole, a new one gets 503 meanwhile, /health says
// draining, and the exit status is 0.
TEST(Serve, SigtermDrainsRunningRequestsAndRefusesNewOnes) {
  // a drain long enough for the whole answer even under the sanitizers (10x slower)
  Served server({"--drain", "300"});
  // (~0.6 s at full speed: still running at the SIGTERM 150 ms in; within the client's timeout
  // under the sanitizers)
  json long_body = chat_body("Once upon a time", 300);
  long_body["ignore_eos"] = true;
  auto running = std::async(std::launch::async,
                            [&] { return server.post("/v1/chat/completions", long_body.dump()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  auto status = std::async(std::launch::async, [&] { return server.terminate(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto refused = server.post("/v1/chat/completions", chat_body("hi", 3).dump());
  if (refused) {  // (unless the drain was already over)
    EXPECT_EQ(refused->status, 503) << refused->body;
    EXPECT_NE(refused->body.find("shutting down"), std::string::npos);
  }
  auto r = running.get();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 300);
  EXPECT_EQ(status.get(), 0);
}

// A conversation with an earlier tool call and its result goes back through the checkpoint's
// template (V3's renders tool_calls and tool outputs with its markers); /tokenize shows them.
TEST(Serve, ToolCallsAndResultsInTheHistoryGoThroughTheTemplate) {
  Served server;
  const json messages = json::array(
      {{{"role", "user"}, {"content", "What is the weather in Tokyo?"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         json::array({{{"id", "call_0"},
                       {"type", "function"},
                       {"function",
                        {{"name", "get_weather"}, {"arguments", R"({"location": "Tokyo"})"}}}}})}},
       {{"role", "tool"}, {"tool_call_id", "call_0"}, {"content", "sunny, 21 C"}}});
  json b = {{"messages", messages},
            {"max_tokens", 5},
            {"temperature", 0},
            {"tools",
             json::array({{{"type", "function"},
                           {"function",
                            {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}})}};
  auto r = server.post("/v1/chat/completions", b.dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(json::parse(r->body)["choices"][0]["message"].contains("content"));
  const json ids =
      json::parse(server.post("/tokenize", json{{"messages", messages}}.dump())->body)["tokens"];
  const std::string text =
      json::parse(server.post("/detokenize", json{{"tokens", ids}}.dump())->body)["prompt"];
  EXPECT_NE(text.find("get_weather"), std::string::npos) << text;
  EXPECT_NE(text.find("sunny, 21 C"), std::string::npos) << text;
  EXPECT_NE(text.find("<｜tool▁calls▁begin｜>"), std::string::npos) << text;
}

// Past --drain, what still runs is cancelled: the server exits 0 without waiting for it.
TEST(Serve, TheDrainDeadlineCancelsWhatStillRuns) {
  Served server({"--drain", "0.2"});
  json endless = chat_body("Once upon a time", 15000);
  endless["ignore_eos"] = true;
  auto running = std::async(std::launch::async,
                            [&] { return server.post("/v1/chat/completions", endless.dump()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double t0 =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  EXPECT_EQ(server.terminate(), 0);
  const double t1 =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  EXPECT_LT(t1 - t0, 5.0) << "the deadline should bound the shutdown";
  // the answer was cut off: an error, not a complete-looking finish_reason "stop" (it was 200)
  auto r = running.get();
  if (r) {
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_CONTAINS(r->body, "--drain deadline");
  }
}

// Slowloris against the real server: 100 clients trickling a header (a byte every 300 ms) and
// one that never reads its stream hold no slot another request needs (every one was answered;
// before, 100 slow clients starved /health and the API) and no drain: the slow ones get 408 by
// --request-timeout, and SIGTERM ends the server within --drain + a few seconds with status 0.
TEST(Serve, SlowClientsStarveNoRequestAndHoldNoDrain) {
  Served server({"--request-timeout", "2", "--drain", "1"});
  std::vector<std::unique_ptr<test::RawClient>> slow;
  for (int i = 0; i < 100; ++i) {
    slow.push_back(std::make_unique<test::RawClient>(server.port()));
    ASSERT_TRUE(slow.back()->send_text("POST /v1/chat/completions HTTP/1.1\r\n"));
  }
  test::RawClient not_reading(server.port(), /*receive_buffer=*/4096);
  json endless = chat_body("Once upon a time", 15000, /*stream=*/true);
  endless["ignore_eos"] = true;
  const std::string body = endless.dump();
  ASSERT_TRUE(
      not_reading.send_text("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                            "Content-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body));
  std::atomic<bool> done{false};
  // (the trickle walks `slow` while the test replaces its clients below: both under this lock)
  std::mutex slow_mutex;
  std::thread trickle([&] {
    while (!done) {
      {
        std::lock_guard<std::mutex> lock(slow_mutex);
        for (auto& s : slow) s->send_text("X");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
  for (int i = 0; i < 3; ++i) {
    auto health = server.client().Get("/health");
    ASSERT_TRUE(health) << "/health beside 100 slow clients, try " << i;
    EXPECT_EQ(health->status, 200);
    auto r = server.post("/v1/chat/completions", chat_body("Hello", 4).dump());
    ASSERT_TRUE(r) << "a completion beside 100 slow clients, try " << i;
    EXPECT_EQ(r->status, 200) << r->body;
  }
  int timed_out = 0;
  for (auto& s : slow) timed_out += s->read_all(5).rfind("HTTP/1.1 408", 0) == 0;
  EXPECT_EQ(timed_out, 100);
  // SIGTERM while fresh slow clients trickle (within their deadline) and the stream is unread
  {
    std::lock_guard<std::mutex> lock(slow_mutex);
    slow.clear();
    for (int i = 0; i < 20; ++i) {
      slow.push_back(std::make_unique<test::RawClient>(server.port()));
      slow.back()->send_text("GET /health HTTP/1.1\r\n");
    }
  }
  const double t0 = now_seconds();
  EXPECT_EQ(server.terminate(), 0);
  done = true;
  trickle.join();
  EXPECT_LT(now_seconds() - t0, 6.0) << "slow clients held the drain";
}

using test::kAddressSanitizer;  // (test_support.h)

// The server's resident memory in KiB (VmRSS), 0 when it cannot be read.
int64_t rss_kib(pid_t pid) {
  const std::string status = test::read_file("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("VmRSS:");
  return at == std::string::npos ? 0 : std::atoll(status.c_str() + at + 6);
}

// Issue 35's soak: for 12 s, 16 clients streaming answers one after another, a storm of clients
// that send a stream request and hang up at once, 100 slow connections (re-opened as they are cut)
// and gzip and chunked bodies past --max-body, all at once. Every well-behaved request is answered
// in full, the bombs get 413, resident memory grows by less than 256 MiB (where it means something:
// not under ASan), and SIGTERM ends the server with status 0 within --drain + 5 s. (The hang-ups
// used to hold their slots until a write failed: under ASan, enough to make the others 429.)
TEST(Serve, SoakOfStreamsHangUpsSlowClientsAndBombs) {
  Served server({"--request-timeout", "2", "--drain", "2", "--max-body", "65536"});
  ASSERT_EQ(server.post("/v1/chat/completions", chat_body("warm up", 4).dump())->status, 200);
  const int64_t rss_before = rss_kib(server.pid());
  // (12 s of load; 30 under AddressSanitizer, whose server runs several times slower: its 16
  // clients took all of 12 s for one answer each while other tests shared the 2 cores)
  const double end = now_seconds() + (kAddressSanitizer ? 30 : 12);
  std::atomic<int> answered{0}, failed{0}, storms{0}, bombs{0}, bomb_failures{0};
  std::mutex first_failure_mutex;
  std::string first_failure;
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      while (now_seconds() < end) {
        auto r = server.post("/v1/chat/completions",
                             chat_body("Tell me a story " + std::to_string(i), 8, true).dump());
        bool done = false;
        if (r && r->status == 200) stream_content(r->body, &done);
        (done ? answered : failed)++;
        if (!done) {
          std::lock_guard<std::mutex> lock(first_failure_mutex);
          if (first_failure.empty())
            first_failure = !r ? "no answer: " + httplib::to_string(r.error())
                               : std::to_string(r->status) + " " + r->body.substr(0, 300);
        }
      }
    });
  threads.emplace_back([&] {  // hang-ups
    const std::string body = chat_body("Once upon a time", 200, true).dump();
    while (now_seconds() < end) {
      test::RawClient c(server.port());
      c.send_text("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
      ++storms;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  threads.emplace_back([&] {  // slow connections, each a byte every 300 ms until cut off
    std::vector<std::unique_ptr<test::RawClient>> slow(100);
    while (now_seconds() < end) {
      for (auto& s : slow)
        if (!s || !s->send_text("X")) {
          s = std::make_unique<test::RawClient>(server.port());
          s->send_text("GET /health HTTP/1.1\r\n");
        }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
  threads.emplace_back([&] {  // bombs: ~1 MB of JSON gzipped to a few KB, and 1 MB chunked
    json big = chat_body(std::string(1 << 20, 'x'), 3);
    std::string chunked =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 1024; ++i) chunked += "400\r\n" + std::string(1024, ' ') + "\r\n";
    chunked += "0\r\n\r\n";
    while (now_seconds() < end) {
      httplib::Client gzip = server.client();
      gzip.set_compress(true);
      auto r = gzip.Post("/v1/chat/completions", big.dump(), "application/json");
      (r && r->status == 413 ? bombs : bomb_failures)++;
      (raw_exchange(server.port(), chunked).substr(0, 12) == "HTTP/1.1 413" ? bombs
                                                                            : bomb_failures)++;
    }
  });
  for (std::thread& th : threads) th.join();
  const int64_t rss_after = rss_kib(server.pid());
  const std::string metrics = server.client().Get("/metrics")->body;
  const size_t abandoned_at = metrics.find("\ndsinfer_requests_abandoned_total ");
  std::fprintf(
      stderr,
      "soak: %d streams answered, %d failed, %d hang-ups (%s abandoned unread), %d bombs "
      "refused, RSS %lld -> %lld KiB\n",
      answered.load(), failed.load(), storms.load(),
      metrics.substr(abandoned_at + 34, metrics.find('\n', abandoned_at + 1) - abandoned_at - 34)
          .c_str(),
      bombs.load(), static_cast<long long>(rss_before), static_cast<long long>(rss_after));
  EXPECT_EQ(failed, 0) << answered
                       << " streams answered in full; the first failure: " << first_failure;
  EXPECT_GT(answered, 16);
  EXPECT_GT(storms, 100);
  EXPECT_EQ(bomb_failures, 0) << bombs << " bombs refused";
  EXPECT_GT(bombs, 2);
  if (!kAddressSanitizer) {
    EXPECT_LT(rss_after - rss_before, 256 << 10) << rss_before << " KiB -> " << rss_after << " KiB";
  }
  const double t0 = now_seconds();
  EXPECT_EQ(server.terminate(), 0);
  EXPECT_LT(now_seconds() - t0, 7.0);
}

// Two ranks behind one endpoint (rank 0 serves and broadcasts each step; rank 1 follows): the
// reference's mp2 transcript for greedy chat, concurrent streams equal to their solo answers,
// sampled answers the same whether the step gathers whole rows or each rank's best candidate, and
// SIGTERM through the launcher ends both ranks.
class ServeRanks : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeRanks, TwoRanksAnswerAsTheReferenceAtWorldSizeTwo) {
  if (std::string why = test::backend_unavailable(GetParam()); !why.empty()) GTEST_SKIP() << why;
  Served server({}, GetParam());
  const json golden =
      json::parse(test::read_file(test::data_path("golden/tiny-v3-story/chat-mp2-fp32.json")));
  const auto pairs = transcript(golden["batch"]["stdout"]);
  ASSERT_GE(pairs.size(), 2u);
  std::vector<std::future<std::string>> got;
  for (const auto& [prompt, completion] : pairs)
    got.push_back(std::async(std::launch::async, [&, p = prompt] {
      auto r =
          server.post("/v1/chat/completions", chat_body(p, golden["max_new_tokens"], true).dump());
      bool done = false;
      return r ? stream_content(r->body, &done)
               : "(no response: " + httplib::to_string(r.error()) + ")";
    }));
  for (size_t i = 0; i < pairs.size(); ++i)
    EXPECT_EQ(got[i].get(), pairs[i].second) << pairs[i].first;
  // sampled: without logprobs each rank draws on its slice of the vocabulary and they gather one
  // candidate each (engine/vocab_draw.h); with them the step gathers whole rows. Same tokens.
  for (uint64_t seed : {7, 8}) {
    json b = chat_body(pairs[0].first, 48);
    b["temperature"] = 2;  // hot: draws reach the upper half of the ids, rank 1's
    b["seed"] = seed;
    const json sliced = json::parse(server.post("/v1/chat/completions", b.dump())->body);
    b["logprobs"] = true;
    const json whole = json::parse(server.post("/v1/chat/completions", b.dump())->body);
    EXPECT_EQ(sliced["choices"][0]["message"]["content"], whole["choices"][0]["message"]["content"])
        << seed;
    EXPECT_EQ(whole["choices"][0]["logprobs"]["content"].size(),
              whole["usage"]["completion_tokens"].get<size_t>());
  }
  // structured output at world size 2: every rank builds the request's grammar from rank 0's
  // orders and masks its own slice; the answer is valid, sliced or whole
  for (uint64_t seed : {3, 4}) {
    json b = chat_body(pairs[0].first, 60);
    b["temperature"] = 2;
    b["seed"] = seed;
    b["response_format"] = {{"type", "json_schema"},
                            {"json_schema", {{"name", "p"}, {"schema", person_schema()}}}};
    const json sliced = json::parse(server.post("/v1/chat/completions", b.dump())->body);
    b["logprobs"] = true;
    const json whole = json::parse(server.post("/v1/chat/completions", b.dump())->body);
    const std::string text = sliced["choices"][0]["message"]["content"];
    EXPECT_EQ(text, whole["choices"][0]["message"]["content"]) << seed;
    const json value = json::parse(text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << text;
    EXPECT_EQ(test::schema_violation(value, person_schema(), person_schema()), "") << text;
  }
  // SIGTERM to `dsinfer run`: the ranks drain and every process ends with status 0 (under Open MPI
  // `run` keeps mpirun a child and hands the signal on as SIGUSR1, which mpirun forwards)
  EXPECT_EQ(server.terminate(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, ServeRanks, ::testing::Values("mpi", "gloo"),
                         [](const auto& info) { return test::backend_test_name(info.param); });

}  // namespace
}  // namespace dsinfer::serve_test
