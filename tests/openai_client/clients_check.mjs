// The Vercel AI SDK (@ai-sdk/openai-compatible) and LangChain.js (@langchain/openai) against dsinfer
// serve, as their users call them. Run by tests/serve_clients_test.cpp:
//   PORT=8000 MODEL=story PROMPT=... node clients_check.mjs
// Prints one JSON line: greedy texts (generateText, streamText, invoke, stream) and structured
// objects (generateObject, generateText with Output.object, withStructuredOutput by JSON Schema and by function calling), or the
// error each raised.
import { generateObject, generateText, Output, streamText } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const env = process.env;
const baseURL = `http://127.0.0.1:${env.PORT}/v1`;
const result = {};
async function record(name, run) {
  try {
    result[name] = await run();
  } catch (e) {
    result[name] = { error: String(e && e.message || e) };
  }
}
// bounded fields: the tiny test model ends a free string only by chance
const person = z.object({
  name: z.string().max(12),
  age: z.number().int().min(0).max(120),
  color: z.enum(["red", "green", "blue"]),
});

const provider = createOpenAICompatible({
  name: "dsinfer", baseURL, apiKey: "none", supportsStructuredOutputs: true,
});
const model = provider.chatModel(env.MODEL);
await record("ai_generateText", async () =>
  (await generateText({ model, prompt: env.PROMPT, temperature: 0, maxOutputTokens: 40 })).text);
await record("ai_streamText", async () => {
  const s = streamText({ model, prompt: env.PROMPT, temperature: 0, maxOutputTokens: 40 });
  let text = "";
  for await (const delta of s.textStream) text += delta;
  return text;
});
await record("ai_generateObject", async () =>
  (await generateObject({ model, schema: person, prompt: "Describe a person.", temperature: 1,
                          seed: 3, maxOutputTokens: 200 })).object);
// generateObject's successor: generateText with a structured output setting
await record("ai_outputObject", async () =>
  (await generateText({ model, output: Output.object({ schema: person }),
                        prompt: "Describe a person.", temperature: 1, seed: 4,
                        maxOutputTokens: 200 })).output);

const llm = new ChatOpenAI({
  model: env.MODEL, apiKey: "none", configuration: { baseURL }, temperature: 0, maxTokens: 40,
});
await record("lc_invoke", async () => (await llm.invoke(env.PROMPT)).content);
await record("lc_stream", async () => {
  let text = "";
  for await (const chunk of await llm.stream(env.PROMPT)) text += chunk.content;
  return text;
});
const hot = new ChatOpenAI({
  model: env.MODEL, apiKey: "none", configuration: { baseURL }, temperature: 1, maxTokens: 200,
  modelKwargs: { seed: 5 },
});
await record("lc_structured_json_schema", async () =>
  hot.withStructuredOutput(person, { name: "person", method: "jsonSchema" })
     .invoke("Describe a person."));
await record("lc_structured_function_calling", async () =>
  hot.withStructuredOutput(person, { name: "person", method: "functionCalling" })
     .invoke("Describe a person."));
console.log(JSON.stringify(result));
