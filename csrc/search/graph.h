// One problem's operation graph for the engine search: a convolution alone, or a convolution followed by a
// pointwise epilogue (bias, a per-channel scale, a residual add, activations) that cuDNN's fusion engines run as one
// kernel.
//
// Note [fused graphs]: the convolution writes a virtual tensor in its compute type (float for half, bfloat16 and
// float; double for double), each epilogue op reads the previous op's output and writes another virtual tensor, and
// the last writes the direction's output operand in the problem's dtype (forward: y; backward data, i.e. a
// transposed convolution's forward: x). A per-channel operand ("bias", "scale") has dims (1, C, 1, ...) with C the
// output's channels, a full operand ("add") the output's dims; both are in the problem's dtype and layout, as torch
// holds them. Operands keep the uids x, w, y of the plain convolution and add one per operand-bearing op, in order
// (EngineGraph::uids): a plan's variant pack is the three buffers and then the epilogue's operands. Backward filter
// takes no epilogue (nothing in a model follows a weight gradient with one).
//
// Note [kept values]: cuDNN has no pointwise mode for hardswish, x * min(max(x + 3, 0), 6) / 6; the package writes it
// as ops of this table (cudnn_algos/epilogue.py's COMPOSED): "keep" marks the current value x (no node of its own),
// a per-channel "bias" of 3, "relu6", a per-channel "scale" of 1/6 (constant operands the caller passes like any
// other), then "mul_kept" multiplies by x: the graph reads x twice, a pointwise DAG rather than a chain. "keep" may
// not be the last op, and "mul_kept" needs a "keep" before it (std::invalid_argument otherwise).
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "../common/backend_desc.h"
#include "../common/conv_params.h"
#include "../common/directions.h"

namespace cudnn_algos {

enum class EpilogueOp { Bias, Scale, Add, Relu, Relu6, Silu, Gelu, GeluTanh, Sigmoid, Tanh, Keep, MulKept };
// Kept: the value the last "keep" marked (a virtual tensor of the graph, no buffer: Note [kept values])
enum class EpilogueOperand { None, PerChannel, Full, Kept };

// The epilogue ops by the names the package gives them (the binding's Epilogue enum is made from this table;
// cudnn_algos/epilogue.py's GRAPH_OPS is the one Python place, and tests/test_fused_cpu.py checks the two agree).
struct EpilogueOpInfo {
  const char* name;
  EpilogueOp op;
  cudnnPointwiseMode_t mode;
  EpilogueOperand operand;
};
inline constexpr EpilogueOpInfo kEpilogueOps[] = {
    {"bias", EpilogueOp::Bias, CUDNN_POINTWISE_ADD, EpilogueOperand::PerChannel},
    {"scale", EpilogueOp::Scale, CUDNN_POINTWISE_MUL, EpilogueOperand::PerChannel},
    {"add", EpilogueOp::Add, CUDNN_POINTWISE_ADD, EpilogueOperand::Full},
    {"relu", EpilogueOp::Relu, CUDNN_POINTWISE_RELU_FWD, EpilogueOperand::None},
    {"relu6", EpilogueOp::Relu6, CUDNN_POINTWISE_RELU_FWD, EpilogueOperand::None},  // upper clip 6
    {"silu", EpilogueOp::Silu, CUDNN_POINTWISE_SWISH_FWD, EpilogueOperand::None},    // swish with beta 1
    {"gelu", EpilogueOp::Gelu, CUDNN_POINTWISE_GELU_FWD, EpilogueOperand::None},
    {"gelu_tanh", EpilogueOp::GeluTanh, CUDNN_POINTWISE_GELU_APPROX_TANH_FWD, EpilogueOperand::None},
    {"sigmoid", EpilogueOp::Sigmoid, CUDNN_POINTWISE_SIGMOID_FWD, EpilogueOperand::None},
    {"tanh", EpilogueOp::Tanh, CUDNN_POINTWISE_TANH_FWD, EpilogueOperand::None},
    {"keep", EpilogueOp::Keep, CUDNN_POINTWISE_IDENTITY, EpilogueOperand::None},        // no node: marks a value
    {"mul_kept", EpilogueOp::MulKept, CUDNN_POINTWISE_MUL, EpilogueOperand::Kept}};    // times the kept value

const EpilogueOpInfo& epilogue_info(EpilogueOp op);

inline constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';

struct EngineGraph {
  ConvProblem problem;
  Direction direction = Direction::Forward;
  BackendDesc x, w, y, conv, op, graph;
  std::vector<BackendDesc> epilogue;  // its tensors and operations, alive as long as the graph
  // the uids of a plan's variant pack, in the order its pointers come: x, w, y, then the epilogue's operands
  std::vector<int64_t> uids{kUidX, kUidW, kUidY};
  std::vector<std::vector<int64_t>> operand_dims;  // dims of the epilogue's operands, in that order
  // the operation graph's finalize status: only an epilogue graph may be left unfinalized (a row says why)
  cudnnStatus_t graph_status = CUDNN_STATUS_SUCCESS;
  cudnnHandle_t handle = nullptr;
};

// The graph of one problem, direction and epilogue (empty: the convolution alone), finalized with `handle`. A
// failure to describe it throws (CUDNN_CHECK); an epilogue graph cuDNN will not finalize is returned with its status.
std::shared_ptr<EngineGraph> build_graph(Direction dir, const ConvProblem& p, const std::vector<EpilogueOp>& epilogue,
                                         cudnnHandle_t handle);

}  // namespace cudnn_algos
