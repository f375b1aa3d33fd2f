// transformers.js chat on a text-generation package folder, under Node:
// node transformers_chat.mjs PACKAGE NEW_TOKENS MESSAGES_JSON... -> one JSON line per conversation:
// {"ids": the tokenizer's chat template applied with the generation prompt, "tokens": the greedy
// tokens generated after them (up to NEW_TOKENS or the end-of-sequence token), "reply": the
// text-generation pipeline's assistant message for the same conversation}
// Opened with the runtime's defaults (no dtype, no device): config.json's transformers.js_config names the files.
import path from "node:path";
import { AutoModelForCausalLM, AutoTokenizer, env, pipeline } from "@huggingface/transformers";

const [pkg, count, ...conversations] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(pkg)) + path.sep;
const name = path.basename(path.resolve(pkg));
const tokenizer = await AutoTokenizer.from_pretrained(name);
const model = await AutoModelForCausalLM.from_pretrained(name);
const chat = await pipeline("text-generation", name);
const n = Number(count);
for (const text of conversations) {
  const messages = JSON.parse(text);
  const inputs = tokenizer.apply_chat_template(messages, { add_generation_prompt: true, return_dict: true });
  const ids = Array.from(inputs.input_ids.data, Number);
  const out = await model.generate({ ...inputs, max_new_tokens: n, do_sample: false });
  const said = await chat(messages, { max_new_tokens: n, do_sample: false });
  const reply = said[0].generated_text.at(-1).content;
  console.log(JSON.stringify({ ids, tokens: Array.from(out.data, Number).slice(ids.length), reply }));
}
