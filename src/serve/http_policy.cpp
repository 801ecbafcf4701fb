#include "serve/http_policy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "core/error.h"
#include "serve/request.h"
#include "serve/responses.h"

namespace dsinfer {

bool authorized_by(const std::string& authorization, const std::string& api_key) {
  if (api_key.empty()) return true;
  constexpr size_t kScheme = 7;  // "Bearer "
  std::string scheme = authorization.substr(0, kScheme);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string got = authorization.size() > kScheme ? authorization.substr(kScheme) : "";
  unsigned diff = scheme == "bearer " ? 0u : 1u;
  diff |= static_cast<unsigned>(api_key.size() ^ got.size());
  for (size_t i = 0; i < api_key.size(); ++i)
    diff |= static_cast<unsigned char>(api_key[i]) ^
            (i < got.size() ? static_cast<unsigned char>(got[i]) : 0u);
  return diff == 0;
}

std::string allowed_origin(const std::vector<std::string>& allowed, const std::string& origin) {
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return "*";
  if (origin.empty()) return "";
  return std::find(allowed.begin(), allowed.end(), origin) != allowed.end() ? origin : "";
}

void allow_cross_origin(httplib::Server& http, const std::vector<std::string>& allowed) {
  http.set_post_routing_handler([&allowed](const httplib::Request& req, httplib::Response& res) {
    const std::string origin = allowed_origin(allowed, req.get_header_value("Origin"));
    if (origin.empty()) return;
    res.set_header("Access-Control-Allow-Origin", origin);
    if (origin != "*") res.set_header("Vary", "Origin");
  });
  http.Options(R"(/.*)", [](const httplib::Request& req, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    const std::string asked = req.get_header_value("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers",
                   asked.empty() ? "Authorization, Content-Type" : asked);
    res.set_header("Access-Control-Max-Age", "86400");
  });
}

void refuse_other_methods(httplib::Server& http, const std::vector<std::string>& post_paths,
                          const std::vector<std::string>& get_paths) {
  auto refuse = [](const char* allow) {
    return [allow](const httplib::Request& req, httplib::Response& res) {
      res.status = 405;
      res.set_header("Allow", allow);
      res.set_content(error_body({405, "invalid_request_error",
                                  cat(req.method, " is not allowed on ", req.path, "; use ", allow),
                                  "", "method_not_allowed"}),
                      "application/json");
    };
  };
  for (const std::string& path : post_paths) http.Get(path, refuse("POST"));
  for (const std::string& path : get_paths) http.Post(path, refuse("GET"));
}

std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader,
                      int64_t max_body, httplib::Response& res) {
  std::string body;
  // (httplib refuses a Content-Length past the limit itself, before any byte reaches us)
  bool too_large = std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) >
                   static_cast<uint64_t>(max_body);
  const bool complete = reader([&](const char* data, size_t n) {
    if (body.size() + n > static_cast<size_t>(max_body)) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_large || !complete) res.set_header("Connection", "close");  // the rest is unread
  if (too_large)
    reject(cat("the request body exceeds --max-body (", max_body,
               " bytes, counted after any decoding)"),
           "", 413);
  if (!complete)
    reject("the request body could not be read (cut off, or a bad chunked or compressed encoding)");
  return body;
}

std::string launch_id() {
  std::random_device device;
  char out[9];
  std::snprintf(out, sizeof out, "%08x", static_cast<unsigned>(device()));
  return out;
}

}  // namespace dsinfer
