// What every HTTP answer of the server shares, apart from its endpoint: who may call (the API key)
// and from which web origins a browser may (CORS), and the response ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dsinfer {

// Whether an Authorization header carries `api_key` as a bearer token: the scheme in any case
// (RFC 7235: "bearer" and "Bearer" alike), the key compared in constant time in its length.
// No key configured: everyone is.
bool authorized_by(const std::string& authorization, const std::string& api_key);

// The Access-Control-Allow-Origin a request from `origin` gets: "*" when `allowed` holds "*", the
// origin itself when `allowed` lists it, else "" (no header, so the browser refuses the answer).
std::string allowed_origin(const std::vector<std::string>& allowed, const std::string& origin);

// The prefix of this launch's response ids ("chatcmpl-<prefix>-<n>"): random, so that ids from
// two launches of the server never collide (they restarted at chatcmpl-0).
std::string launch_id();

}  // namespace dsinfer
