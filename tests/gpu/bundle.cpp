// fj_gpu_bundle OUT_DIR: writes the GPU check bundle of scripts/gpu-check: for each
// graph of tests/gpu/graphs.h its PTX (sm_80, sm_90), the concrete launch layout
// (buffers, strides, dims table, kernels with grid and block), inputs and the
// outputs the CPU backend computes from them; for the benchmark cases a second,
// large layout without data. Format: OUT_DIR/manifest.txt (read by
// tests/gpu/runner.cpp, which documents it) and raw little-endian .bin files.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "jit/cpu/cpu_backend.h"
#include "jit/cuda/nvptx_backend.h"
#include "tests/gpu/graphs.h"

using namespace fj::jit;
namespace fs = std::filesystem;

namespace {

int64_t eval_int(const SymExpr& e, const Bindings& b) {
  auto v = e.eval(b);
  FJ_CHECK(v && std::holds_alternative<int64_t>(*v), "a size without a value: " + e.str());
  return std::get<int64_t>(*v);
}

Bindings bind_sizes(const Graph& g, const std::vector<Shape>& input_shapes) {
  Bindings b;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::Placeholder) continue;
    for (size_t d = 0; d < n.rank(); ++d) {
      const int id = n.sym[d].symbol_id();
      if (id < 0) continue;
      if (b.values.size() <= static_cast<size_t>(id)) b.values.resize(static_cast<size_t>(id) + 1, SymValue{int64_t{0}});
      b.values[static_cast<size_t>(id)] = input_shapes[static_cast<size_t>(n.index)][d];
    }
  }
  return b;
}

std::vector<char> random_data(DType dt, int64_t numel, std::mt19937_64& rng) {
  std::vector<char> out(static_cast<size_t>(numel) * dtype_size(dt));
  std::uniform_real_distribution<double> real(-3.0, 3.0);
  std::uniform_int_distribution<int64_t> small(-20, 20);
  for (int64_t i = 0; i < numel; ++i) {
    char* p = out.data() + static_cast<size_t>(i) * dtype_size(dt);
    switch (dt) {
      case DType::Float32: { float v = static_cast<float>(real(rng)); std::memcpy(p, &v, 4); break; }
      case DType::Float64: { double v = real(rng); std::memcpy(p, &v, 8); break; }
      case DType::Int32: { int32_t v = static_cast<int32_t>(small(rng)); std::memcpy(p, &v, 4); break; }
      case DType::Int64: { int64_t v = small(rng); std::memcpy(p, &v, 8); break; }
      case DType::Bool: *p = static_cast<char>(rng() & 1); break;
      case DType::UInt8: *p = static_cast<char>(rng() & 0xff); break;
    }
  }
  return out;
}

void write_file(const fs::path& p, const void* data, size_t bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

// One layout of a program: the "instance" block of the manifest. With data, the
// inputs and expected outputs are written next to it.
void write_instance(std::ostream& m, const fs::path& dir, const std::string& tag, const Graph& g,
                    const PtxProgram& prog, const Shape& shape, bool with_data, CpuBackend& cpu) {
  // Input shapes: static placeholders have theirs; symbolic ones (sym_input in
  // tests/gpu/graphs.h) have the instance's shape.
  std::vector<Shape> in_shapes(g.num_inputs());
  for (const Node& n : g.nodes()) {
    if (n.op != Op::Placeholder) continue;
    auto c = concrete(n.sym);
    in_shapes[static_cast<size_t>(n.index)] = c ? *c : shape;
  }
  const Bindings b = bind_sizes(g, in_shapes);
  const Schedule& s = prog.schedule;
  std::mt19937_64 rng(12345);
  std::vector<std::vector<char>> inputs;
  std::vector<TensorArg> in_args, out_args;
  std::vector<std::vector<int64_t>> sizes_keep, strides_keep;
  std::vector<std::vector<char>> outputs;
  m << "instance " << tag << "\n";
  m << "buffers " << s.buffer_node.size() << "\n";
  for (size_t k = 0; k < s.buffer_node.size(); ++k) {
    const Node& n = g.node(s.buffer_node[k]);
    std::vector<int64_t> sizes, strides(n.rank());
    for (const SymExpr& e : n.sym) sizes.push_back(eval_int(e, b));
    int64_t numel = 1;
    for (size_t d = n.rank(); d-- > 0;) {
      strides[d] = numel;
      numel *= std::max<int64_t>(sizes[d], 1);
    }
    const bool input = k < s.num_inputs, output = !input && k < s.num_inputs + s.num_outputs;
    std::string file = "-";
    if (with_data && input) file = tag + "_input" + std::to_string(k) + ".bin";
    if (with_data && output) file = tag + "_expected" + std::to_string(k) + ".bin";
    m << "buffer " << k << " " << dtype_name(n.dtype) << " " << dtype_size(n.dtype) << " " << numel << " "
      << (input ? "input" : output ? "output" : "temp") << " " << file << " " << n.rank();
    for (int64_t st : strides) m << " " << st;
    m << "\n";
    sizes_keep.push_back(sizes);
    strides_keep.push_back(strides);
    if (!with_data || !(input || output)) continue;
    if (input) {
      inputs.push_back(random_data(n.dtype, numel, rng));
      write_file(dir / file, inputs.back().data(), inputs.back().size());
    } else {
      outputs.emplace_back(static_cast<size_t>(numel) * dtype_size(n.dtype));
    }
  }
  m << "dims " << s.dim_exprs.size();
  for (const SymExpr& e : s.dim_exprs) m << " " << eval_int(e, b);
  m << "\n";
  for (const Step& st : s.steps) {
    FJ_CHECK(st.kind == Step::Kind::Kernel, "the GPU check graphs have no matmul");
    const PtxKernel& k = prog.kernels[static_cast<size_t>(st.index)];
    const int64_t extent = eval_int(k.extent, b);
    int64_t work = 0;
    for (const SymExpr& e : k.work) work = std::max(work, eval_int(e, b));
    const LaunchConfig lc = launch_config(extent, work);
    m << "kernel " << k.entry << " " << extent << " " << lc.grid << " " << lc.block << "\n";
  }
  if (with_data) {  // expected outputs: the CPU backend on the same inputs
    auto compiled = cpu.compile(g);
    FJ_CHECK(static_cast<bool>(compiled), compiled ? "" : compiled.error());
    size_t in_k = 0, out_k = 0;
    for (size_t k = 0; k < s.num_inputs + s.num_outputs; ++k) {
      TensorArg t;
      t.sizes = sizes_keep[k].data();
      t.strides = strides_keep[k].data();
      t.rank = static_cast<int>(sizes_keep[k].size());
      if (k < s.num_inputs) {
        t.data = inputs[in_k++].data();
        in_args.push_back(t);
      } else {
        t.data = outputs[out_k++].data();
        out_args.push_back(t);
      }
    }
    const int64_t status = (*compiled)->run(in_args, out_args, nullptr, &b);
    FJ_CHECK(status == 0, "the CPU backend reported a status");
    for (size_t o = 0; o < outputs.size(); ++o) {
      write_file(dir / (tag + "_expected" + std::to_string(s.num_inputs + o) + ".bin"), outputs[o].data(),
                 outputs[o].size());
    }
  }
  m << "end\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fj_gpu_bundle OUT_DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir);
  auto cpu = CpuBackend::create(CpuOptions{true, 1});
  if (!cpu) {
    std::fprintf(stderr, "fj_gpu_bundle: %s\n", cpu.error().c_str());
    return 1;
  }
  std::ofstream m(dir / "manifest.txt");
  m << "# framejit GPU check bundle (tests/gpu/bundle.cpp; format in tests/gpu/runner.cpp)\n";
  for (const auto& c : fj::gpu_graphs::all_cases()) {
    const Graph g = c.build(c.check_shape);
    m << "case " << c.name << "\n";
    for (const char* arch : {"sm_80", "sm_90"}) {
      auto prog = emit_ptx(g, NvptxOptions{arch});
      if (!prog) {
        std::fprintf(stderr, "fj_gpu_bundle: %s (%s): %s\n", c.name.c_str(), arch, prog.error().c_str());
        return 1;
      }
      const std::string file = c.name + "_" + arch + ".ptx";
      std::ofstream(dir / file) << prog->ptx;
      m << "ptx " << arch << " " << file << "\n";
    }
    auto prog = emit_ptx(g, NvptxOptions{"sm_90"});
    write_instance(m, dir, c.name + "_check", g, *prog, c.check_shape, true, **cpu);
    if (!c.bench_shape.empty()) {
      // The benchmark runs the check's PTX (symbolic sizes) on the large shape.
      const Graph big = c.build(c.bench_shape);
      auto big_prog = emit_ptx(big, NvptxOptions{"sm_90"});
      FJ_CHECK(big_prog && big_prog->ptx == prog->ptx, "the benchmark shape changed the PTX of " + c.name);
      write_instance(m, dir, c.name + "_bench", big, *big_prog, c.bench_shape, false, **cpu);
    }
  }
  std::printf("bundle written to %s\n", dir.c_str());
  return 0;
}
