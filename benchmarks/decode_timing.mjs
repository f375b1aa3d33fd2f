// Greedy decoding with transformers.js, timed per token: shared by the Node run
// (transformers_js_decode.mjs) and the browser page of against_llama_cpp.py. One warm-up
// request, then NEW tokens after the prompt IDS (none stops early):
// {"first_token_s", "decode_tok_s", "tokens"}. The package is opened with the runtime's
// defaults (no dtype, no device), as a user opens it.
export async function timedGenerate({ AutoModelForCausalLM, Tensor }, name, ids, n) {
  const model = await AutoModelForCausalLM.from_pretrained(name);
  const inputs = {
    input_ids: new Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]),
    attention_mask: new Tensor("int64", new BigInt64Array(ids.length).fill(1n), [1, ids.length]),
  };
  await model.generate({ ...inputs, max_new_tokens: 2, do_sample: false });
  const stamps = [];
  const streamer = { put() { stamps.push(performance.now()); }, end() {} };
  const start = performance.now();
  const out = await model.generate({ ...inputs, max_new_tokens: n, min_new_tokens: n, do_sample: false, streamer });
  const tokens = Array.from(out.data, Number).slice(ids.length);
  const times = stamps.slice(stamps.length - tokens.length); // the streamer is handed the prompt first
  return {
    first_token_s: (times[0] - start) / 1000,
    decode_tok_s: (tokens.length - 1) / ((times[times.length - 1] - times[0]) / 1000),
    tokens,
  };
}
