// transformers.js (onnxruntime-node) decoding a package greedily, timed per token:
// node transformers_js_decode.mjs PACKAGE IDS_JSON NEW_TOKENS -> one JSON line
// {"first_token_s", "decode_tok_s", "tokens", "peak_rss_mb"} (decode_timing.mjs).
import path from "node:path";
import * as transformers from "@huggingface/transformers";
import { timedGenerate } from "./decode_timing.mjs";

const [pkg, idsJson, count] = process.argv.slice(2);
transformers.env.allowRemoteModels = false;
transformers.env.localModelPath = path.dirname(path.resolve(pkg)) + path.sep;
const result = await timedGenerate(transformers, path.basename(path.resolve(pkg)), JSON.parse(idsJson), Number(count));
console.log(JSON.stringify({ ...result, peak_rss_mb: process.resourceUsage().maxRSS / 1024 }));
