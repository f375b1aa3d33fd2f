// transformers.js speech recognition on a package folder, under Node:
// node transformers_asr.mjs PACKAGE AUDIO.f32 MAX_NEW_TOKENS -> one JSON line {"text": the
// automatic-speech-recognition pipeline's text, "tokens": the greedy tokens of the model's own
// generate() on the processor's features (Whisper) or samples (Moonshine) (after the prompt tokens it starts from)}. AUDIO.f32:
// raw little-endian float32 samples at 16 kHz.
// Opened with the runtime's defaults (no dtype, no device): config.json's transformers.js_config names the files.
import fs from "node:fs";
import path from "node:path";
import { AutoModelForSpeechSeq2Seq, AutoProcessor, env, pipeline } from "@huggingface/transformers";

const [pkg, audioFile, count] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(pkg)) + path.sep;
const name = path.basename(path.resolve(pkg));
const bytes = fs.readFileSync(audioFile);
const audio = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
const transcriber = await pipeline("automatic-speech-recognition", name);
const heard = await transcriber(audio, { max_new_tokens: Number(count) });
const processor = await AutoProcessor.from_pretrained(name);
const model = await AutoModelForSpeechSeq2Seq.from_pretrained(name);
const inputs = await processor(audio);
const out = await model.generate({ ...inputs, max_new_tokens: Number(count), do_sample: false });
console.log(JSON.stringify({ text: heard.text, tokens: Array.from(out.data, Number) }));
