// Package onnxpb holds ONNX's protobuf messages (ModelProto, GraphProto,
// NodeProto, TensorProto, ...), generated from onnx.proto of ONNX 1.12
// (Debian's python3-onnx, /usr/lib/python3/dist-packages/onnx/onnx.proto),
// by protoc 3.21.12 (Debian's protobuf-compiler) and protoc-gen-go
// v1.36.12 (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12):
//
//	go generate ./internal/onnxpb
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto=github.com/gathergrad/gather/internal/onnxpb onnx.proto
