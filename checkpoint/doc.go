// Package checkpoint keeps what a model learned: it writes and reads
// safetensors files (https://github.com/huggingface/safetensors), the
// format PyTorch, NumPy and Hugging Face's tools read, and saves and
// restores whole models from them.
//
//   - Write and Read: any named tensors and string metadata.
//   - Save and Load: the state of the parts of a model (Part): dense
//     learnables (Nodes), embedding tables (package nn's *Embedding, under
//     "<name>.weight", the key of PyTorch's nn.Embedding state dict) and
//     optimiser state (optim.State), for an exact resume.
//
// Nothing a user trained is lost to a crash: Write and Save write a
// temporary file in the target's directory, sync it, rename it over the
// target and sync the directory, so a process killed at any moment leaves
// the previous file or the new one, and the next save to that path
// removes the temporary file a killed one left. Load checks every part
// against the file before it changes any. Read and Load treat a file as
// hostile: a malformed one is an error wrapping ErrFormat, never a panic
// or an allocation beyond the file's size.
package checkpoint
