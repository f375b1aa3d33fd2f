// transformers.js (onnxruntime-node) decoding a package greedily, timed per token:
// node transformers_js_decode.mjs PACKAGE IDS_JSON NEW_TOKENS -> one JSON line
// {"first_token_s", "decode_tok_s", "tokens", "peak_rss_mb"}, after one warm-up request. Opened with the runtime's
// defaults (no dtype, no device), as a user opens a package.
import path from "node:path";
import { AutoModelForCausalLM, Tensor, env } from "@huggingface/transformers";

const [pkg, idsJson, count] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(pkg)) + path.sep;
const model = await AutoModelForCausalLM.from_pretrained(path.basename(path.resolve(pkg)));
const ids = JSON.parse(idsJson);
const n = Number(count);
const inputs = {
  input_ids: new Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]),
  attention_mask: new Tensor("int64", new BigInt64Array(ids.length).fill(1n), [1, ids.length]),
};
await model.generate({ ...inputs, max_new_tokens: 2, do_sample: false }); // one warm-up request
const stamps = [];
const streamer = { put() { stamps.push(performance.now()); }, end() {} };
const start = performance.now();
const out = await model.generate({ ...inputs, max_new_tokens: n, min_new_tokens: n, do_sample: false, streamer });
const tokens = Array.from(out.data, Number).slice(ids.length);
// the streamer is handed the prompt first, then each new token
const times = stamps.slice(stamps.length - tokens.length);
console.log(JSON.stringify({
  first_token_s: (times[0] - start) / 1000,
  decode_tok_s: (tokens.length - 1) / ((times[times.length - 1] - times[0]) / 1000),
  tokens,
  peak_rss_mb: process.resourceUsage().maxRSS / 1024,
}));
