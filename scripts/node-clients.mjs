// Run by scripts/node-clients: each client's call through the gateway, checked, one
// line each; exits 1 if any fails. GATEWAY_URL is the gateway's base URL.
import { writeFileSync } from "node:fs";
import OpenAI from "openai";
import { generateObject, generateText, streamText } from "ai";
import { z } from "zod";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { createAnthropic } from "@ai-sdk/anthropic";

const baseURL = `${process.env.GATEWAY_URL}/v1`;
const model = "Qwen3.8-Flash-Next";
const prompt = "Invent a name for a cat.";
let failed = 0;

async function check(name, run) {
  try {
    const shown = await run();
    console.log(`ok    ${name}: ${shown}`);
  } catch (error) {
    failed += 1;
    console.log(`FAIL  ${name}: ${error?.stack ?? error}`);
  }
}

function must(condition, what) {
  if (!condition) throw new Error(`expected ${what}`);
}

const client = new OpenAI({ baseURL, apiKey: "sk-node", maxRetries: 0 });

await check("openai-node responses.create", async () => {
  const response = await client.responses.create({ model, input: prompt, max_output_tokens: 32 });
  must(response.id.startsWith("resp_") && response.object === "response", "a response object");
  must(response.output_text.length > 0, "text");
  must(response.usage.input_tokens > 0 && response.usage.output_tokens > 0, "usage");
  return `${response.status}, ${response.usage.output_tokens} tokens, ${JSON.stringify(response.output_text.slice(0, 40))}`;
});

await check("openai-node responses.stream", async () => {
  const stream = client.responses.stream({ model, input: prompt, max_output_tokens: 400 });
  const types = [];
  for await (const event of stream) types.push(event.type);
  const final = await stream.finalResponse();
  must(types[0] === "response.created" && types.at(-1) === "response.completed", "the event sequence");
  return `${types.length} events, ${final.usage.output_tokens} tokens`;
});

await check("openai-node rejected field", async () => {
  try {
    await client.responses.create({ model, input: prompt, tools: [{ type: "web_search" }] });
  } catch (error) {
    must(error.status === 400 && error.param === "tools[0].type", "400 naming tools[0].type");
    return `400 ${error.param}: ${error.message.slice(0, 60)}`;
  }
  throw new Error("expected a 400");
});

const openai = createOpenAI({ baseURL, apiKey: "sk-node" });

await check("ai generateText(openai(model))", async () => {
  const { text, usage, finishReason } = await generateText({
    model: openai(model),
    prompt,
    maxOutputTokens: 32,
  });
  must(text.length > 0, "text");
  must(usage.outputTokens > 0, "usage");
  return `${JSON.stringify(finishReason)}, ${usage.outputTokens} tokens, ${JSON.stringify(text.slice(0, 40))}`;
});

await check("ai streamText(openai(model))", async () => {
  const result = streamText({
    model: openai(model),
    system: "Answer in a few words.",
    messages: [{ role: "user", content: prompt }],
    maxOutputTokens: 32,
  });
  let chunks = 0;
  let text = "";
  for await (const part of result.textStream) {
    chunks += 1;
    text += part;
  }
  const usage = await result.usage;
  must(chunks > 0 && text.length > 0, "streamed text");
  return `${chunks} text chunks, ${usage.outputTokens} tokens`;
});

await check("openai-node two turns with previous_response_id", async () => {
  const one = await client.responses.create({ model, input: prompt, max_output_tokens: 32 });
  const two = await client.responses.create({
    model,
    input: "Why that name?",
    previous_response_id: one.id,
    max_output_tokens: 32,
  });
  must(two.previous_response_id === one.id && two.output_text.length > 0, "a second turn");
  return `${one.id.slice(0, 12)}... then ${two.id.slice(0, 12)}...`;
});

// The AI SDK's default provider treats store as true: on the second turn it sends the
// first answer back as {"type": "item_reference", "id": "msg_..."}, which the gateway
// resolves from its store (the default SQLite one: no setting needed).
await check("ai generateText two turns (item_reference)", async () => {
  const messages = [{ role: "user", content: prompt }];
  const first = await generateText({ model: openai(model), messages, maxOutputTokens: 32 });
  messages.push(...first.response.messages, { role: "user", content: "Why that name?" });
  let sent;
  const recorded = createOpenAI({
    baseURL,
    apiKey: "sk-node",
    fetch: async (url, init) => {
      sent = JSON.parse(init.body);
      return fetch(url, init);
    },
  });
  const second = await generateText({ model: recorded(model), messages, maxOutputTokens: 32 });
  // The body as the SDK sent it: tests/fixtures/clients/ai-sdk-openai-*.json records it.
  writeFileSync("ai-sdk-second-turn.json", JSON.stringify(sent, null, 2));
  const references = sent.input.filter((item) => item.type === "item_reference");
  must(references.length > 0, "the first answer sent back as an item_reference");
  must(second.text.length > 0, "a second answer");
  return `${references.length} item_reference, ${JSON.stringify(second.text.slice(0, 40))}`;
});

// Anthropic's Messages API: the SDK takes the base URL without /v1 (it adds
// /v1/messages), the AI SDK's provider with it (it posts to ${baseURL}/messages).
const claude = new Anthropic({ baseURL: process.env.GATEWAY_URL, apiKey: "sk-node", maxRetries: 0 });
const messages = [{ role: "user", content: prompt }];

await check("@anthropic-ai/sdk messages.create", async () => {
  const message = await claude.messages.create({ model, max_tokens: 32, messages, system: "Be brief." });
  must(message.id.startsWith("msg_") && message.type === "message", "a message object");
  must(message.content[0].type === "text" && message.content[0].text.length > 0, "a text block");
  must(message.usage.input_tokens > 0 && message.usage.output_tokens > 0, "usage");
  return `${message.stop_reason}, ${message.usage.output_tokens} tokens, ${JSON.stringify(message.content[0].text.slice(0, 40))}`;
});

await check("@anthropic-ai/sdk messages.stream", async () => {
  const stream = claude.messages.stream({ model, max_tokens: 64, messages, thinking: { type: "adaptive" } });
  const types = [];
  for await (const event of stream) types.push(event.type);
  const final = await stream.finalMessage();
  must(types[0] === "message_start" && types.at(-1) === "message_stop", "the event sequence");
  must(final.content[0].type === "thinking" && final.content[0].signature === "", "a thinking block");
  return `${types.length} events, ${final.content.map((b) => b.type).join("+")}, ${final.usage.output_tokens} tokens`;
});

await check("@anthropic-ai/sdk messages.countTokens", async () => {
  const counted = await claude.messages.countTokens({ model, messages });
  must(Number.isInteger(counted.input_tokens) && counted.input_tokens > 0, "a count");
  return `${counted.input_tokens} input tokens`;
});

await check("@anthropic-ai/sdk rejected field", async () => {
  try {
    await claude.messages.create({
      model, max_tokens: 8, messages,
      tools: [{ name: "get_weather", input_schema: { type: "object" } }],
    });
  } catch (error) {
    must(error.status === 400 && error.error?.error?.type === "invalid_request_error", "Anthropic's 400");
    must(error.error.error.message.startsWith("tools: "), "the field named first");
    must(Boolean(error.requestID), "its request-id");
    return `400 ${error.error.error.message.slice(0, 60)}`;
  }
  throw new Error("expected a 400");
});

const anthropic = createAnthropic({ baseURL, apiKey: "sk-node" });

await check("ai generateText(anthropic(model))", async () => {
  const { text, usage, finishReason } = await generateText({
    model: anthropic(model),
    prompt,
    maxOutputTokens: 32,
  });
  must(text.length > 0 && usage.outputTokens > 0, "text and usage");
  return `${JSON.stringify(finishReason)}, ${usage.outputTokens} tokens, ${JSON.stringify(text.slice(0, 40))}`;
});

await check("ai streamText(anthropic(model))", async () => {
  const result = streamText({
    model: anthropic(model),
    system: "Answer in a few words.",
    messages,
    maxOutputTokens: 32,
  });
  let chunks = 0;
  for await (const part of result.textStream) chunks += part.length > 0 ? 1 : 0;
  const usage = await result.usage;
  must(chunks > 0 && usage.outputTokens > 0, "streamed text");
  return `${chunks} text chunks, ${usage.outputTokens} tokens`;
});
// generateObject against the structured gateway: the engine draws JSON from the schema;
// a .max() (maxLength) the engine drops is refused at its path, on chat and Responses.
const structured = createOpenAI({ baseURL: `${process.env.STRUCTURED_URL}/v1`, apiKey: "sk-node" });
const cat = z.object({ name: z.string(), age: z.number().int() });
const shortCat = z.object({ name: z.string().max(5), age: z.number().int() });
for (const [kind, make, where] of [
  ["chat", (m) => structured.chat(m), "response_format.json_schema.schema"],
  ["responses", (m) => structured(m), "text.format.schema"],
]) {
  await check(`ai generateObject (${kind})`, async () => {
    const { object } = await generateObject({ model: make(model), schema: cat, prompt, seed: 7, maxRetries: 0 });
    must(typeof object.name === "string" && Number.isInteger(object.age), "a cat");
    return JSON.stringify(object).slice(0, 60);
  });
  await check(`ai generateObject (${kind}), maxLength refused`, async () => {
    try {
      await generateObject({ model: make(model), schema: shortCat, prompt, maxRetries: 0 });
    } catch (error) {
      const body = JSON.parse(error.responseBody ?? "{}").error ?? {};
      must(error.statusCode === 400, `a 400, got ${error.statusCode}`);
      must(body.param === `${where}.properties.name.maxLength`, `the keyword's path, got ${body.param}`);
      must(body.code === "unsupported_schema_keyword", "unsupported_schema_keyword");
      return `400 ${body.param}`;
    }
    throw new Error("expected a 400");
  });
}

process.exit(failed ? 1 : 0);
