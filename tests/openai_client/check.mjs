// The official `openai` client (npm, major version 6) against a running `dsinfer serve`: chat and
// text completions, streamed and not, usage, models, tool calls and an error. Prints one JSON
// object of what it saw; tests/serve_openai_client_test.cpp checks it. PORT and MODEL from the env.
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: `http://127.0.0.1:${process.env.PORT}/v1`, apiKey: process.env.KEY ?? 'none', maxRetries: 0 });
const model = process.env.MODEL;
const messages = [{ role: 'user', content: process.env.PROMPT }];
const out = {};

const chat = await client.chat.completions.create({ model, messages, max_tokens: 40, temperature: 0 });
out.chat = chat.choices[0].message.content;
out.finish = chat.choices[0].finish_reason;
out.usage = chat.usage;

const stream = await client.chat.completions.create({ model, messages, max_tokens: 40, temperature: 0, stream: true,
                                                      stream_options: { include_usage: true } });
out.streamed = '';
for await (const chunk of stream) {
  if (chunk.choices.length) out.streamed += chunk.choices[0].delta.content ?? '';
  if (chunk.usage) out.streamed_usage = chunk.usage;
}

const text = await client.completions.create({ model, prompt: process.env.PROMPT, max_tokens: 5, temperature: 0 });
out.completion_tokens = text.usage.completion_tokens;

out.models = [];
for await (const m of client.models.list()) out.models.push(m.id);

try {
  await client.chat.completions.create({ model: 'no-such-model', messages });
  out.error = 'none';
} catch (e) {
  out.error = { status: e.status, message: e.error?.message ?? e.message };
}
console.log(JSON.stringify(out));
