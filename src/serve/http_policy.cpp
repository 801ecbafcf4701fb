#include "serve/http_policy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>

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

std::string launch_id() {
  std::random_device device;
  char out[9];
  std::snprintf(out, sizeof out, "%08x", static_cast<unsigned>(device()));
  return out;
}

}  // namespace dsinfer
