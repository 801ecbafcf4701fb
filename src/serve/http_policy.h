// What every HTTP answer of the server shares, apart from its endpoint: who may call (the API key),
// from which web origins a browser may (CORS), how a body is read, which method an endpoint takes,
// and the response ids.
#pragma once

#include <httplib.h>

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

// CORS on `http`: every answer names the allowed origin (allowed_origin; `allowed` must outlive
// the server), and a browser's preflight (OPTIONS, any path) gets the methods and the headers it
// asked for.
void allow_cross_origin(httplib::Server& http, const std::vector<std::string>& allowed);

// The other method on an endpoint is a 405 naming the one it takes (it was a 404).
void refuse_other_methods(httplib::Server& http, const std::vector<std::string>& post_paths,
                          const std::vector<std::string>& get_paths);

// The request's body as cpp-httplib decodes it (chunked, gzip, deflate), at most `max_body` bytes
// of it: httplib's own limit applies only to a Content-Length, not to what a chunked or compressed
// body becomes (a 306 KB gzip body was 300 MB), and its 8 KiB limit on form-encoded bodies (what
// `curl -d` sends) does not apply here: every body is JSON to us. Too large: an ApiError 413;
// cut off or badly encoded: 400 (either way the connection closes, the rest unread).
std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader,
                      int64_t max_body, httplib::Response& res);

// The prefix of this launch's response ids ("chatcmpl-<prefix>-<n>"): random, so that ids from
// two launches of the server never collide (they restarted at chatcmpl-0).
std::string launch_id();

}  // namespace dsinfer
