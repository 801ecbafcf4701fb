#include "serve/chat_page.h"

namespace dsinfer {

const char* chat_page_html() {
  return R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dsinfer chat</title>
<link rel="icon" href="data:,">
<style>
  :root { color-scheme: light dark; --line: #8884; --muted: #888; --accent: #2f6fde; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, sans-serif; display: flex; flex-direction: column;
         height: 100vh; }
  header { display: flex; align-items: center; gap: 1em; padding: .5em 1em;
           border-bottom: 1px solid var(--line); }
  header h1 { font-size: 1.05em; margin: 0; }
  header .model { color: var(--muted); }
  details.settings { margin-left: auto; }
  details.settings[open] > div { position: absolute; right: 1em; z-index: 1; padding: 1em;
    background: Canvas; border: 1px solid var(--line); border-radius: 8px; display: grid;
    grid-template-columns: auto 16em; gap: .5em 1em; }
  #messages { flex: 1; overflow-y: auto; padding: 1em; }
  .turn { max-width: 52em; margin: 0 auto 1em; white-space: pre-wrap; word-wrap: break-word; }
  .turn.user { background: #8881; border-radius: 8px; padding: .5em .8em; }
  .turn .who { font-size: .8em; color: var(--muted); }
  .reasoning { color: var(--muted); font-size: .92em; border-left: 3px solid var(--line);
               padding-left: .6em; margin: .3em 0; }
  .reasoning:empty, details.think:not(:has(.reasoning:not(:empty))) { display: none; }
  .error { color: #c33; }
  form { display: flex; gap: .5em; padding: .8em 1em; border-top: 1px solid var(--line); }
  textarea#input { flex: 1; min-height: 3em; resize: vertical; font: inherit; padding: .4em; }
  button { font: inherit; padding: .4em 1.2em; border-radius: 6px; border: 1px solid var(--line); }
  button#send { background: var(--accent); color: white; }
  button:disabled { opacity: .5; }
  #status { font-size: .8em; color: var(--muted); min-width: 6em; align-self: center; }
</style>
</head>
<body>
<header>
  <h1>dsinfer</h1><span class="model" id="model"></span>
  <details class="settings"><summary>Settings</summary><div>
    <label for="system">System prompt</label><textarea id="system" rows="3"></textarea>
    <label for="temperature">Temperature</label>
    <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.6">
    <label for="max-tokens">Max tokens</label>
    <input id="max-tokens" type="number" min="1" step="1" value="1024">
    <label for="seed">Seed (empty: random)</label><input id="seed" type="number" step="1">
    <label for="api-key">API key</label><input id="api-key" type="password" autocomplete="off">
    <button type="button" id="clear">New chat</button>
  </div></details>
</header>
<main id="messages"></main>
<form id="form">
  <textarea id="input" placeholder="Message (Enter sends, Shift+Enter for a new line)"></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
  <span id="status"></span>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const history = [];  // the conversation sent with each request
let controller = null;
for (const id of ["system", "temperature", "max-tokens", "seed", "api-key"]) {
  const saved = localStorage.getItem("dsinfer." + id);
  if (saved !== null) $(id).value = saved;
  $(id).addEventListener("change", () => localStorage.setItem("dsinfer." + id, $(id).value));
}
function headers() {
  const h = { "Content-Type": "application/json" };
  if ($("api-key").value) h["Authorization"] = "Bearer " + $("api-key").value;
  return h;
}
fetch("v1/models", { headers: headers() }).then((r) => r.json())
  .then((j) => { $("model").textContent = j.data && j.data[0] ? j.data[0].id : ""; })
  .catch(() => {});
function addTurn(role) {
  const div = document.createElement("div");
  div.className = "turn " + role;
  div.innerHTML = '<div class="who"></div>' +
    (role === "assistant" ? '<details class="think" open><summary>Reasoning</summary>' +
                            '<div class="reasoning"></div></details>' : "") +
    '<div class="text"></div>';
  div.querySelector(".who").textContent = role === "user" ? "You" : "Assistant";
  $("messages").appendChild(div);
  return div;
}
function setBusy(busy, status) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  $("status").textContent = status;
}
async function send(text) {
  const user = addTurn("user");
  user.querySelector(".text").textContent = text;
  history.push({ role: "user", content: text });
  const turn = addTurn("assistant");
  const answerEl = turn.querySelector(".text"), reasoningEl = turn.querySelector(".reasoning");
  const body = { messages: [], stream: true, temperature: Number($("temperature").value),
                 max_tokens: Number($("max-tokens").value) };
  if ($("system").value.trim()) body.messages.push({ role: "system", content: $("system").value });
  body.messages.push(...history);
  if ($("seed").value !== "") body.seed = Number($("seed").value);
  controller = new AbortController();
  setBusy(true, "answering");
  let answer = "", status = "done";
  try {
    const res = await fetch("v1/chat/completions", { method: "POST", headers: headers(),
      body: JSON.stringify(body), signal: controller.signal });
    if (!res.ok) {
      const err = await res.json().catch(() => ({}));
      throw new Error((err.error && err.error.message) || res.statusText);
    }
    const reader = res.body.getReader(), decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
          const chunk = JSON.parse(line.slice(6));
          if (chunk.error) throw new Error(chunk.error.message);
          for (const c of chunk.choices || []) {
            const d = c.delta || {};
            if (d.reasoning_content) reasoningEl.textContent += d.reasoning_content;
            if (d.content) { answer += d.content; answerEl.textContent = answer; }
            if (c.finish_reason) status = "done (" + c.finish_reason + ")";
          }
          $("messages").scrollTop = $("messages").scrollHeight;
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") status = "stopped";
    else { status = "error"; answerEl.insertAdjacentHTML("beforeend", '<div class="error"></div>');
           answerEl.lastChild.textContent = String(e.message || e); }
  }
  history.push({ role: "assistant", content: answer });
  turn.dataset.done = status;
  controller = null;
  setBusy(false, status);
}
$("form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("clear").addEventListener("click", () => { history.length = 0; $("messages").textContent = "";
                                             $("status").textContent = ""; });
</script>
</body>
</html>
)PAGE";
}

}  // namespace dsinfer
