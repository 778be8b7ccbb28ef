// The CUDA driver loader (jit/cuda/cuda_driver.h): dlopen, dlsym, and thin checked
// wrappers. Nothing here runs unless a caller asks for the driver.
#include "jit/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace fj::jit::cuda {
namespace {

constexpr int kCuDeviceAttributeComputeCapabilityMajor = 75;
constexpr int kCuDeviceAttributeComputeCapabilityMinor = 76;
// cuModuleLoadDataEx options (CUjit_option values).
constexpr int kCuJitInfoLogBuffer = 3;
constexpr int kCuJitInfoLogBufferSizeBytes = 4;
constexpr int kCuJitErrorLogBuffer = 5;
constexpr int kCuJitErrorLogBufferSizeBytes = 6;

template <class F>
bool resolve(void* lib, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

// The driver's entry points, or why there is no usable driver.
Expected<DriverApi> load() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return Error{std::string("no CUDA driver: cannot open libcuda.so.1 (") + (why ? why : "unknown") + ")"};
  }
  std::string missing;
  DriverApi a{};
  resolve(lib, "cuInit", &a.cuInit, &missing);
  resolve(lib, "cuDriverGetVersion", &a.cuDriverGetVersion, &missing);
  resolve(lib, "cuDeviceGetCount", &a.cuDeviceGetCount, &missing);
  resolve(lib, "cuDeviceGet", &a.cuDeviceGet, &missing);
  resolve(lib, "cuDeviceGetName", &a.cuDeviceGetName, &missing);
  resolve(lib, "cuDeviceGetAttribute", &a.cuDeviceGetAttribute, &missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", &a.cuDevicePrimaryCtxRetain, &missing);
  resolve(lib, "cuDevicePrimaryCtxRelease_v2", &a.cuDevicePrimaryCtxRelease, &missing);
  resolve(lib, "cuCtxSetCurrent", &a.cuCtxSetCurrent, &missing);
  resolve(lib, "cuCtxSynchronize", &a.cuCtxSynchronize, &missing);
  resolve(lib, "cuModuleLoadDataEx", &a.cuModuleLoadDataEx, &missing);
  resolve(lib, "cuModuleUnload", &a.cuModuleUnload, &missing);
  resolve(lib, "cuModuleGetFunction", &a.cuModuleGetFunction, &missing);
  resolve(lib, "cuLaunchKernel", &a.cuLaunchKernel, &missing);
  resolve(lib, "cuMemAlloc_v2", &a.cuMemAlloc, &missing);
  resolve(lib, "cuMemFree_v2", &a.cuMemFree, &missing);
  resolve(lib, "cuMemcpyHtoD_v2", &a.cuMemcpyHtoD, &missing);
  resolve(lib, "cuMemcpyDtoH_v2", &a.cuMemcpyDtoH, &missing);
  resolve(lib, "cuMemcpyDtoD_v2", &a.cuMemcpyDtoD, &missing);
  resolve(lib, "cuMemsetD8_v2", &a.cuMemsetD8, &missing);
  resolve(lib, "cuGetErrorName", &a.cuGetErrorName, &missing);
  resolve(lib, "cuGetErrorString", &a.cuGetErrorString, &missing);
  if (!missing.empty()) return Error{"the CUDA driver lacks " + missing};
  if (CUresult r = a.cuInit(0); r != 0) return Error{describe(a, "cuInit", r)};
  return a;  // the library stays open for the process's lifetime
}

}  // namespace

Expected<const DriverApi*> driver() {
  static const Expected<DriverApi> loaded = load();
  if (loaded.failed()) return Error{loaded.error()};
  return &*loaded;
}

std::string describe(const DriverApi& api, const char* what, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
  return std::string(what) + ": " + (name ? name : "CUDA error " + std::to_string(r)) +
         (text ? std::string(" (") + text + ")" : std::string());
}

Module::~Module() {
  if (m_ != nullptr) api_->cuModuleUnload(m_);
}

Expected<CUfunction> Module::function(const std::string& name) const {
  CUfunction fn = nullptr;
  if (CUresult r = api_->cuModuleGetFunction(&fn, m_, name.c_str()); r != 0) {
    return Error{describe(*api_, ("cuModuleGetFunction(" + name + ")").c_str(), r)};
  }
  return fn;
}

Expected<std::unique_ptr<Device>> Device::open(int ordinal) {
  auto api = driver();
  if (!api) return api.take_error();
  const DriverApi& a = **api;
  int count = 0;
  if (CUresult r = a.cuDeviceGetCount(&count); r != 0) return Error{describe(a, "cuDeviceGetCount", r)};
  if (ordinal < 0 || ordinal >= count) {
    return Error{"no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(count) + " present)"};
  }
  CUdevice dev = 0;
  if (CUresult r = a.cuDeviceGet(&dev, ordinal); r != 0) return Error{describe(a, "cuDeviceGet", r)};
  CUcontext ctx = nullptr;
  if (CUresult r = a.cuDevicePrimaryCtxRetain(&ctx, dev); r != 0) {
    return Error{describe(a, "cuDevicePrimaryCtxRetain", r)};
  }
  std::unique_ptr<Device> d(new Device(*api, dev, ctx));
  char name[256] = {};
  a.cuDeviceGetName(name, sizeof(name) - 1, dev);
  d->name_ = name;
  int major = 0, minor = 0;
  a.cuDeviceGetAttribute(&major, kCuDeviceAttributeComputeCapabilityMajor, dev);
  a.cuDeviceGetAttribute(&minor, kCuDeviceAttributeComputeCapabilityMinor, dev);
  d->cc_ = major * 10 + minor;
  return d;
}

Device::~Device() { api_->cuDevicePrimaryCtxRelease(dev_); }

Status Device::check(const char* what, CUresult r) const {
  if (r == 0) return ok();
  return Error{describe(*api_, what, r)};
}

Status Device::make_current() const { return check("cuCtxSetCurrent", api_->cuCtxSetCurrent(ctx_)); }

Expected<std::unique_ptr<Module>> Device::load_ptx(const std::string& ptx) const {
  FJ_TRY(make_current());
  std::vector<char> error_log(16384, '\0'), info_log(4096, '\0');
  int options[] = {kCuJitErrorLogBuffer, kCuJitErrorLogBufferSizeBytes, kCuJitInfoLogBuffer,
                   kCuJitInfoLogBufferSizeBytes};
  void* values[] = {error_log.data(), reinterpret_cast<void*>(error_log.size() - 1), info_log.data(),
                    reinterpret_cast<void*>(info_log.size() - 1)};
  CUmodule m = nullptr;
  if (CUresult r = api_->cuModuleLoadDataEx(&m, ptx.c_str(), 4, options, values); r != 0) {
    std::string msg = describe(*api_, "cuModuleLoadDataEx", r);
    if (error_log[0] != '\0') msg += "; PTX JIT log:\n" + std::string(error_log.data());
    return Error{msg};
  }
  return std::make_unique<Module>(api_, m);
}

Expected<CUdeviceptr> Device::alloc(size_t bytes) const {
  FJ_TRY(make_current());
  CUdeviceptr p = 0;
  FJ_TRY(check("cuMemAlloc", api_->cuMemAlloc(&p, bytes == 0 ? 1 : bytes)));
  return p;
}

void Device::free(CUdeviceptr p) const {
  if (p != 0 && make_current().ok()) api_->cuMemFree(p);
}

Status Device::to_device(CUdeviceptr dst, const void* src, size_t bytes) const {
  FJ_TRY(make_current());
  return bytes == 0 ? ok() : check("cuMemcpyHtoD", api_->cuMemcpyHtoD(dst, src, bytes));
}

Status Device::to_host(void* dst, CUdeviceptr src, size_t bytes) const {
  FJ_TRY(make_current());
  return bytes == 0 ? ok() : check("cuMemcpyDtoH", api_->cuMemcpyDtoH(dst, src, bytes));
}

Status Device::copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) const {
  FJ_TRY(make_current());
  return bytes == 0 ? ok() : check("cuMemcpyDtoD", api_->cuMemcpyDtoD(dst, src, bytes));
}

Status Device::zero(CUdeviceptr dst, size_t bytes) const {
  FJ_TRY(make_current());
  return bytes == 0 ? ok() : check("cuMemsetD8", api_->cuMemsetD8(dst, 0, bytes));
}

Status Device::launch(CUfunction fn, uint32_t grid, uint32_t block, std::vector<void*>& params) const {
  FJ_TRY(make_current());
  return check("cuLaunchKernel",
               api_->cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, nullptr, params.data(), nullptr));
}

Status Device::synchronize() const {
  FJ_TRY(make_current());
  return check("cuCtxSynchronize", api_->cuCtxSynchronize());
}

}  // namespace fj::jit::cuda
