// Package onnx trades edgesched policies with the ML ecosystem in ONNX,
// the exchange format of PyTorch, ONNX Runtime and notebooks (docs/quant.md
// "To PyTorch and back").
//
// Export writes a nn.Model's float network as a standard ONNX graph
// (IR version IRVersion, default-domain opset Opset, standard operators
// only) in the layout PyTorch's exporter gives nn.Linear/nn.ReLU: the
// input's normalisation (Sub, Div), then Gemm (transB=1, weights out x in)
// and Relu (Tanh where the network's hidden layer has it); the critic,
// when asked for, as a second output. The feature schema (ID, names, hash)
// and the decision rule travel in the model's metadata. Import reads such
// a graph back, or one made elsewhere in the supported family (Gemm or
// MatMul+Add, Relu or Tanh, weights as initializers, Constant nodes or
// their Transpose), into a nn.Model that the usual quantize, sign and
// publish path takes (ReLU networks; Tanh ones run in the float path
// only); export then import gives the same weights bit for bit.
//
// Decode is the strict reader under Import: a size cap, a wire-format
// pre-scan that bounds message count and depth before protobuf decoding
// allocates anything, and the versions. The protobuf types (package
// onnxpb) are generated from edgesched's own schema of the part of the
// format it uses; every other field the format defines is listed in
// unmodeled (read.go) and either skipped (documentation, annotations) or
// refused by name (training graphs, functions, subgraphs, sparse or
// external tensors, ...); a field number the format does not define is
// refused. Every tensor's element count is checked before its values are
// copied.
//
// Limits: Relu or Tanh hidden layers (only ReLU networks quantize: the
// int8 scheduler's activations are unsigned 8-bit), a ReLU critic, two
// hidden layers (the policy network's shape), float32
// weights inside the file (no external data), one input of the schema's
// width. What lies outside is refused with ErrUnsupported naming the
// operator, node or shape; unreadable files with ErrFormat.
//
// Concurrency and lifetimes: the functions keep no state; a ModelProto
// is a plain protobuf message, not safe for concurrent mutation. Import
// copies every weight out of the message.
package onnx
