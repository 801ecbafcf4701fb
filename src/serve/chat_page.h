// The built-in chat page served at GET / (README "The chat page"): one self-contained HTML file
// (no external scripts, fonts or CDNs) that talks to this server's /v1/chat/completions with SSE:
// the answer streams in, DeepSeek reasoning shows apart from it (folded), Stop aborts the request
// (the server cancels a request whose client went away), and settings hold the system prompt,
// temperature, max tokens, seed and the API key (kept in the browser's localStorage).
#pragma once

namespace dsinfer {

const char* chat_page_html();

}  // namespace dsinfer
