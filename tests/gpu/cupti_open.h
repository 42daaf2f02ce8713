/* What the CUPTI clients with none of gpuflame in them (cupti_toggle.c,
 * api_records.c) share: libcupti, which PyTorch's wheels put beside
 * libcudart, not on the loader's path; and the launch calls' IDs.
 * Header-only: each client is one file built on its own
 * (scripts/gpu-bundle.sh). */
#ifndef GPUFLAME_TESTS_GPU_CUPTI_OPEN_H_
#define GPUFLAME_TESTS_GPU_CUPTI_OPEN_H_

#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The driver's kernel and graph launches, as gpuflame's callbacks take them
 * (cupti/kernel_time_cupti.cc's IsLaunch). */
static const CUpti_CallbackId driver_launch_ids[] = {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                                                     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                                                     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
                                                     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
                                                     CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
                                                     CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
                                                     CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
                                                     CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};
#define DRIVER_LAUNCH_IDS (sizeof(driver_launch_ids) / sizeof(driver_launch_ids[0]))

/* The runtime's launches: its kernel launches (the first
 * RUNTIME_KERNEL_LAUNCH_IDS), then its graph launches. */
static const CUpti_CallbackId runtime_launch_ids[] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                                      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                                                      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
                                                      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
                                                      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
                                                      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
                                                      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                                                      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000};
#define RUNTIME_LAUNCH_IDS (sizeof(runtime_launch_ids) / sizeof(runtime_launch_ids[0]))
#define RUNTIME_KERNEL_LAUNCH_IDS 6

static int cupti_beside_cudart(struct dl_phdr_info *info, size_t size, void *path) {
  (void)size;
  const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
  if (!slash || strncmp(slash + 1, "libcudart.so", 12) != 0) return 0;
  snprintf(path, 4096, "%.*s/libcupti.so.13", (int)(slash - info->dlpi_name), info->dlpi_name);
  return 1;
}

/* The one already loaded, else the loader's, else the one beside libcudart,
 * else GPUFLAME_CUPTI_PATH's; NULL (and said, as |who|) if none. */
static void *open_cupti(const char *who) {
  void *lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcupti.so.13", RTLD_NOW);
  if (!lib) {
    char path[4096] = "";
    dl_iterate_phdr(cupti_beside_cudart, path);
    if (*path) lib = dlopen(path, RTLD_NOW);
  }
  if (!lib && getenv("GPUFLAME_CUPTI_PATH")) lib = dlopen(getenv("GPUFLAME_CUPTI_PATH"), RTLD_NOW);
  if (!lib) fprintf(stderr, "%s: no libcupti\n", who);
  return lib;
}

#endif /* GPUFLAME_TESTS_GPU_CUPTI_OPEN_H_ */
