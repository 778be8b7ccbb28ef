// The CUDA driver API, opened at run time: dlopen("libcuda.so.1") and entry points
// resolved by name (the `_v2` ones where CUDA renamed them), so that framejit builds
// and runs without CUDA and fails with a readable Error where no driver exists.
// Only the few types and functions the CUDA backend needs are declared here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jit/common.h"

namespace fj::jit::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uint64_t;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;

// The resolved entry points (null until Driver::get() succeeds).
struct DriverApi {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);  // cuDevicePrimaryCtxRelease_v2
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options,
                                 int* options, void** values);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name);
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared_bytes, CUstream stream,
                             void** params, void** extra);
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes);          // cuMemAlloc_v2
  CUresult (*cuMemFree)(CUdeviceptr ptr);                          // cuMemFree_v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes);  // _v2
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes);        // _v2
  CUresult (*cuMemcpyDtoD)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);  // _v2
  CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t bytes);  // _v2
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
};

// The process's driver, opened and initialized (cuInit) once. Errors: no
// libcuda.so.1 (no NVIDIA driver), a missing entry point, cuInit failing (no
// device, driver/kernel module mismatch).
Expected<const DriverApi*> driver();

// "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (invalid argument)"
std::string describe(const DriverApi& api, const char* what, CUresult r);

// A loaded PTX module and its functions; unloads on destruction.
class Module {
 public:
  Module(const DriverApi* api, CUmodule m) : api_(api), m_(m) {}
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Expected<CUfunction> function(const std::string& name) const;

 private:
  const DriverApi* api_;
  CUmodule m_;
};

// Device `ordinal`'s primary context, made current on the calling thread by each
// call that needs it. The verbs the CUDA backend and tools use.
class Device {
 public:
  static Expected<std::unique_ptr<Device>> open(int ordinal = 0);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return name_; }
  int compute_capability() const { return cc_; }  // 90 for sm_90
  // The PTX JIT-compiled by the driver; its error log is in the Error's message.
  Expected<std::unique_ptr<Module>> load_ptx(const std::string& ptx) const;
  Expected<CUdeviceptr> alloc(size_t bytes) const;
  void free(CUdeviceptr p) const;
  Status to_device(CUdeviceptr dst, const void* src, size_t bytes) const;
  Status to_host(void* dst, CUdeviceptr src, size_t bytes) const;
  Status copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) const;
  Status zero(CUdeviceptr dst, size_t bytes) const;
  // params: pointers to each kernel argument's value, as cuLaunchKernel takes them.
  Status launch(CUfunction fn, uint32_t grid, uint32_t block, std::vector<void*>& params) const;
  Status synchronize() const;

 private:
  Device(const DriverApi* api, CUdevice dev, CUcontext ctx) : api_(api), dev_(dev), ctx_(ctx) {}
  Status check(const char* what, CUresult r) const;
  Status make_current() const;
  const DriverApi* api_;
  CUdevice dev_;
  CUcontext ctx_;
  std::string name_;
  int cc_ = 0;
};

}  // namespace fj::jit::cuda
