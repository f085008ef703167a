// Package onnx brings ONNX models (the format PyTorch, TensorFlow and
// scikit-learn export to, and ONNX Runtime serves) into Gorgonia graphs,
// to run and to fine-tune in Go.
//
// ReadFile (or Import) builds a model's graph with this module's Gather
// and GatherElements, nn's Linear, Concat and LogSoftmax, and Gorgonia's
// ops. Its initializers become learnable nodes under their ONNX names
// (PyTorch's state_dict names, "l1.weight"), so that Gorgonia's solvers
// train them and checkpoint.Nodes saves them; the tables Options.Sparse
// names become row-sparse nn.Embedding tables whose Gathers are Lookups
// (Model.Embeddings, stepped by an optim.Sparse). Its inputs are nodes to
// give values (gorgonia.Let), their symbolic dimensions sized by
// Options.Dims.
//
// The operators Import reads (Ops), in their forms of opsets 13 to 17:
//
//	Gather, GatherElements        this module's ops: any axis, negative indices
//	Gemm                          alpha, beta, transA, transB; C broadcast
//	MatMul                        of matrices, a matrix and a vector, vectors, stacks of matrices (rank 3)
//	Add, Sub, Mul, Div            numpy broadcasting
//	Neg, Exp, Log, Relu, Sigmoid, Tanh, Identity
//	Concat, Transpose
//	Flatten                       axis in [-r, r], negative counting from the back
//	Reshape                       to a shape known when the graph is built (0 and -1 as ONNX says)
//	Softmax, LogSoftmax           along one axis (opset 13's)
//	ReduceSum, ReduceMean         any axes, keepdims (nn.Sum, nn.Mean); ReduceSum's axes a constant input
//	Constant                      its value a tensor
//	Cast                          to the type its input has (a half weight read as float)
//
// Every attribute of a node is one Import honours or refuses by name.
//
// ONNX's own conformance suite (onnx 1.12's backend test data, Debian's
// libonnx-testdata: 1,072 models) holds 177 models whose operators are
// all among these. Import reads and runs 94 of them to the suite's
// outputs and refuses the other 83, each with an error naming why: 36
// import an opset before 13, 19 compute a shape or the axes of a
// ReduceSum as the graph runs (a Gorgonia graph has fixed shapes), 16
// hold an element type Import does not read (uint8, float16 or bfloat16
// inputs, strings), 8 cast to another type, 1 multiplies stacks of
// matrices of rank 4, 2 take an optional or a sequence input, and 1 reshapes with
// allowzero. None gives a wrong answer or fails as it runs
// (TestConformance); each of the 94 exported by Export is run by ONNX
// Runtime to the suite's outputs and imported again to the same bits.
//
// Export writes a graph of this module's ops back (ExportOpset 13), for
// ONNX Runtime, Triton or any other runtime to serve: Import(Export(g))
// runs bit for bit as g, and nn.EmbeddingBag is written as a composition
// of standard operators (see Export) that Import reads back as one bag.
//
// Element types: float, double, int64 and int32; float16 and bfloat16
// initializers are read as float32 values (Export writes them with
// Graph.Half). Anything else is an
// error naming the node, its operator and the opset, never a panic: a
// file from an unknown source is read as a hostile one (FuzzImport).
package onnx
