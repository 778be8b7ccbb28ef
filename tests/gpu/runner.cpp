// The GPU side of scripts/gpu-check: a standalone program (C++17, no CUDA headers,
// no framejit) that opens the CUDA driver with dlopen, runs the PTX kernels of a
// bundle written by tests/gpu/bundle.cpp, compares their outputs with the CPU
// backend's, and times the benchmark layouts against a device-to-device copy.
//
//   c++ -O2 -std=c++17 runner.cpp -o runner -ldl && ./runner BUNDLE_DIR
//
// Exit status: 0 all checks passed, 1 a check failed, 77 skipped (no driver or
// no device: the reason is printed).
//
// manifest.txt, one record per line ('#' lines are comments):
//   case NAME                      a graph; the lines up to the next case are its
//   ptx ARCH FILE                  its PTX for sm_80 / sm_90
//   instance TAG                   one concrete layout (TAG ends in _check or _bench)
//   buffers N
//   buffer K DTYPE ELEM_BYTES NUMEL ROLE FILE RANK STRIDES...
//                                  ROLE input|output|temp; FILE '-' for none: an
//                                  input's data (a bench input: random), an
//                                  output's expected values; strides in elements
//   dims N VALUES...               KernelArgs::dims
//   kernel ENTRY EXTENT GRID BLOCK one launch, in order
//   end
// Kernel parameters (jit/cuda/nvptx_backend.h): the device addresses of the buffer
// pointer array, the strides (all buffers' in buffer order), the dims, the scalar
// inputs (none in these graphs) and an int64 status word, then the extent.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

// The few driver types and entry points used (CUDA's driver API ABI).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void*, void**, void**);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuGetErrorName)(CUresult, const char**);
} cu;

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "runner: %s\n", msg.c_str());
  std::exit(1);
}

void check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* name = nullptr;
  if (cu.cuGetErrorName) cu.cuGetErrorName(r, &name);
  fail(std::string(what) + ": " + (name ? name : std::to_string(r)));
}

[[noreturn]] void skip(const std::string& why) {
  std::printf("SKIP: %s\n", why.c_str());
  std::exit(77);
}

template <class F>
void sym(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr) skip(std::string("the CUDA driver lacks ") + name);
}

void open_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) skip(std::string("no CUDA driver (libcuda.so.1: ") + dlerror() + ")");
  sym(lib, "cuInit", &cu.cuInit);
  sym(lib, "cuDeviceGetCount", &cu.cuDeviceGetCount);
  sym(lib, "cuDeviceGet", &cu.cuDeviceGet);
  sym(lib, "cuDeviceGetName", &cu.cuDeviceGetName);
  sym(lib, "cuDeviceGetAttribute", &cu.cuDeviceGetAttribute);
  sym(lib, "cuDevicePrimaryCtxRetain", &cu.cuDevicePrimaryCtxRetain);
  sym(lib, "cuCtxSetCurrent", &cu.cuCtxSetCurrent);
  sym(lib, "cuCtxSynchronize", &cu.cuCtxSynchronize);
  sym(lib, "cuModuleLoadDataEx", &cu.cuModuleLoadDataEx);
  sym(lib, "cuModuleGetFunction", &cu.cuModuleGetFunction);
  sym(lib, "cuLaunchKernel", &cu.cuLaunchKernel);
  sym(lib, "cuMemAlloc_v2", &cu.cuMemAlloc);
  sym(lib, "cuMemFree_v2", &cu.cuMemFree);
  sym(lib, "cuMemcpyHtoD_v2", &cu.cuMemcpyHtoD);
  sym(lib, "cuMemcpyDtoH_v2", &cu.cuMemcpyDtoH);
  sym(lib, "cuMemcpyDtoD_v2", &cu.cuMemcpyDtoD);
  sym(lib, "cuMemsetD8_v2", &cu.cuMemsetD8);
  sym(lib, "cuGetErrorName", &cu.cuGetErrorName);
}

struct Buffer {
  std::string dtype, role, file;
  size_t elem = 0;
  int64_t numel = 0;
  std::vector<int64_t> strides;
  size_t bytes() const { return elem * static_cast<size_t>(numel); }
};
struct Launch {
  std::string entry;
  int64_t extent = 0;
  unsigned grid = 1, block = 1;
};
struct Instance {
  std::string tag;
  std::vector<Buffer> buffers;
  std::vector<int64_t> dims;
  std::vector<Launch> launches;
};
struct Case {
  std::string name;
  std::map<std::string, std::string> ptx;  // arch -> file
  std::vector<Instance> instances;
};

std::vector<Case> read_manifest(const std::string& dir) {
  std::ifstream in(dir + "/manifest.txt");
  if (!in) fail("cannot read " + dir + "/manifest.txt");
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::string kw;
    s >> kw;
    if (kw == "case") {
      cases.emplace_back();
      s >> cases.back().name;
    } else if (kw == "ptx") {
      std::string arch, file;
      s >> arch >> file;
      cases.back().ptx[arch] = file;
    } else if (kw == "instance") {
      cases.back().instances.emplace_back();
      s >> cases.back().instances.back().tag;
    } else if (kw == "buffer") {
      Buffer b;
      int k = 0, rank = 0;
      s >> k >> b.dtype >> b.elem >> b.numel >> b.role >> b.file >> rank;
      b.strides.resize(static_cast<size_t>(rank));
      for (int64_t& st : b.strides) s >> st;
      cases.back().instances.back().buffers.push_back(b);
    } else if (kw == "dims") {
      size_t n = 0;
      s >> n;
      auto& d = cases.back().instances.back().dims;
      d.resize(n);
      for (int64_t& v : d) s >> v;
    } else if (kw == "kernel") {
      Launch l;
      s >> l.entry >> l.extent >> l.grid >> l.block;
      cases.back().instances.back().launches.push_back(l);
    } else if (kw != "buffers" && kw != "end") {
      fail("unknown manifest record: " + line);
    }
  }
  return cases;
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read " + path);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

CUmodule load_ptx(const std::string& text) {
  static char log[16384];
  log[0] = 0;
  int opts[] = {5, 6};  // CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
  void* vals[] = {log, reinterpret_cast<void*>(sizeof(log) - 1)};
  CUmodule m = nullptr;
  CUresult r = cu.cuModuleLoadDataEx(&m, text.c_str(), 2, opts, vals);
  if (r != 0) {
    std::fprintf(stderr, "PTX JIT log:\n%s\n", log);
    check(r, "cuModuleLoadDataEx");
  }
  return m;
}

// The device side of one instance: buffers and the kernel-argument arrays.
struct Bound {
  std::vector<CUdeviceptr> bufs;
  CUdeviceptr ptrs = 0, strides = 0, dims = 0, scalars = 0, status = 0;
  size_t external_bytes = 0;  // bytes of inputs and outputs (the traffic a pass needs)
};

CUdeviceptr upload(const void* data, size_t bytes) {
  CUdeviceptr p = 0;
  check(cu.cuMemAlloc(&p, std::max<size_t>(bytes, 8)), "cuMemAlloc");
  if (bytes) check(cu.cuMemcpyHtoD(p, data, bytes), "cuMemcpyHtoD");
  return p;
}

Bound bind(const std::string& dir, const Instance& inst) {
  Bound b;
  std::vector<int64_t> strides;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> real(-3.f, 3.f);
  for (const Buffer& buf : inst.buffers) {
    CUdeviceptr p = 0;
    check(cu.cuMemAlloc(&p, std::max<size_t>(buf.bytes(), 8)), "cuMemAlloc");
    check(cu.cuMemsetD8(p, 0, buf.bytes()), "cuMemsetD8");
    if (buf.role == "input") {
      std::vector<char> data;
      if (buf.file != "-") {
        data = read_file(dir + "/" + buf.file);
        if (data.size() != buf.bytes()) fail("wrong size: " + buf.file);
      } else {  // a benchmark input: random values of its type
        data.resize(buf.bytes());
        for (int64_t i = 0; i < buf.numel; ++i) {
          if (buf.dtype == "f32") {
            const float v = real(rng);
            std::memcpy(data.data() + 4 * i, &v, 4);
          } else {
            data[static_cast<size_t>(i) * buf.elem] = static_cast<char>(rng() % 7);
          }
        }
      }
      check(cu.cuMemcpyHtoD(p, data.data(), data.size()), "cuMemcpyHtoD");
    }
    if (buf.role != "temp") b.external_bytes += buf.bytes();
    b.bufs.push_back(p);
    strides.insert(strides.end(), buf.strides.begin(), buf.strides.end());
  }
  const double no_scalars = 0;
  const int64_t zero = 0;
  b.ptrs = upload(b.bufs.data(), b.bufs.size() * sizeof(CUdeviceptr));
  b.strides = upload(strides.data(), strides.size() * sizeof(int64_t));
  b.dims = upload(inst.dims.data(), inst.dims.size() * sizeof(int64_t));
  b.scalars = upload(&no_scalars, sizeof(no_scalars));
  b.status = upload(&zero, sizeof(zero));
  return b;
}

void release(Bound& b) {
  for (CUdeviceptr p : b.bufs) cu.cuMemFree(p);
  for (CUdeviceptr p : {b.ptrs, b.strides, b.dims, b.scalars, b.status}) cu.cuMemFree(p);
}

void run(CUmodule m, const Instance& inst, Bound& b) {
  for (const Launch& l : inst.launches) {
    CUfunction fn = nullptr;
    check(cu.cuModuleGetFunction(&fn, m, l.entry.c_str()), "cuModuleGetFunction");
    int64_t extent = l.extent;
    void* params[] = {&b.ptrs, &b.strides, &b.dims, &b.scalars, &b.status, &extent};
    check(cu.cuLaunchKernel(fn, l.grid, 1, 1, l.block, 1, 1, 0, nullptr, params, nullptr), "cuLaunchKernel");
  }
}

template <class T>
bool close(T got, T want, double rtol, double atol) {
  if (std::isnan(static_cast<double>(want))) return std::isnan(static_cast<double>(got));
  if (std::isinf(static_cast<double>(want))) return got == want;
  return std::fabs(static_cast<double>(got) - static_cast<double>(want)) <= atol + rtol * std::fabs(static_cast<double>(want));
}

// Compares one output; returns "" or a description of the first mismatch.
std::string compare(const Buffer& buf, const std::vector<char>& got, const std::vector<char>& want) {
  for (int64_t i = 0; i < buf.numel; ++i) {
    const char* g = got.data() + static_cast<size_t>(i) * buf.elem;
    const char* w = want.data() + static_cast<size_t>(i) * buf.elem;
    bool ok = true;
    std::string gs, ws;
    if (buf.dtype == "f32") {
      float a, e;
      std::memcpy(&a, g, 4);
      std::memcpy(&e, w, 4);
      ok = close(a, e, 2e-5, 1e-5);
      gs = std::to_string(a), ws = std::to_string(e);
    } else if (buf.dtype == "f64") {
      double a, e;
      std::memcpy(&a, g, 8);
      std::memcpy(&e, w, 8);
      ok = close(a, e, 1e-9, 1e-12);
      gs = std::to_string(a), ws = std::to_string(e);
    } else {
      ok = std::memcmp(g, w, buf.elem) == 0;
      gs = ws = "(bytes)";
    }
    if (!ok) return "element " + std::to_string(i) + ": got " + gs + ", want " + ws;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: runner BUNDLE_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  open_driver();
  if (CUresult r = cu.cuInit(0); r != 0) skip("cuInit failed (" + std::to_string(r) + "): no usable GPU");
  int count = 0;
  if (cu.cuDeviceGetCount(&count) != 0 || count == 0) skip("no CUDA device");
  CUdevice dev = 0;
  check(cu.cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx = nullptr;
  check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  char name[256] = {};
  cu.cuDeviceGetName(name, 255, dev);
  int major = 0, minor = 0;
  cu.cuDeviceGetAttribute(&major, 75, dev);
  cu.cuDeviceGetAttribute(&minor, 76, dev);
  const std::string arch = major >= 9 ? "sm_90" : "sm_80";
  std::printf("device: %s (sm_%d%d), running the %s PTX\n", name, major, minor, arch.c_str());

  int failures = 0;
  for (const Case& c : read_manifest(dir)) {
    auto it = c.ptx.find(arch);
    if (it == c.ptx.end()) fail("no " + arch + " PTX for " + c.name);
    const std::vector<char> text = read_file(dir + "/" + it->second);
    CUmodule m = load_ptx(std::string(text.begin(), text.end()));
    for (const Instance& inst : c.instances) {
      Bound b = bind(dir, inst);
      run(m, inst, b);
      check(cu.cuCtxSynchronize(), ("running " + inst.tag).c_str());
      int64_t status = 0;
      check(cu.cuMemcpyDtoH(&status, b.status, 8), "cuMemcpyDtoH");
      const bool bench = inst.tag.size() > 6 && inst.tag.compare(inst.tag.size() - 6, 6, "_bench") == 0;
      if (!bench) {
        std::string problem = status != 0 ? "kernel status " + std::to_string(status) : "";
        for (size_t k = 0; k < inst.buffers.size() && problem.empty(); ++k) {
          const Buffer& buf = inst.buffers[k];
          if (buf.role != "output") continue;
          std::vector<char> got(buf.bytes());
          check(cu.cuMemcpyDtoH(got.data(), b.bufs[k], got.size()), "cuMemcpyDtoH");
          std::string diff = compare(buf, got, read_file(dir + "/" + buf.file));
          if (!diff.empty()) problem = "output buffer " + std::to_string(k) + ", " + diff;
        }
        std::printf("%-28s %s%s\n", inst.tag.c_str(), problem.empty() ? "PASS" : "FAIL: ", problem.c_str());
        failures += problem.empty() ? 0 : 1;
      } else {
        const int reps = 20;
        auto time = [&](auto&& body) {
          body();
          check(cu.cuCtxSynchronize(), "warm-up");
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < reps; ++i) body();
          check(cu.cuCtxSynchronize(), "timed runs");
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
        };
        const double t_kernel = time([&] { run(m, inst, b); });
        // The reference: a device-to-device copy of the first input (reads and
        // writes as many bytes as a pass over an input and an output of its size).
        const size_t copy_bytes = inst.buffers[0].bytes();
        CUdeviceptr dst = 0;
        check(cu.cuMemAlloc(&dst, copy_bytes), "cuMemAlloc");
        const double t_copy = time([&] { check(cu.cuMemcpyDtoD(dst, b.bufs[0], copy_bytes), "cuMemcpyDtoD"); });
        cu.cuMemFree(dst);
        const double bw = static_cast<double>(b.external_bytes) / t_kernel / 1e9;
        const double bw_copy = 2.0 * static_cast<double>(copy_bytes) / t_copy / 1e9;
        std::printf("%-28s %8.3f ms  %7.1f GB/s  (copy %7.1f GB/s)  ratio %.2f\n", inst.tag.c_str(),
                    t_kernel * 1e3, bw, bw_copy, bw / bw_copy);
      }
      release(b);
    }
  }
  std::printf("%s\n", failures == 0 ? "all checks passed" : (std::to_string(failures) + " check(s) failed").c_str());
  return failures == 0 ? 0 : 1;
}
