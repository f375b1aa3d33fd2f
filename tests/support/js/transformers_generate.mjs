// transformers.js (@huggingface/transformers, onnxruntime-node) on a package folder:
// node transformers_generate.mjs PACKAGE NEW_TOKENS TEXT... -> one JSON line per text:
// {"ids": the tokenizer's ids of TEXT, "tokens": the greedy tokens generated after them, up to
// NEW_TOKENS or the end-of-sequence token}
// Opened with the runtime's defaults (no dtype, no device): config.json's transformers.js_config names the files.
import path from "node:path";
import { AutoModelForCausalLM, AutoTokenizer, env } from "@huggingface/transformers";

const [pkg, count, ...texts] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(pkg)) + path.sep;
const name = path.basename(path.resolve(pkg));
const tokenizer = await AutoTokenizer.from_pretrained(name);
const model = await AutoModelForCausalLM.from_pretrained(name);
for (const text of texts) {
  const inputs = tokenizer(text);
  const ids = Array.from(inputs.input_ids.data, Number);
  const n = Number(count);
  const out = await model.generate({ ...inputs, max_new_tokens: n, do_sample: false });
  console.log(JSON.stringify({ ids, tokens: Array.from(out.data, Number).slice(ids.length) }));
}
