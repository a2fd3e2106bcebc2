#!/usr/bin/env node
// The official `openai` npm client (pinned in scripts/fetch-tokenizers.sh) against a running
// bin/serve (tests/bin/serve_openai_test.sh):
//   node scripts/openai_client_check.js BASE_URL TEMPLATE_FILE
// (TEMPLATE_FILE: a .jinja file, or a tokenizer_config.json whose chat_template, bos_token and
// eos_token are used, as bin/serve --chat-template reads them)
// completions, chat (plain, streamed, with logprobs, streamed with logprobs), models.list, and
// errors (an unknown route: 404; a bad request: 400, raised as APIError with the server's
// message). Then the greedy chat answer must
// equal a greedy completion of the conversation rendered with @huggingface/jinja (the
// reference renderer), i.e. bin/serve's template rendering + encoding + generation by hand.
"use strict";
const fs = require("fs");
const path = require("path");
const npm = path.join(__dirname, "..", "data/npm/node_modules");
const OpenAI = require(path.join(npm, "openai"));
const { Template } = require(path.join(npm, "@huggingface/jinja"));

const [base, templateFile] = process.argv.slice(2);
const client = new OpenAI({ apiKey: "none", baseURL: base, maxRetries: 0, timeout: 30000 });
// The template and the bos/eos texts bin/serve renders with.
const chatTemplate = (() => {
  const text = fs.readFileSync(templateFile, "utf8");
  if (!templateFile.endsWith(".json")) return { source: text, bos: "", eos: "" };
  const cfg = JSON.parse(text);
  const token = (t) => (typeof t === "string" ? t : t && typeof t.content === "string" ? t.content
                                                                                      : "");
  return { source: cfg.chat_template, bos: token(cfg.bos_token), eos: token(cfg.eos_token) };
})();
const assert = (cond, msg) => {
  if (!cond) throw new Error("FAIL: " + msg);
};

async function expectError(promise, status, pattern, what) {
  try {
    await promise;
  } catch (e) {
    assert(e instanceof OpenAI.APIError, `${what}: not an APIError: ${e}`);
    assert(e.status === status, `${what}: status ${e.status}, expected ${status}`);
    assert(pattern.test(e.message), `${what}: message '${e.message}' does not match ${pattern}`);
    assert(e.error && typeof e.error.message === "string" && e.error.type, `${what}: error body`);
    return;
  }
  throw new Error(`FAIL: ${what}: no error raised`);
}

async function main() {
  const models = await client.models.list();
  assert(models.data.length === 1 && models.data[0].object === "model", "models.list");
  const model = models.data[0].id;

  const c = await client.completions.create({ model, prompt: "In the beginning", max_tokens: 5,
                                              temperature: 0 });
  assert(c.object === "text_completion" && c.choices[0].text.length > 0, "completion text");

  const messages = [
    { role: "system", content: "You answer in verse." },
    { role: "user", content: "In the beginning" },
  ];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 6,
                                                      temperature: 0, seed: 1 });
  assert(chat.object === "chat.completion", "chat object");
  const msg = chat.choices[0].message;
  assert(msg.role === "assistant" && typeof msg.content === "string", "chat message");
  assert(["stop", "length"].includes(chat.choices[0].finish_reason), "chat finish_reason");
  assert(chat.usage.completion_tokens > 0, "chat usage");

  const stream = await client.chat.completions.create({ model, messages, max_tokens: 6,
                                                        temperature: 0, stream: true });
  let streamed = "", first = true, finish = null;
  for await (const chunk of stream) {
    assert(chunk.object === "chat.completion.chunk", "chunk object");
    const d = chunk.choices[0].delta;
    if (first) assert(d.role === "assistant", "the first delta carries the role");
    first = false;
    streamed += d.content || "";
    finish = chunk.choices[0].finish_reason || finish;
  }
  assert(streamed === msg.content, `streamed '${streamed}' != '${msg.content}'`);
  assert(finish === chat.choices[0].finish_reason, "streamed finish_reason");

  // Reference rendering + a completion of it: the same greedy text.
  const rendered = new Template(chatTemplate.source).render({
    messages, add_generation_prompt: true, bos_token: chatTemplate.bos,
    eos_token: chatTemplate.eos, tools: null });
  const byHand = await client.completions.create({ model, prompt: rendered, max_tokens: 6,
                                                   temperature: 0 });
  assert(byHand.choices[0].text === msg.content,
         `chat '${msg.content}' != completion of the rendered template '${byHand.choices[0].text}'`);

  // Chat logprobs (choices[].logprobs.content[]) equal the completion's of the rendered prompt.
  const lp = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0,
                                                    logprobs: true, top_logprobs: 2 });
  const content = lp.choices[0].logprobs.content;
  const ref = await client.completions.create({ model, prompt: rendered, max_tokens: 4,
                                                temperature: 0, logprobs: 2 });
  const refLp = ref.choices[0].logprobs;
  assert(content.length === refLp.tokens.length && content.length > 0, "logprobs count");
  content.forEach((e, i) => {
    assert(e.token === refLp.tokens[i], `logprobs token ${i}`);
    assert(Math.abs(e.logprob - refLp.token_logprobs[i]) < 1e-6, `logprob ${i}`);
    assert(e.top_logprobs.length >= 1 && e.top_logprobs.length <= 2, `top_logprobs ${i}`);
    assert(e.top_logprobs[0].token === e.token, `greedy token ${i} is its top alternative`);
    assert(Buffer.from(e.bytes).toString("utf8") === e.token, `bytes ${i}`);
  });

  // Streamed with logprobs: the chunks' content entries, in order, are the unstreamed ones.
  const lpStream = await client.chat.completions.create({ model, messages, max_tokens: 4,
                                                          temperature: 0, logprobs: true,
                                                          top_logprobs: 2, stream: true });
  const streamedLp = [];
  for await (const chunk of lpStream) {
    const l = chunk.choices[0].logprobs;
    if (l && l.content) streamedLp.push(...l.content);
  }
  assert(streamedLp.length === content.length, "streamed logprobs count");
  streamedLp.forEach((e, i) => {
    assert(e.token === content[i].token, `streamed logprobs token ${i}`);
    assert(Math.abs(e.logprob - content[i].logprob) < 1e-6, `streamed logprob ${i}`);
  });

  await expectError(client.get("/nope"), 404, /unknown route GET \/v1\/nope/, "unknown route");
  await expectError(client.chat.completions.create({ model, messages: [] }), 400,
                    /'messages' must be a non-empty list/, "empty messages");
  await expectError(client.completions.create({ model, prompt: "x", temperature: -1 }), 400,
                    /'temperature' must be >= 0/, "bad temperature");
  await expectError(client.post("/models", { body: {} }), 405, /not allowed/, "wrong method");
  console.log("openai client: completions, chat, chat stream, logprobs stream, models, errors: ok");
}

main().catch((e) => {
  console.error(e.message || e);
  process.exit(1);
});
