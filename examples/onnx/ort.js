// Runs an ONNX model with ONNX Runtime (onnxruntime-node), for this
// example and package onnx's tests: node ort.js model.onnx inputs.json
// prints the outputs as JSON, {name: {dims, data}}. inputs.json is [{name, type, dims, data}],
// type "float32", "float64", "int64" or "int32".
const ort = require('onnxruntime-node');
const fs = require('fs');

async function main() {
  const [model, inputs] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model);
  const feeds = {};
  for (const x of JSON.parse(fs.readFileSync(inputs, 'utf8'))) {
    const data = {
      float32: () => Float32Array.from(x.data),
      float64: () => Float64Array.from(x.data),
      int64: () => BigInt64Array.from(x.data.map(BigInt)),
      int32: () => Int32Array.from(x.data),
    }[x.type]();
    feeds[x.name] = new ort.Tensor(x.type, data, x.dims);
  }
  const out = await session.run(feeds);
  const result = {};
  for (const [name, t] of Object.entries(out)) {
    result[name] = {dims: t.dims.map(Number), data: Array.from(t.data, Number)};
  }
  process.stdout.write(JSON.stringify(result));
}

main().catch((e) => { console.error(e.message); process.exit(1); });
